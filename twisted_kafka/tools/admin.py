"""The clients a tool talks through, and their errors as one line.

``Admin`` holds a confluent-kafka ``AdminClient`` (librdkafka) for what it
offers, and -- made only when a command needs it -- a kafka-python
``KafkaAdminClient`` on the same settings for the APIs librdkafka does not
expose: AlterPartitionReassignments (45) / ListPartitionReassignments (46),
DescribeLogDirs (35), OffsetDelete (47) and Describe/AlterClientQuotas
(48/49).  Every wait is bounded by the settings' timeout
(``default.api.timeout.ms``); an answer that does not come in time names the
last connection error librdkafka reported, so "nothing listens there" reads
as such.
"""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from .client_config import ClientSettings
from .command import ToolError
from .errors import describe_exception

__all__ = ["Admin", "UnsupportedApi"]

T = TypeVar("T")

#: librdkafka's errors after which no answer will come: every bootstrap broker refused or failed the
#: handshake, or credentials were refused.  A tool stops at once with the error rather than waiting out
#: its timeout (Kafka's Java tools retry until default.api.timeout.ms).
_HOPELESS = (KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION, KafkaError._SSL)
#: How often a wait looks at the connection errors reported meanwhile.
_SLICE = 0.1
_NOISE = re.compile(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)")


class UnsupportedApi(ToolError):
    """The broker does not serve an API the command needs."""

    def __init__(self, api: str, key: int) -> None:
        super().__init__(f"the broker does not support {api} (API key {key}), which this command needs")


class Admin:
    """A tool's admin clients; use as a context manager so both are closed."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._transport_errors: list[str] = []
        self._hopeless = ""
        conf: dict[str, Any] = dict(settings.librdkafka)
        conf.setdefault("client.id", "twisted-kafka-tools")
        # librdkafka's own log lines would interleave with the tool's output; its errors reach error_cb.
        conf["log_level"] = 0
        conf["error_cb"] = self._on_error
        try:
            self.client = AdminClient(conf)
        except KafkaException as exc:
            raise ToolError(f"{settings.source}: {describe_exception(exc)}") from None
        self._kafka_python: Any = None

    def _on_error(self, error: KafkaError) -> None:
        text = _NOISE.sub("", " ".join(error.str().split()))
        if error.code() in _HOPELESS:
            self._hopeless = self._hopeless or text
        elif error.code() != KafkaError._ALL_BROKERS_DOWN:
            self._transport_errors.append(text)

    def _check_hopeless(self) -> None:
        self.client.poll(0)   # serves error_cb
        if self._hopeless:
            cause = self._transport_errors[-1] if self._transport_errors else self._hopeless
            raise ToolError(f"cannot reach {self.settings.librdkafka['bootstrap.servers']}: {cause}")

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        if self._kafka_python is not None:
            self._kafka_python.close()
            self._kafka_python = None

    # -- waiting ----------------------------------------------------------------------------

    def wait(self, future: concurrent.futures.Future, what: str = "the broker's answer") -> Any:
        """The result of one of the AdminClient's futures; ToolError on an error or after the timeout."""
        deadline = time.monotonic() + self.settings.timeout
        try:
            while True:
                try:
                    return future.result(timeout=_SLICE)
                except concurrent.futures.TimeoutError:
                    self._check_hopeless()
                    if time.monotonic() >= deadline:
                        raise ToolError(self.timed_out(what)) from None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError._TIMED_OUT:
                raise ToolError(self.timed_out(what)) from None
            raise ToolError(describe_exception(exc)) from None

    def timed_out(self, what: str) -> str:
        self.client.poll(0)   # serves error_cb: the connection errors seen so far
        cause = f": {self._transport_errors[-1]}" if self._transport_errors else ""
        return (f"timed out after {self.settings.timeout_ms} ms waiting for {what} from "
                f"{self.settings.librdkafka['bootstrap.servers']}{cause}")

    def list_topics(self) -> Any:
        """The cluster's metadata (librdkafka's Metadata), in the same bounded, error-aware wait."""
        deadline = time.monotonic() + self.settings.timeout
        while True:
            try:
                return self.client.list_topics(timeout=1)
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() not in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
                    raise ToolError(describe_exception(exc)) from None
            self._check_hopeless()
            if time.monotonic() >= deadline:
                raise ToolError(self.timed_out("the cluster's metadata"))

    def request_kwargs(self) -> dict[str, float]:
        return {"request_timeout": self.settings.timeout}

    # -- kafka-python, for the APIs librdkafka lacks -----------------------------------------

    def kafka_python(self) -> Any:
        if self._kafka_python is None:
            from kafka.admin import KafkaAdminClient
            from kafka.errors import KafkaError as PyKafkaError

            # librdkafka first: a refused password or an unreachable cluster is then reported at once, in its
            # words, where kafka-python would retry its bootstrap until the timeout.
            self.wait(self.client.describe_cluster(**self.request_kwargs()), "the cluster's brokers")
            try:
                self._kafka_python = KafkaAdminClient(**self.settings.kafka_python_settings())
            except PyKafkaError as exc:
                raise ToolError(self._python_error(exc, "the cluster's metadata")) from None
        return self._kafka_python

    def call(self, api: str, key: int, function: Callable[..., T], *args, **kwargs) -> T:
        """``function`` (a kafka-python admin call sending ``api``); a broker without the API is one line."""
        from kafka.errors import KafkaError as PyKafkaError
        from kafka.errors import UnsupportedVersionError

        try:
            return function(*args, **kwargs)
        except UnsupportedVersionError:
            raise UnsupportedApi(api, key) from None
        except PyKafkaError as exc:
            raise ToolError(self._python_error(exc, api)) from None

    def send(self, api: str, key: int, request: Any) -> Any:
        """One request built from kafka-python's message classes, to any broker, and its response.

        kafka-python 3.0.12 (pinned in setup.cfg) has the message classes of every API but no admin call
        for some (client quotas, configs of the broker-default resource, which librdkafka refuses to name):
        such requests go through its connection manager, which picks the version both sides speak.
        """
        manager = self.kafka_python()._manager

        async def ask() -> Any:
            return await manager.send(request)

        return self.call(api, key, manager.run, ask)

    def _python_error(self, exc: BaseException, what: str) -> str:
        from kafka import errors

        if isinstance(exc, (errors.KafkaTimeoutError, errors.KafkaConnectionError)):
            return self.timed_out(what)
        errno = getattr(exc, "errno", None)
        name = getattr(exc, "message", None)
        if errno is not None and name:
            detail = " ".join(str(exc.args[0]).split()) if exc.args else ""
            return f"{detail or getattr(exc, 'description', '')} ({name})"
        return describe_exception(exc)
