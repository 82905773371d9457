"""Certificates made in the test (trustme) and brokers with an SSL listener.

``Pki(tmp_path)`` holds a CA and writes PEM files: the broker's key store
(key + chain in one file, for ``ssl.keystore.location`` with
``ssl.keystore.type=PEM``), the CA (``ssl.truststore.location`` and the
clients' ``ssl.ca.location``), and client certificates (``client(name)``).

``tls_overrides(pki, ...)`` are the broker overrides of a broker with three
listeners: PLAINTEXT (data plane, inter-broker), SSL (data plane) and
CONTROLLER (the control plane, plaintext).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme


@dataclass(frozen=True)
class ClientCert:
    name: str
    cert: str        # PEM certificate chain file
    key: str         # PEM private key file
    both: str        # key and chain in one file (kafka-python / aiokafka take them apart anyway)


class Pki:
    def __init__(self, directory: Path, name: str = "ca", key_type: str = "ecdsa"):
        """``key_type``: "ecdsa" (P-256, trustme's default) or "rsa" (2048 bits), for the CA and every certificate."""
        self.dir = Path(directory)
        self.key_type = trustme.KeyType[key_type.upper()]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.ca = trustme.CA(organization_name=f"twisted_kafka test {name}", key_type=self.key_type)
        self.ca_file = str(self.dir / f"{name}.pem")
        self.ca.cert_pem.write_to_path(self.ca_file)
        self._serial = 0

    def server_keystore(self, *hosts: str, filename: str | None = None, common_name: str = "broker") -> str:
        """Write a PEM key store (key + chain) for ``hosts``; returns its path."""
        cert = self.ca.issue_cert(*(hosts or ("localhost", "127.0.0.1")), common_name=common_name,
                                    organization_unit_name="brokers", key_type=self.key_type)
        self._serial += 1
        path = self.dir / (filename or f"{self.name}-server-{self._serial}.pem")
        path.write_bytes(cert.private_key_pem.bytes() + b"".join(blob.bytes() for blob in cert.cert_chain_pems))
        return str(path)

    def client(self, common_name: str, organization_unit: str = "clients") -> ClientCert:
        cert = self.ca.issue_cert(f"{common_name}.clients.test", common_name=common_name,
                                  organization_unit_name=organization_unit, key_type=self.key_type)
        base = self.dir / f"{self.name}-client-{common_name}"
        cert_path, key_path, both = f"{base}.crt", f"{base}.key", f"{base}.pem"
        Path(cert_path).write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
        Path(key_path).write_bytes(cert.private_key_pem.bytes())
        Path(both).write_bytes(cert.private_key_pem.bytes() + b"".join(b.bytes() for b in cert.cert_chain_pems))
        return ClientCert(common_name, cert_path, key_path, both)


def tls_overrides(pki: Pki, keystore: str, *, client_auth: str = "none", **extra: str) -> dict[str, str]:
    listeners = ("PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SSL://127.0.0.1:{port:SSL},"
                 "CONTROLLER://127.0.0.1:{port:CONTROLLER}")
    overrides = {
        "listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "control.plane.listener.name": "CONTROLLER",
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.location": keystore,
        "listener.name.ssl.ssl.truststore.type": "PEM",
        "listener.name.ssl.ssl.truststore.location": pki.ca_file,
        "listener.name.ssl.ssl.client.auth": client_auth,
        "offsets.topic.replication.factor": "1",
    }
    overrides.update({k.replace("_", "."): v for k, v in extra.items()})
    return overrides


def librdkafka_ssl(pki: Pki, bootstrap: str, client: ClientCert | None = None, **extra) -> dict:
    """confluent-kafka settings for an SSL connection trusting ``pki``'s CA."""
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": pki.ca_file,
            "ssl.endpoint.identification.algorithm": "https"}
    if client is not None:
        conf.update({"ssl.certificate.location": client.cert, "ssl.key.location": client.key})
    conf.update(extra)
    return conf
