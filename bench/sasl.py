"""The broker's CPU cost of one SASL authentication, per mechanism: microseconds per exchange.

Run with ``.venv/bin/python bench/sasl.py``.  Each operation is a whole
server-side exchange on the sans-IO authenticator (handshake, then every
client message evaluated), as one connection costs the reactor.  The client's
messages are computed once beforehand with kafka-python's SCRAM client (its
PBKDF2 is the client's cost, not the broker's), against a fixed server nonce
so they can be replayed.  Timed in loops of ``timeit.autorange`` (at least
0.2 s), best of 3.
"""

from __future__ import annotations

import timeit

from kafka.net.sasl.scram import ScramClient

from twisted_kafka.sasl.authenticator import SaslServerConfig
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.scram import ScramServer
from twisted_kafka.sasl.scram_credentials import MECHANISMS, credential_from_password

NONCE = "benchservernonce0123456789"
ITERATIONS = 4096


def scram_messages(store, mechanism: str) -> list[bytes]:
    client = ScramClient("bench", "bench-secret", mechanism)
    first = client.first_message()
    server = ScramServer(MECHANISMS[mechanism], store, server_nonce=NONCE)
    client.process_server_first_message(server.evaluate(first))
    final = client.final_message()
    client.process_server_final_message(server.evaluate(final))
    return [first, final]


def main() -> None:
    credentials = {name: credential_from_password(mechanism, "bench-secret", ITERATIONS)
                   for name, mechanism in MECHANISMS.items()}
    store = InMemoryScramCredentialStore({"bench": credentials})
    config = SaslServerConfig("BENCH", ("PLAIN", *MECHANISMS), {"bench": "bench-secret"}, store)
    cases = {"PLAIN": [b"\0bench\0bench-secret"]}
    cases.update({name: scram_messages(store, name) for name in MECHANISMS})

    print(f"{'mechanism':<15} {'us/authentication':>18}")
    for mechanism, messages in cases.items():
        def authenticate(mechanism=mechanism, messages=messages):
            authenticator = config.new_authenticator()
            authenticator.handshake(1, mechanism)
            if mechanism != "PLAIN":   # the same exchange as the precomputed one: the fixed server nonce
                authenticator._server = ScramServer(MECHANISMS[mechanism], store, server_nonce=NONCE)
            for message in messages:
                step = authenticator.authenticate(2, message)
                assert step.failure is None, step.failure
            assert authenticator.principal == "User:bench"

        timer = timeit.Timer(authenticate)
        number, _ = timer.autorange()
        best = min(timer.repeat(3, number)) / number
        print(f"{mechanism:<15} {best * 1e6:>18.1f}")


if __name__ == "__main__":
    main()
