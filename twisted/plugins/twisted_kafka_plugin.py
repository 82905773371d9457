"""``twistd kafka``: run a twisted_kafka broker under twistd.

    twistd -n kafka --config etc/server.properties [--override key=value ...] [--log-level LEVEL]

The configuration is loaded and validated while options are parsed, so a bad
value stops twistd before anything is bound or written.  Every startup
failure -- a bad value, a port in use, an unusable log directory -- is one
line, ``Broker startup failed: ...`` naming the key, the value and the
reason, and exit status 1; ``TWISTED_KAFKA_DEBUG=1`` adds the traceback
(``twisted_kafka/server/startup.py``).  A command line that cannot be used
(a misspelled option, no ``--config``) is one line naming what is wrong and
pointing at ``--help``, and exit status 2 (``twisted_kafka.cli``).
``twistd kafka --help`` lists the options, ``--version`` prints
``twisted_kafka <version>``.

Without ``-n`` twistd daemonizes, and its parent process exits once the
broker has started (status 0) or failed to (status 1, with the failure line):
``StartupReport`` (``twisted_kafka/server/startup.py``) answers twistd's
status pipe only then, and a broker that did not start leaves no pidfile.

SIGTERM (or SIGINT) shuts the broker down cleanly and the process then exits
with status 0, as Kafka's does.  twistd's own handlers would record the
signal and re-raise it once the reactor stopped, so the status would say
"killed by SIGTERM" even after a clean shutdown; the broker installs its own
handlers once the reactor runs, which stop the reactor -- and with it the
services, in order -- without that.

The log goes where twistd sends it (standard output with ``-n``,
``--logfile``, ``--syslog``) through one filter of per-logger levels
(``twisted_kafka/logging/levels.py``): the root's is INFO, as Kafka's log4j
root level (DEBUG with ``TWISTED_KAFKA_DEBUG=1``, or ``--log-level LEVEL``),
others are set by ``log.levels`` at start and by IncrementalAlterConfigs on
BROKER_LOGGER resources at runtime (KIP-412).  ``log.format=json`` writes
each event as a JSON line.  ``BrokerRoot`` gives twistd that observer; a
``--logger`` on the command line replaces it.

SIGHUP re-reads the key and trust stores of every TLS listener and of an
https admin endpoint (``KafkaServer.reload_certificates``): connections made afterwards get the
new certificate, open connections stay up with theirs.
"""

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from twisted.python import usage
from zope.interface import implementer


class Options(usage.Options):
    synopsis = "--config FILE [--override key=value ...] [--log-level LEVEL]"
    # Shown with the option list on a usage error; without it, usage.Options would
    # show the docstring of whatever module runs as __main__.
    longdesc = "Run a broker that speaks Apache Kafka's wire protocol (twisted_kafka)."
    optParameters = [
        ["config", "c", None, "Broker configuration (.properties), e.g. etc/server.properties"],
        ["log-level", None, None, "Level of the root logger: TRACE, DEBUG, INFO, WARN, ERROR or FATAL "
                                  "(wins over log.levels' root=LEVEL; INFO unless given)"],
    ]

    def __init__(self):
        super().__init__()
        self["override"] = []

    def opt_override(self, value):
        """Override one configuration key (key=value); may be repeated."""
        self["override"].append(value)

    def parseOptions(self, options=None):
        """A command line that cannot be used is one line and exit status 2, not twistd's usage text."""
        try:
            super().parseOptions(options)
        except usage.UsageError as exc:
            from twisted_kafka.cli import usage_error

            raise usage_error(str(exc)) from None

    def opt_version(self):
        """Print twisted_kafka's version and exit."""
        import twisted_kafka

        print(f"twisted_kafka {twisted_kafka.__version__}")
        raise SystemExit(0)

    def postOptions(self):
        from twisted_kafka.config import ConfigError, KafkaConfig
        from twisted_kafka.network.listeners import parse_listeners
        from twisted_kafka.server.startup import exit_with

        if not self["config"]:
            raise usage.UsageError("--config FILE is required")
        if self["log-level"] is not None:
            from twisted_kafka.cli import usage_error
            from twisted_kafka.logging import LEVELS, VALID_LEVELS

            self["log-level"] = self["log-level"].upper()
            if self["log-level"] not in LEVELS:
                raise usage_error(f"--log-level {self['log-level']} is not a level ({VALID_LEVELS})")
        try:
            self["kafka_config"] = KafkaConfig.load(self["config"], self["override"])
            parse_listeners(self["kafka_config"])
        except ConfigError as exc:
            # One line and status 1, not twistd's usage text: the command line was fine.
            raise exit_with(exc) from None


@implementer(IServiceMaker, IPlugin)
class KafkaServiceMaker:
    tapname = "kafka"
    description = "A broker that speaks Apache Kafka's wire protocol"
    options = Options

    def makeService(self, options):
        import gc
        import signal

        from twisted.internet import reactor
        from twisted.logger import Logger

        from twisted_kafka.server.kafka_server import KafkaServer
        from twisted_kafka.server.startup import (BrokerRoot, StartupReport, broker_log_observer,
                                                  configure_log_levels, exit_with, json_log_format)

        config = options["kafka_config"]
        try:
            server = KafkaServer(config)
            # Once the broker's modules are loaded, so that log.levels can name their loggers.
            configure_log_levels(config, options["log-level"])
        except Exception as exc:
            # Logging is not running yet: one line on stderr, and exit status 1.
            raise exit_with(exc, config.log_dirs) from None
        # What was imported and built so far lives as long as the process: frozen (gc.freeze), it is
        # out of the cyclic collector's sight, so later full collections skip it, and so does the one
        # at interpreter exit (about 0.2 s of CPU after the broker has shut down).  twisted_kafka.cli
        # kept the collector off until here.
        gc.freeze()
        gc.enable()

        stopping = []

        def stop_once() -> None:
            if not stopping:   # a second signal during shutdown changes nothing
                stopping.append(True)
                reactor.stop()

        def stop(signum, frame) -> None:
            Logger(namespace="twisted_kafka.server").info("Received {signal}, shutting down.",
                                                           signal=signal.Signals(signum).name)
            reactor.callFromThread(stop_once)

        def reload_certificates(signum, frame) -> None:
            Logger(namespace="twisted_kafka.server").info("Received SIGHUP, reloading TLS certificates.")
            reactor.callFromThread(server.reload_certificates)

        def install_stop_handlers() -> None:
            # Runs after the reactor installed its own (during startup) and replaces them.
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)
            signal.signal(signal.SIGHUP, reload_certificates)

        reactor.callWhenRunning(install_stop_handlers)
        twistd_options = options.parent if options.parent is not None else {}
        # twistd's log destination behind the per-logger level filter (log.levels, --log-level, changed
        # at runtime by IncrementalAlterConfigs), in log.format; unless the command line names a --logger.
        own_logger = options.parent is None or twistd_options.get("logger")
        root = BrokerRoot(None if own_logger else broker_log_observer(
            twistd_options, json_format=json_log_format(config)))
        # The report starts first: in daemon mode it answers twistd's parent once the broker
        # has really started (or failed), and a broker that failed leaves no pidfile.
        StartupReport(twistd_options, server.started, config.log_dirs).setServiceParent(root)
        server.setServiceParent(root)
        return root


serviceMaker = KafkaServiceMaker()
