"""``bin/twisted-kafka-scram``: add, delete and list users' SCRAM credentials.

The arguments are those of Kafka's ``kafka-configs.sh`` for users::

    twisted-kafka-scram --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    twisted-kafka-scram --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice \\
        --delete-config SCRAM-SHA-512
    twisted-kafka-scram --bootstrap-server HOST:PORT --describe [--entity-type users] [--entity-name alice]

Against a running broker (``--bootstrap-server``) it is
``twisted-kafka-configs --entity-type users`` (``twisted_kafka/tools/configs.py``),
which it runs with the same arguments: AlterUserScramCredentials /
DescribeUserScramCredentials (KIP-554), the password salted and hashed by
the client so only the salted password travels, and ``--command-config
FILE`` for the client's own settings in Kafka's names.  The two modes below
are this tool's own; both parse ``--add-config`` as ``twisted-kafka-configs``
does.

``--log-dirs DIR`` instead of ``--bootstrap-server`` writes the broker's
credential file directly, for a broker that is stopped -- how the first
user is created before any listener requires authentication (Kafka's
``kafka-storage.sh format --add-scram`` plays that part).  It takes the
broker's lock on the directory, so a running broker's file is not touched.

``--zookeeper HOST:PORT[/chroot]`` changes the credentials of a ZooKeeper
cluster in ZooKeeper (``/config/users/<user>`` and a change notification,
as Kafka's ``kafka-configs.sh --zookeeper``): running brokers reload them,
and a cluster's first user can be added before any broker is started.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from twisted.internet.defer import ensureDeferred
from twisted.python.failure import Failure

from twisted_kafka.sasl.credential_store import FileScramCredentialStore, ScramCredentialStore
from twisted_kafka.sasl.scram_credentials import MECHANISMS, credential_from_password

#: Kafka's zookeeper.session.timeout.ms default, for --zookeeper.
ZK_SESSION_TIMEOUT_MS = 18000



def parse_add_config(text: str) -> dict[str, tuple[str, int]]:
    """``{mechanism: (password, iterations)}`` from kafka-configs' ``--add-config`` value."""
    from twisted_kafka.tools import configs
    from twisted_kafka.tools.command import UsageError

    try:
        added = configs.parse_add_config(text) if text else {}
        unknown = [key for key in added if not configs.is_scram(key)]
        if unknown:
            raise ValueError(f"cannot parse {unknown[0]!r}: expected SCRAM-SHA-256=[password=...] "
                             "or SCRAM-SHA-512=[iterations=N,password=...]")
        return {mechanism: configs.scram_credential(mechanism, value) for mechanism, value in added.items()}
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def parse_delete_config(text: str) -> list[str]:
    mechanisms = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in mechanisms if name not in MECHANISMS]
    if unknown:
        raise ValueError(f"unknown SCRAM mechanism(s): {', '.join(unknown)}")
    return mechanisms


def _online(argv: list[str]) -> int:
    """``twisted-kafka-configs --entity-type users`` with this command line (the one way to reach a broker)."""
    from twisted_kafka.tools import configs

    if "--entity-type" not in argv:
        argv = [*argv, "--entity-type", "users"]
    return configs.main(argv)


def _offline(args) -> int:
    from twisted_kafka.config import StartupError
    from twisted_kafka.server.broker_metadata import LogDirLocks

    directory = args.log_dirs.split(",")[0]
    if not args.alter:
        return _offline_commands(args, FileScramCredentialStore(directory))
    try:
        # The broker's own lock: a running broker would neither see the change nor keep it.
        lock = LogDirLocks([directory])
    except StartupError as exc:
        print(f"{exc}: alter a running broker's credentials with --bootstrap-server", file=sys.stderr)
        return 1
    try:
        return _offline_commands(args, FileScramCredentialStore(directory))
    finally:
        lock.release()


def _offline_commands(args, store: FileScramCredentialStore) -> int:
    # The file store without a thread pool writes in the caller: the coroutine is done on return.
    results: list = []
    ensureDeferred(_commands(args, store, store.path)).addBoth(results.append)
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


