"""How a broker that cannot start says so: one line, and exit status 1.

Whatever stops startup -- a value Kafka would refuse, a port already in use,
a log directory that cannot be created or loaded -- the operator gets exactly
one line naming the setting, its value and the reason:

    Broker startup failed: Invalid value 'many' for configuration num.io.threads: not a number of type INT
    Broker startup failed: listeners: PLAINTEXT://127.0.0.1:9092: Couldn't listen on 127.0.0.1:9092: [Errno 98] ...
    Broker startup failed: log.dirs: /var/kafka-logs: [Errno 20] Not a directory: '/var/kafka-logs'

(the first is a ``ConfigError``, worded as Kafka words a ``ConfigException``;
the others are ``StartupError``: ``<key>: <value>: <reason>``).  Before the
reactor runs (while options are read and the server is built) the line goes
to stderr, since logging has not started; afterwards it is logged (critical).
The traceback is left out: with the environment variable
``TWISTED_KAFKA_DEBUG=1`` it is printed (or logged, at debug level) as well.

Under ``twistd`` without ``-n`` (daemon mode) the command's parent process
waits for its daemon child to say how startup went, through a pipe
(``UnixApplicationRunner.daemonize``), and exits with that status.  twistd
writes "started" as soon as the services' ``startService`` returned, but
the broker's startup goes on after that (listeners bind when the reactor
runs, a cluster member registers in ZooKeeper) and may still fail.
``StartupReport`` takes the pipe from twistd and answers it when the broker
has really started, or failed: the parent then exits 1 with the failure
line.  A broker that did not start also removes the pidfile twistd wrote
for it: it exits with status 1 from the reactor's shutdown, before twistd
would remove the file, and a pidfile naming no broker misleads whatever
reads it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Sequence

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from twisted_kafka.config import ConfigError, StartupError

__all__ = ["DEBUG_ENV", "BrokerRoot", "StartupError", "StartupReport", "broker_log_observer",
           "configure_log_levels", "debug_enabled", "exit_with", "failure_line", "json_log_format"]

#: Set to 1 (or anything but 0/false/no) to see a startup failure's traceback too.
DEBUG_ENV = "TWISTED_KAFKA_DEBUG"

PREFIX = "Broker startup failed: "


def debug_enabled() -> bool:
    """Whether ``TWISTED_KAFKA_DEBUG`` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def failure_line(exc: BaseException, log_dirs: Sequence[str] = ()) -> str:
    """The one line (no newline in it) that says why startup failed.

    An ``OSError`` about a path inside one of ``log_dirs`` is reported as a
    problem of that ``log.dirs`` entry, whichever part of the broker met it.
    """
    if isinstance(exc, (ConfigError, StartupError)):
        text = str(exc)
    elif isinstance(exc, OSError) and exc.filename is not None and _log_dir_of(exc.filename, log_dirs):
        text = str(StartupError("log.dirs", _log_dir_of(exc.filename, log_dirs), str(exc)))
    else:
        text = str(exc) or type(exc).__name__
    return PREFIX + " ".join(text.split())


def _log_dir_of(path, log_dirs: Sequence[str]) -> str | None:
    path = os.path.abspath(os.fsdecode(path))
    for log_dir in log_dirs:
        log_dir = os.path.abspath(log_dir)
        if path == log_dir or path.startswith(log_dir.rstrip(os.sep) + os.sep):
            return log_dir
    return None


def exit_with(exc: BaseException, log_dirs: Sequence[str] = ()) -> SystemExit:
    """Before the reactor runs: print the failure line on stderr (the traceback first, when
    debugging) and return the ``SystemExit(1)`` to raise."""
    if debug_enabled():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    print(failure_line(exc, log_dirs), file=sys.stderr)
    return SystemExit(1)


