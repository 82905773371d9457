"""``twistd kafka``: run a twisted_kafka broker under twistd.

    twistd -n kafka --config etc/server.properties [--override key=value ...]

The configuration is loaded and validated while options are parsed, so a bad
value stops twistd with a one-line message naming the key (exit status 1)
before anything is bound or written.

SIGTERM (or SIGINT) shuts the broker down cleanly and the process then exits
with status 0, as Kafka's does.  (twistd itself would re-raise the signal
after the reactor stops, so the status would say "killed by SIGTERM" even
after a clean shutdown; the service maker clears that.)
"""

from twisted.application.service import IServiceMaker
from twisted.plugin import IPlugin
from twisted.python import usage
from zope.interface import implementer


class Options(usage.Options):
    synopsis = "--config FILE [--override key=value ...]"
    optParameters = [
        ["config", "c", None, "Broker configuration (.properties), e.g. etc/server.properties"],
    ]

    def __init__(self):
        super().__init__()
        self["override"] = []

    def opt_override(self, value):
        """Override one configuration key (key=value); may be repeated."""
        self["override"].append(value)

    def postOptions(self):
        from twisted_kafka.config import ConfigError, KafkaConfig
        from twisted_kafka.network.listeners import parse_listeners

        if not self["config"]:
            raise usage.UsageError("--config FILE is required")
        try:
            self["kafka_config"] = KafkaConfig.load(self["config"], self["override"])
            parse_listeners(self["kafka_config"])
        except ConfigError as exc:
            raise usage.UsageError(str(exc)) from None


@implementer(IServiceMaker, IPlugin)
class KafkaServiceMaker:
    tapname = "kafka"
    description = "A broker that speaks Apache Kafka's wire protocol"
    options = Options

    def makeService(self, options):
        from twisted.internet import reactor

        from twisted_kafka.server.kafka_server import KafkaServer

        server = KafkaServer(options["kafka_config"])

        def exit_zero_after_clean_shutdown() -> None:
            # Runs once the services have stopped, before twistd reads the
            # signal it would re-raise (twisted.scripts.twistd.runApp).
            if not getattr(server, "_startup_failed", False) and hasattr(reactor, "_exitSignal"):
                reactor._exitSignal = None

        reactor.addSystemEventTrigger("after", "shutdown", exit_zero_after_clean_shutdown)
        return server


serviceMaker = KafkaServiceMaker()