def _zookeeper(args) -> int:
    """``--zookeeper``: the credentials of a ZooKeeper cluster, changed in ZooKeeper itself (as Kafka's
    ``kafka-configs.sh --zookeeper`` did); every broker reloads them from the change notification."""
    from twisted.internet import task

    from twisted_kafka.zk.client import KazooException, ZkClient, ZkConnectError
    from twisted_kafka.zk.scram_store import ZkScramCredentialStore

    results: list[int] = []

    async def run(reactor) -> None:
        try:
            zk = ZkClient.connect(args.zookeeper, session_timeout_ms=ZK_SESSION_TIMEOUT_MS,
                                  connection_timeout_ms=ZK_SESSION_TIMEOUT_MS, reactor=reactor)
        except ZkConnectError as exc:
            print(exc, file=sys.stderr)
            results.append(1)
            return
        try:
            store = ZkScramCredentialStore(zk)
            store.load_now()
            results.append(await _commands(args, store, f"ZooKeeper {args.zookeeper}"))
        except (KazooException, OSError) as exc:
            print(f"ZooKeeper {args.zookeeper}: {exc!r}", file=sys.stderr)
            results.append(1)
        finally:
            await zk.close()

    with contextlib.suppress(SystemExit):
        task.react(lambda reactor: ensureDeferred(run(reactor)))
    return results[0] if results else 1


async def _commands(args, store: ScramCredentialStore, where: str) -> int:
    if args.describe:
        for user, by_mechanism in sorted(store.users().items()):
            if args.entity_name and user != args.entity_name:
                continue
            infos = ", ".join(f"{name}=iterations={credential.iterations}"
                              for name, credential in sorted(by_mechanism.items()))
            print(f"SCRAM credential configs for user-principal '{user}' are {infos}")
        return 0
    missing = [name for name in args.deleted if store.get(args.entity_name, name) is None]
    if missing:
        print(f"User {args.entity_name} has no {', '.join(missing)} credential to delete", file=sys.stderr)
        return 1
    for mechanism, (_, iterations) in args.added.items():
        if not MECHANISMS[mechanism].min_iterations <= iterations <= MECHANISMS[mechanism].max_iterations:
            print(f"{mechanism}: iterations must be within {MECHANISMS[mechanism].min_iterations}.."
                  f"{MECHANISMS[mechanism].max_iterations}", file=sys.stderr)
            return 1
    upsertions = [(args.entity_name, mechanism, credential_from_password(MECHANISMS[mechanism], password, iterations))
                  for mechanism, (password, iterations) in args.added.items()]
    deletions = [(args.entity_name, mechanism) for mechanism in args.deleted]
    await store.alter(upsertions, deletions)
    print(f"Completed updating config for user {args.entity_name} in {where}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="twisted-kafka-scram", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap-server", help="HOST:PORT of a running broker")
    where.add_argument("--log-dirs", help="the log.dirs of a stopped broker (its first directory is used)")
    where.add_argument("--zookeeper", help="the zookeeper.connect of a ZooKeeper cluster (HOST:PORT[/chroot])")
    parser.add_argument("--command-config", help="client properties (security.protocol, sasl.mechanism, "
                                                 "sasl.jaas.config) for --bootstrap-server")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true")
    action.add_argument("--describe", action="store_true")
    parser.add_argument("--entity-type", default="users", choices=["users"])
    parser.add_argument("--entity-name", help="the user")
    parser.add_argument("--add-config", default="", help="SCRAM-SHA-256=[iterations=N,password=P],...")
    parser.add_argument("--delete-config", default="", help="SCRAM-SHA-256,SCRAM-SHA-512")
    args = parser.parse_args(argv)
    if args.bootstrap_server:
        return _online(list(sys.argv[1:] if argv is None else argv))
    try:
        args.added = parse_add_config(args.add_config)
        args.deleted = parse_delete_config(args.delete_config)
    except ValueError as exc:
        parser.error(str(exc))
    if args.alter and not args.entity_name:
        parser.error("--alter needs --entity-name")
    if args.alter and not (args.added or args.deleted):
        parser.error("--alter needs --add-config or --delete-config")
    return _zookeeper(args) if args.zookeeper else _offline(args)


if __name__ == "__main__":
    sys.exit(main())
