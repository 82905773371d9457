"""Meters, histograms and gauges in the shape of Kafka's Yammer metrics.

Kafka's broker metrics are Yammer ``Meter`` (count and 1/5/15-minute
exponentially weighted rates), ``Histogram`` (count, min, max, mean and
percentiles over a reservoir) and ``Gauge`` (a value read when asked).
Recording must be cheap — several histogram updates happen per request — so
updates only append to bounded structures; rates and percentiles are computed
when read.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MetricName:
    """A JMX-style name: ``group:type=T,name=N,tag1=v1,...`` (tags in given order)."""

    group: str
    type: str
    name: str
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def mbean(self) -> str:
        parts = [f"type={self.type}", f"name={self.name}"]
        parts.extend(f"{k}={v}" for k, v in self.tags)
        return f"{self.group}:{','.join(parts)}"

    def __str__(self) -> str:
        return self.mbean


class Meter:
    """A count with 1-, 5- and 15-minute exponentially weighted moving rates.

    Rates tick every 5 seconds of the injected clock, as Yammer's meters do, so
    a burst shows up in the 1-minute rate within one tick.
    """

    TICK = 5.0
    _ALPHAS = tuple(1 - math.exp(-5.0 / 60.0 / minutes) for minutes in (1, 5, 15))

    __slots__ = ("count", "_uncounted", "_rates", "_initialized", "_last_tick", "_start", "_clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.count = 0
        self._uncounted = 0
        self._rates = [0.0, 0.0, 0.0]
        self._initialized = False
        self._start = self._last_tick = clock()

    def mark(self, n: int = 1) -> None:
        self.count += n
        self._uncounted += n

    def _tick_if_due(self) -> None:
        now = self._clock()
        ticks = int((now - self._last_tick) // self.TICK)
        if ticks <= 0:
            return
        self._last_tick += ticks * self.TICK
        for i in range(ticks):
            instant = self._uncounted / self.TICK if i == 0 else 0.0
            for j, alpha in enumerate(self._ALPHAS):
                if self._initialized:
                    self._rates[j] += alpha * (instant - self._rates[j])
                else:
                    self._rates[j] = instant
            self._initialized = True
            self._uncounted = 0

    def rates(self) -> tuple[float, float, float]:
        """Per-second 1-, 5- and 15-minute rates."""
        self._tick_if_due()
        one, five, fifteen = self._rates
        return one, five, fifteen

    def mean_rate(self) -> float:
        elapsed = self._clock() - self._start
        return self.count / elapsed if elapsed > 0 else 0.0

    def snapshot(self) -> dict:
        one, five, fifteen = self.rates()
        return {"Count": self.count, "MeanRate": self.mean_rate(),
                "OneMinuteRate": one, "FiveMinuteRate": five, "FifteenMinuteRate": fifteen}


class Histogram:
    """Count, sum, min, max over all updates; percentiles over the last ``size`` updates.

    Yammer's default reservoir keeps 1028 samples biased to recent ones; a
    sliding window of the last 1028 updates answers the same operational
    question ("what are requests taking now?") with O(1) updates.
    """

    __slots__ = ("count", "sum", "min", "max", "_window")

    def __init__(self, size: int = 1028):
        self.count = 0
        self.sum = 0.0
        self.min = math.inf
        self.max = -math.inf
        self._window: deque[float] = deque(maxlen=size)

    def update(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        self._window.append(value)

    def percentile(self, q: float) -> float:
        """The q-quantile (0..1) of the recent window, 0.0 when empty."""
        if not self._window:
            return 0.0
        ordered = sorted(self._window)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def snapshot(self) -> dict:
        ordered = sorted(self._window)

        def pct(q: float) -> float:
            if not ordered:
                return 0.0
            return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

        return {"Count": self.count,
                "Min": self.min if self.count else 0.0,
                "Max": self.max if self.count else 0.0,
                "Mean": self.sum / self.count if self.count else 0.0,
                "50thPercentile": pct(0.50), "75thPercentile": pct(0.75),
                "95thPercentile": pct(0.95), "98thPercentile": pct(0.98),
                "99thPercentile": pct(0.99), "999thPercentile": pct(0.999)}


class Gauge:
    """A value computed when read (queue sizes, connection counts)."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], float]):
        self._read = read

    @classmethod
    def of(cls, value: float) -> Gauge:
        """A gauge of a value already read (what a ``MetricSource`` yields)."""
        return cls(lambda: value)

    @property
    def value(self) -> float:
        return self._read()

    def snapshot(self) -> dict:
        return {"Value": self._read()}


#: Metrics whose set changes while the broker runs (per topic, per partition, per group): called when the
#: metrics are read, it yields each one's name and metric.
MetricSource = Callable[[], Iterable[tuple[MetricName, "Meter | Histogram | Gauge"]]]


@dataclass
class MetricsRegistry:
    """Every metric of one broker, looked up by ``MetricName``.

    ``meter``/``histogram`` return the existing metric when the name is taken,
    so call sites can ask for their metric lazily (per API, per version) without
    a registration phase.  Metrics that come and go with topics, partitions and
    groups are a ``MetricSource`` instead (``add_source``): read when the
    metrics are, so nothing has to be registered or removed as partitions move.
    """

    clock: Callable[[], float] = time.monotonic
    _metrics: dict[MetricName, Meter | Histogram | Gauge] = field(default_factory=dict)
    _sources: list[MetricSource] = field(default_factory=list)

    def meter(self, name: MetricName) -> Meter:
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = Meter(self.clock)
        return metric  # type: ignore[return-value]

    def histogram(self, name: MetricName) -> Histogram:
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = Histogram()
        return metric  # type: ignore[return-value]

    def gauge(self, name: MetricName, read: Callable[[], float]) -> Gauge:
        metric = self._metrics[name] = Gauge(read)
        return metric

    def remove(self, name: MetricName) -> None:
        self._metrics.pop(name, None)

    def add_source(self, source: MetricSource) -> None:
        self._sources.append(source)

    def get(self, name: MetricName):
        return self._metrics.get(name)

    def __iter__(self) -> Iterator[tuple[MetricName, Meter | Histogram | Gauge]]:
        items: list[tuple[MetricName, Meter | Histogram | Gauge]] = list(self._metrics.items())
        for source in self._sources:
            items.extend(source())
        return iter(items)

    def snapshot(self) -> dict[str, dict]:
        """All metrics as ``{mbean: {attribute: value}}``, JMX style."""
        return {name.mbean: metric.snapshot() for name, metric in self}
