"""A burst of failed logins: do the broker's connections and descriptors come back, and can a real client
log in meanwhile?

Run with ``.venv/bin/python bench/failed_logins.py`` (``--count 1000`` failed logins per burst,
``--listener SASL_PLAINTEXT`` or ``SASL_SSL`` for one listener only, ``--nofile 400`` to run the broker
under ``ulimit -n 400``).  One broker is started the README way with a PLAINTEXT listener (setup) and
two SASL listeners, SASL_PLAINTEXT and SASL_SSL (a CA and broker certificate made for the run with
trustme), PLAIN and SCRAM-SHA-256 enabled, ``connection.failed.authentication.delay.ms`` at Kafka's
default of 100 ms (``--delay-ms``) and ``max.connections`` 500 (``--max-connections``): failed logins
that were never closed would fill it within one burst and lock every client out.

Per listener, a burst of N failed logins comes from 127.0.0.2, as fast as ``--workers`` threads make
them over raw sockets, a quarter each of: a wrong PLAIN password, a wrong SCRAM-SHA-256 proof, an
unsupported mechanism (GSSAPI) and a Metadata request before authentication (after an ApiVersions, which
is answered).  The attacker reads each answer and then keeps every socket open, never closing it:
whatever is released, the broker released.
Meanwhile, from 127.0.0.1:

* a sampler reads, every 20 ms, the broker's descriptors (``/proc/<pid>/fd``) and the connections
  127.0.0.2 holds in the connection quotas (the admin REST endpoint's ``/v1/connections/ips``, over one
  kept-alive HTTP connection);
* a real client -- a new confluent-kafka (librdkafka) AdminClient each time, with the right PLAIN
  credentials -- logs in and lists topics, again and again, from before the burst until a second after
  everything is back.

Reported per burst: descriptors and the attacker's open connections before, at their peak during the
burst, and after; how long after the last failed login both were back where they started (the claim:
within the delay plus one second); the real client's logins (all must succeed, with their slowest time);
whether the broker closed every attacker socket (EOF); and the client's CPU (this process: attacker,
sampler and librdkafka's threads).  Every listener runs a warm-up burst of 100 (not reported), then a
burst of N/2 then N, and the N-scaling check compares the two bursts' durations (``bench/common.py``).
Waiting for the release ends on the release, never on a timeout: a release that does not come within
60 s aborts the benchmark.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import ssl
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kafka.net.sasl.scram import ScramClient

from bench.common import ClientCpu, report_scaling, scaling_check
from support.broker_process import BrokerProcess
from support.nofile import NofileBroker, open_fds
from support.raw_client import Closed, RawClient
from support.sasl_listeners import sasl_listener_overrides
from support.tls import Pki
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from twisted_kafka.protocol.registry import ApiKey

ATTACKER_IP = "127.0.0.2"
SAMPLE_INTERVAL = 0.02
#: A release that has not come by then is a failure of the broker, not a figure.
RELEASE_TIMEOUT = 60.0
#: The real client keeps logging in this long after everything is back.
AFTERWARDS = 1.0
#: Failed logins per listener before the measured bursts (not reported).
WARMUP = 100
#: Seconds an attacker's connection attempt or read may take.
ATTACKER_TIMEOUT = 10.0


# -- the attacker ------------------------------------------------------------------------------------

def wrong_plain_password(client: RawClient) -> None:
    client.send_request(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
    client.send_request(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0guess"), 2)
    assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[1].error_code == 0
    assert client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1].error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def wrong_scram_proof(client: RawClient) -> None:
    scram = ScramClient("bob", "not-bobs-secret", "SCRAM-SHA-256")
    client.send_request(SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256"), 1)
    client.send_request(SaslAuthenticateRequest(version=2, auth_bytes=scram.first_message()), 2)
    assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[1].error_code == 0
    first = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]
    scram.process_server_first_message(first.auth_bytes)
    final = client.request(SaslAuthenticateRequest(version=2, auth_bytes=scram.final_message()), 2)
    assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def unsupported_mechanism(client: RawClient) -> None:
    response = client.request(SaslHandshakeRequest(version=1, mechanism="GSSAPI"), 1)
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def request_before_authentication(client: RawClient) -> None:
    # ApiVersions is answered before authentication: the broker has taken the connection (an attacker
    # that only connects and writes overruns the listen backlog, and times its SYN retries, not the broker).
    assert client.api_versions(version=3).error_code == 0
    client.send_request(MetadataRequest(version=1, topics=None), 1)     # never answered


FAILURES = (wrong_plain_password, wrong_scram_proof, unsupported_mechanism, request_before_authentication)


def burst(port: int, count: int, workers: int, tls: ssl.SSLContext | None
          ) -> tuple[list[RawClient], list[str], float, float]:
    """``count`` failed logins; returns the attacker's sockets (still open), the attempts that could not
    even connect (a broker at its connection limit keeps them in the backlog until they time out), and the
    burst's start and end."""
    def one(i: int) -> RawClient | str:
        try:
            client = RawClient(port, source=ATTACKER_IP, tls=tls, timeout=ATTACKER_TIMEOUT)
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        FAILURES[i % len(FAILURES)](client)
        return client

    started = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        outcomes = list(pool.map(one, range(count)))
    clients = [o for o in outcomes if isinstance(o, RawClient)]
    return clients, [o for o in outcomes if isinstance(o, str)], started, time.monotonic()


