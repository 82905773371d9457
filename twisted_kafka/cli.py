"""``twisted-kafka-server-start FILE [--override key=value ...]``: run a broker in the foreground.

Kafka's ``kafka-server-start.sh`` for this broker: a thin front to
``twistd -n kafka --config FILE``, so the twistd plugin stays the one way a
broker is started.  ``--version`` prints ``twisted_kafka <version>``.  Installed as a console script, and used by
``bin/twisted-kafka-server-start`` in a checkout.
"""

from __future__ import annotations

import gc
import sys

USAGE = "usage: twisted-kafka-server-start CONFIG_FILE [--override key=value ...] | --version | --help"


def twistd_argv(args: list[str]) -> list[str]:
    """The twistd command line for ``args`` (the config file, then twistd-kafka options).

    ``--version`` prints ``twisted_kafka <version>`` and ``--help`` the usage
    line, both exiting 0; anything else that is not a config file first is a
    usage error (exit status 1).
    """
    if args and args[0] == "--version":
        from twisted_kafka import __version__

        print(f"twisted_kafka {__version__}")
        raise SystemExit(0)
    if args and args[0] in ("--help", "-h"):
        print(USAGE)
        raise SystemExit(0)
    if not args or args[0].startswith("-"):
        raise SystemExit(USAGE)
    config, rest = args[0], args[1:]
    return ["twistd", "--nodaemon", "--pidfile=", "kafka", "--config", config, *rest]


def main(argv: list[str] | None = None) -> None:
    # Startup makes some 80,000 objects that live as long as the process (modules, kafka-python's
    # message classes, the server): the cyclic collector's passes over that growing heap cost about
    # 0.08 s of CPU, for nothing.  It stays off until the server is built, when the twistd plugin
    # freezes what exists and turns it back on (twisted/plugins/twisted_kafka_plugin.py).
    gc.disable()
    sys.argv = twistd_argv(sys.argv[1:] if argv is None else argv)
    from twisted.scripts.twistd import run

    run()


if __name__ == "__main__":
    main()