class StartupReport(Service):
    """Tells twistd's waiting parent (daemon mode) how startup ended; removes a failed broker's pidfile.

    ``twistd_options`` is twistd's own options (the plugin options'
    ``parent``): the status pipe is its ``statusPipe`` once twistd has
    daemonized, and its ``pidfile`` the file twistd wrote.  ``started`` is the
    broker's Deferred, fired once it has started or failed to.  Started
    before the broker, so the pipe is taken before twistd would answer it.
    """

    def __init__(self, twistd_options, started: Deferred, log_dirs: Sequence[str] = ()):
        self.twistd_options = twistd_options
        self.log_dirs = log_dirs
        self.status_pipe: int | None = None
        started.addBoth(self._report)

    def startService(self) -> None:
        super().startService()
        # twistd writes "0" into the pipe when startService returns unless the pipe is gone.
        self.status_pipe = self.twistd_options.get("statusPipe")
        if self.status_pipe is not None:
            self.twistd_options["statusPipe"] = None

    def _report(self, result):
        failed = isinstance(result, Failure)
        if failed:
            pidfile = self.twistd_options.get("pidfile")
            if pidfile:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(pidfile)
        if self.status_pipe is not None:
            pipe, self.status_pipe = self.status_pipe, None
            # twistd's parent reads at most 100 bytes; "0" is success, anything else is printed.
            status = b"1 " + failure_line(result.value, self.log_dirs).encode("ascii", "backslashreplace") \
                if failed else b"0"
            os.write(pipe, status[:100])
            os.close(pipe)
        return result


def broker_log_observer(twistd_options, levels=None, json_format: bool = False):
    """twistd's log destination (``--logfile``, ``--syslog``, standard output with ``-n``) behind the
    broker's one level filter: ``levels`` (``twisted_kafka.logging.LogLevels``, the process's
    ``LOG_LEVELS`` unless given) drops each event below its logger's level -- by default the root's,
    INFO, as Kafka's log4j root level; with ``TWISTED_KAFKA_DEBUG=1`` DEBUG (the tracebacks of startup
    failures among them) -- and follows the levels changed at runtime.  ``json_format``
    (``log.format=json``) writes each event as a JSON line to the file or standard output instead of
    Twisted's text; syslog keeps text.
    """
    from twisted.logger import FileLogObserver, FilteringLogObserver, ILogObserver, LegacyLogObserverWrapper
    from twisted.scripts._twistd_unix import UnixAppLogger

    from twisted_kafka.logging import LOG_LEVELS, json_file_observer

    if levels is None:
        levels = LOG_LEVELS
    destination = UnixAppLogger(twistd_options)._getLogObserver()
    if not ILogObserver.providedBy(destination):          # syslog's is a legacy observer
        destination = LegacyLogObserverWrapper(destination)
    elif json_format and isinstance(destination, FileLogObserver):
        # The file twistd chose (standard output, or --logfile with its rotation on SIGUSR1), in JSON.
        destination = json_file_observer(destination._outFile)
    return FilteringLogObserver(destination, [levels.predicate])


def json_log_format(config) -> bool:
    """Whether ``log.format`` asks for JSON lines."""
    return config["log.format"] == "json"


def configure_log_levels(config, root: str | None = None, levels=None):
    """Apply ``log.levels`` (and ``--log-level``'s ``root``, which wins) to ``levels`` (``LOG_LEVELS``
    unless given), once the broker's modules are loaded so its loggers can be named.  A name that is no
    logger is a ``ConfigError`` naming ``log.levels``."""
    from twisted_kafka.logging import LOG_LEVELS, UnknownLogger, parse_level_list

    if levels is None:
        levels = LOG_LEVELS
    per_logger = parse_level_list(config["log.levels"])
    if root is None:
        root = per_logger.get("root", "DEBUG" if debug_enabled() else "INFO")
    per_logger.pop("root", None)
    try:
        levels.configure(root, per_logger)
    except UnknownLogger as exc:
        raise ConfigError("log.levels", str(exc), ",".join(config["log.levels"])) from None
    return levels


class BrokerRoot(MultiService):
    """The service ``twistd kafka`` runs: the ``StartupReport``, then the broker.

    Put into twistd's application, it gives the application ``log_observer``
    as its ``ILogObserver`` component, which twistd logs to unless the
    command line names a ``--logger``.
    """

    def __init__(self, log_observer=None):
        super().__init__()
        self.log_observer = log_observer

    def setServiceParent(self, parent):
        super().setServiceParent(parent)
        if self.log_observer is not None and hasattr(parent, "setComponent"):
            from twisted.logger import ILogObserver

            parent.setComponent(ILogObserver, self.log_observer)