def closed_by_broker(client: RawClient) -> bool:
    """Whether the broker closed this socket (EOF or reset); whatever response was left unread is skipped."""
    try:
        while True:
            client.read_frame(timeout=2)
    except Closed:
        return True
    except (TimeoutError, OSError):
        return False


# -- what is watched meanwhile -------------------------------------------------------------------------

class Admin:
    """The admin REST endpoint over one kept-alive connection (so sampling holds one steady descriptor)."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.http = http.client.HTTPConnection(host, int(port), timeout=10)

    def open_from(self, ip: str) -> int:
        """The connections ``ip`` holds in the connection quotas (closing ones included, until they are gone)."""
        self.http.request("GET", f"/v1/connections/ips?ip={ip}")
        return json.loads(self.http.getresponse().read())["ips"][0]["open"]


@dataclass
class Samples:
    rows: list[tuple[float, int, int]] = field(default_factory=list)    # (time, descriptors, attacker open)

    def peak(self, since: float) -> tuple[int, int]:
        rows = [r for r in self.rows if r[0] >= since]
        return max(r[1] for r in rows), max(r[2] for r in rows)


def sample(broker, admin: Admin, samples: Samples, stop: threading.Event) -> None:
    while not stop.is_set():
        open_now = admin.open_from(ATTACKER_IP)
        samples.rows.append((time.monotonic(), open_fds(broker.pid), open_now))
        stop.wait(SAMPLE_INTERVAL)


@dataclass
class Logins:
    times: list[tuple[float, float]] = field(default_factory=list)    # (started, seconds) of each success
    failures: list[tuple[float, str]] = field(default_factory=list)


def real_client(config: dict, logins: Logins, stop: threading.Event) -> None:
    """Log in with the right credentials, again and again, each time as a new client (a new connection)."""
    while not stop.is_set():
        started = time.monotonic()
        admin = AdminClient({**config, "log_level": 0})
        try:
            admin.list_topics(timeout=10)
            logins.times.append((started, time.monotonic() - started))
        except KafkaException as exc:
            logins.failures.append((started, str(exc)))


# -- one burst ------------------------------------------------------------------------------------------

@dataclass
class Result:
    listener: str
    count: int
    burst_seconds: float
    before: tuple[int, int]
    peak: tuple[int, int]
    after: tuple[int, int]
    back_after: float           # seconds from the last failed login until everything was back
    logins: Logins
    logins_during: int          # real logins started between the burst's start and the release
    closed: int                 # attacker sockets the broker closed
    client_cpu: float


def run(broker, pki: Pki, listener: str, count: int, workers: int) -> Result:
    port = broker.port(listener)
    tls = ssl.create_default_context(cafile=pki.ca_file) if listener == "SASL_SSL" else None
    config = {"bootstrap.servers": f"localhost:{port}", "security.protocol": listener, "sasl.mechanism": "PLAIN",
              "sasl.username": "alice", "sasl.password": "alice-secret"}
    if tls is not None:
        config["ssl.ca.location"] = pki.ca_file
    admin = Admin(broker.admin_url)
    admin.open_from(ATTACKER_IP)          # the sampling connection is open before the baseline
    before = (open_fds(broker.pid), admin.open_from(ATTACKER_IP))
    samples, logins = Samples(), Logins()
    stop_sampling, stop_logins = threading.Event(), threading.Event()
    sampler = threading.Thread(target=sample, args=(broker, admin, samples, stop_sampling), daemon=True)
    prober = threading.Thread(target=real_client, args=(config, logins, stop_logins), daemon=True)
    cpu = ClientCpu().start()
    sampler.start()
    prober.start()
    clients: list[RawClient] = []
    try:
        while not logins.times and not logins.failures:     # the real client logs in before the burst
            time.sleep(SAMPLE_INTERVAL)
        clients, refused, started, ended = burst(port, count, workers, tls)
        if refused:
            print(f"{listener}: {len(refused)} of {count} failed-login attempts could not connect, e.g. {refused[0]}")

        # Back where it started: no attacker connection left, and no more descriptors than before except
        # the real client's own connections of the moment (at most two: bootstrap and broker).
        deadline = time.monotonic() + RELEASE_TIMEOUT
        while True:
            rows = [r for r in samples.rows if r[0] > ended]
            back = next((r for r in rows if r[2] == 0 and r[1] <= before[0] + 2), None)
            if back is not None:
                break
            if time.monotonic() > deadline:
                failures = len(logins.failures)
                raise SystemExit(f"{listener}: the broker did not release the failed logins within "
                                 f"{RELEASE_TIMEOUT} s: {samples.rows[-1][1]} descriptors (before: {before[0]}), "
                                 f"{samples.rows[-1][2]} connections from {ATTACKER_IP} still open; the real "
                                 f"client failed {failures} of {failures + len(logins.times)} logins")
            time.sleep(SAMPLE_INTERVAL)
        time.sleep(AFTERWARDS)       # the real client goes on logging in after the release
    finally:
        stop_logins.set()
        prober.join()
        stop_sampling.set()
        sampler.join()
        client_cpu = cpu.stop()
    while open_fds(broker.pid) > before[0]:   # the real client's last connection
        time.sleep(SAMPLE_INTERVAL)
    after = (open_fds(broker.pid), admin.open_from(ATTACKER_IP))
    closed = sum(closed_by_broker(client) for client in clients)
    for client in clients:
        client.close()
    during = sum(1 for t, _ in logins.times if started <= t <= back[0])
    return Result(listener, count, ended - started, before, samples.peak(started), after, back[0] - ended,
                  logins, during, closed, client_cpu)


def report(result: Result, delay_ms: int) -> None:
    logins = result.logins
    slowest = max(seconds for _, seconds in logins.times) if logins.times else float("nan")
    within = result.back_after <= delay_ms / 1000.0 + 1.0
    print(f"\n{result.listener}: {result.count} failed logins in {result.burst_seconds:.2f} s "
          f"({result.count / result.burst_seconds:,.0f}/s)")
    print(f"  broker descriptors      before {result.before[0]:>5}   peak {result.peak[0]:>5}   "
          f"after {result.after[0]:>5}")
    print(f"  attacker's connections  before {result.before[1]:>5}   peak {result.peak[1]:>5}   "
          f"after {result.after[1]:>5}")
    print(f"  everything back {result.back_after * 1000:.0f} ms after the last failed login "
          f"({'within' if within else 'NOT within'} connection.failed.authentication.delay.ms + 1 s = "
          f"{delay_ms + 1000} ms)")
    print(f"  broker closed {result.closed} of {result.count} attacker sockets")
    print(f"  real client (confluent-kafka, PLAIN): {len(logins.times)} logins, {result.logins_during} of them "
          f"during the burst and release, {len(logins.failures)} failed; slowest {slowest * 1000:.0f} ms")
    for started, error in logins.failures[:3]:
        print(f"    failed login at +{started:.2f}: {error}")
    print(f"  client CPU {result.client_cpu:.2f} s ({result.client_cpu / result.count * 1e3:.2f} ms per failed "
          "login, attacker, sampler and real client together)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="failed logins per burst (N)")
    parser.add_argument("--listener", choices=("SASL_PLAINTEXT", "SASL_SSL"), action="append",
                        help="the listener(s) attacked (default: both)")
    parser.add_argument("--workers", type=int, default=16, help="attacker threads")
    parser.add_argument("--delay-ms", type=int, default=100, help="connection.failed.authentication.delay.ms")
    parser.add_argument("--max-connections", type=int, default=500, help="the broker's max.connections")
    parser.add_argument("--nofile", type=int, help="run the broker under this open-file limit (ulimit -n)")
    args = parser.parse_args()
    listeners = args.listener or ["SASL_PLAINTEXT", "SASL_SSL"]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))   # the attacker holds every socket it opens
    workdir = Path(tempfile.mkdtemp(prefix="bench-failed-logins-"))
    pki = Pki(workdir / "pki")
    overrides = {
        **sasl_listener_overrides(pki),
        "connection.failed.authentication.delay.ms": str(args.delay_ms),
        "max.connections": str(args.max_connections),
    }
    if args.nofile:
        broker = NofileBroker(workdir / "broker", overrides, nofile=(args.nofile, args.nofile),
                              control_plane=False).start()
    else:
        broker = BrokerProcess(workdir / "broker", overrides, control_plane=False).start()
    try:
        setup = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port('PLAINTEXT')}", "log_level": 0})
        upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"bob-secret")
        for future in setup.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
        del setup
        print(f"Failed logins against one broker: connection.failed.authentication.delay.ms={args.delay_ms}, "
              f"max.connections={args.max_connections}"
              + (f", ulimit -n {args.nofile}" if args.nofile else "")
              + f"; attacker from {ATTACKER_IP} with {args.workers} threads, real client from 127.0.0.1; "
              f"{os.cpu_count()} CPU(s)")
        checks = []
        for listener in listeners:
            run(broker, pki, listener, WARMUP, args.workers)     # first connections, caches: not reported
            half = run(broker, pki, listener, args.count // 2, args.workers)
            report(half, args.delay_ms)
            full = run(broker, pki, listener, args.count, args.workers)
            report(full, args.delay_ms)
            checks.append(scaling_check(f"{listener} burst seconds", half.burst_seconds, full.burst_seconds))
        print()
        report_scaling(checks)
    finally:
        status = broker.stop()
        if status != 0:
            print(f"warning: the broker exited with status {status}", file=sys.stderr)


if __name__ == "__main__":
    main()
