"""Certificates made on the fly for a test broker's TLS listener, with ``cryptography``.

A test CA and a broker certificate it signed (``localhost`` and ``127.0.0.1``
as subject alternative names, so clients that check the host name -- as
librdkafka, kafka-python and aiokafka do by default -- accept it on
loopback), written as PEM files:

    pki = TestPki.create(directory)
    pki.ca_file         # the CA certificate: a client's ssl.ca.location / ssl_cafile
    pki.keystore_file   # the broker's key and certificate chain: ssl.keystore.location (type PEM)
    pki.ssl_context()   # an ssl.SSLContext trusting the CA (aiokafka's ssl_context)

Keys are P-256 (EC): made in about a millisecond, where an RSA key takes
tens.  Nothing is kept after the test: the files live in the broker's
directory.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TestPki"]

_LIFETIME = datetime.timedelta(days=2)


@dataclass(frozen=True)
class TestPki:
    ca_file: Path
    keystore_file: Path

    __test__ = False      # not a pytest test class, whatever its name

    @classmethod
    def create(cls, directory, hostnames: tuple[str, ...] = ("localhost", "127.0.0.1")) -> TestPki:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)   # clock skew

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "twisted_kafka.testing"),
                             x509.NameAttribute(NameOID.COMMON_NAME, "twisted_kafka test CA")])
        ca_cert = (x509.CertificateBuilder()
                   .subject_name(ca_name).issuer_name(ca_name)
                   .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now).not_valid_after(now + _LIFETIME)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                   .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                                key_encipherment=False, data_encipherment=False, key_agreement=False,
                                                key_cert_sign=True, crl_sign=True, encipher_only=False,
                                                decipher_only=False), critical=True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
                   .sign(ca_key, hashes.SHA256()))

        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hostnames:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "twisted_kafka.testing"),
                                         x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])]))
                .issuer_name(ca_name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now).not_valid_after(now + _LIFETIME)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName(names), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))

        ca_file = directory / "ca.pem"
        keystore_file = directory / "broker.pem"
        ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        keystore_file.touch(mode=0o600)
        keystore_file.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
            + cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM))
        return cls(ca_file, keystore_file)

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the test CA and checks the host name."""
        return ssl.create_default_context(cafile=str(self.ca_file))
