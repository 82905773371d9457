"""``twisted-kafka-server-start FILE [--override key=value ...] [--log-level LEVEL]``: run a broker in the foreground.

Kafka's ``kafka-server-start.sh`` for this broker: a thin front to
``twistd -n kafka --config FILE``, so the twistd plugin stays the one way a
broker is started.  ``--version`` prints ``twisted_kafka <version>``,
``--help`` the options.  Installed as a console script, and used by
``bin/twisted-kafka-server-start`` in a checkout.

A command line that cannot be used -- a misspelled option, a missing
configuration file -- is one line on standard error naming what is wrong and
pointing at ``--help``, and exit status 2, here and under ``twistd kafka``
(``usage_error``); the option list is printed only when asked for.
"""

from __future__ import annotations

import gc
import os
import sys

PROG = "twisted-kafka-server-start"
HELP = f"""\
usage: {PROG} CONFIG_FILE [--override key=value ...] [--log-level LEVEL]
       {PROG} --version | --help

Start a twisted_kafka broker in the foreground with the configuration in
CONFIG_FILE (Kafka's .properties format): twistd -n kafka --config CONFIG_FILE.

Options:
  --override key=value  Override one configuration key; may be repeated.
  --log-level LEVEL     Level of the root logger: TRACE, DEBUG, INFO, WARN, ERROR
                        or FATAL (INFO unless given; log.levels sets others).
  --version             Print twisted_kafka's version and exit.
  --help                Print this help and exit.
"""

#: Exit status of a command line that cannot be used (as getopt-style tools exit).
USAGE_STATUS = 2


def usage_error(message: str, command: str | None = None) -> SystemExit:
    """Print ``<command>: <message> (--help lists the options)`` on stderr; the ``SystemExit`` to raise.

    Without ``command``: this script's name when it runs the broker, else
    ``twistd kafka``.
    """
    if command is None:
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "twistd"
        command = program if program == PROG else f"{program} kafka"
    print(f"{command}: {message} (--help lists the options)", file=sys.stderr)
    return SystemExit(USAGE_STATUS)


def _asks_for_help(args: list[str]) -> bool:
    previous = None
    for arg in args:
        if arg in ("--help", "-h") and previous != "--override":
            return True
        previous = arg
    return False


def twistd_argv(args: list[str]) -> list[str]:
    """The twistd command line for ``args`` (the config file, then twistd-kafka options).

    ``--version`` prints ``twisted_kafka <version>`` and ``--help`` (anywhere)
    the options, both exiting 0; a command line without a config file first
    is a usage error.  Options after the config file are the plugin's, which
    reports a misspelled one the same way.
    """
    if args and args[0] == "--version":
        from twisted_kafka import __version__

        print(f"twisted_kafka {__version__}")
        raise SystemExit(0)
    if _asks_for_help(args):
        print(HELP, end="")
        raise SystemExit(0)
    if not args:
        raise usage_error("a CONFIG_FILE is required", PROG)
    if args[0].startswith("-"):
        if args[0].split("=", 1)[0] == "--override":
            raise usage_error("the CONFIG_FILE comes first, before --override", PROG)
        raise usage_error(f"option {args[0]} not recognized", PROG)
    config, rest = args[0], args[1:]
    return ["twistd", "--nodaemon", "--pidfile=", "kafka", "--config", config, *rest]


def main(argv: list[str] | None = None) -> None:
    # Startup makes some 80,000 objects that live as long as the process (modules, kafka-python's
    # message classes, the server): the cyclic collector's passes over that growing heap cost about
    # 0.08 s of CPU, for nothing.  It stays off until the server is built, when the twistd plugin
    # freezes what exists and turns it back on (twisted/plugins/twisted_kafka_plugin.py).
    gc.disable()
    sys.argv = twistd_argv(sys.argv[1:] if argv is None else argv)
    sys.argv[0] = PROG          # so a usage error names this command, not twistd
    from twisted.scripts.twistd import run

    run()


if __name__ == "__main__":
    main()
