"""A broker's ``/metrics``, read with prometheus-client's own parser.

    metrics = scrape(broker.admin_url)
    metrics.value("kafka_server_brokertopicmetrics_bytesinpersec_total", topic="orders")
    metrics.value("kafka_server_brokertopicmetrics_bytesinpersec_total")        # the series without labels
    metrics.names                                                                # every sample name
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Scrape:
    text: str
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    #: Every family declared (``# TYPE``), with or without samples (a counter's without ``_total``).
    families: set[str] = field(default_factory=set)

    @property
    def names(self) -> set[str]:
        """Every sample name: what a PromQL expression selects."""
        return {name for name, _ in self.samples}

    def declares(self, name: str) -> bool:
        """Whether /metrics has series of ``name``, or declares its family (with no series yet)."""
        return name in self.names or name in self.families or name.removesuffix("_total") in self.families

    def value(self, name: str, default: float | None = None, **labels: str) -> float:
        """The sample with exactly these labels (none: the series without labels)."""
        key = (name, tuple(sorted(labels.items())))
        if key not in self.samples:
            if default is not None:
                return default
            raise KeyError(f"no sample {name}{labels or ''} in /metrics")
        return self.samples[key]

    def series(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        return {labels: value for (sample, labels), value in self.samples.items() if sample == name}


def parse(text: str) -> Scrape:
    result = Scrape(text)
    for family in text_string_to_metric_families(text):
        result.families.add(family.name)
        for sample in family.samples:
            result.samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return result


def scrape(admin_url: str) -> Scrape:
    with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as response:
        return parse(response.read().decode())
