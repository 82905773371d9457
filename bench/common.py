"""What every benchmark reports next to its figures: the client's CPU, and whether the figures scale.

* ``ClientCpu``: CPU time (user + system) of the benchmark's own process --
  every thread of it, librdkafka's included -- and, with ``children=True``,
  of the child processes it has waited for (the raw-socket load generators
  of ``support/load.py``), from ``resource.getrusage``.  The client
  runs on the same machine as the broker and competes with it for cores: a
  figure next to a client that used most of a core says as much about the
  client as about the broker.
* ``scaling_check``: the same work at N/2 and at N must take about twice
  as long (or, for a fixed-duration run, get about twice as much done in
  twice the time).  A ratio far from 2 means the figure measures something
  else -- a fixed cost, a timeout, a warm-up -- and the line says so.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

#: A ratio (N against N/2) outside these bounds is flagged: fixed costs pull it below 2 at small N,
#: noise on a shared machine moves it either way, but not this far.
SCALING_LOW = 1.5
SCALING_HIGH = 2.6
#: Timed runs both shorter than this are not judged: connection set-up, the first fetch and the
#: scheduler's noise are a large share of them (the bench's --scale makes runs longer).  One run
#: longer than this is enough: a short run at N after a long one at N/2 is what a timeout looks like.
SCALING_MIN_SECONDS = 0.5


def cpu_seconds(children: bool = False) -> float:
    """User + system CPU seconds of this process (all threads), plus its waited-for children if asked."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    total = usage.ru_utime + usage.ru_stime
    if children:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += usage.ru_utime + usage.ru_stime
    return total


class ClientCpu:
    """CPU the client spent between ``start()`` and ``stop()`` (seconds)."""

    def __init__(self, children: bool = False):
        self.children = children
        self._started = 0.0
        self.seconds = 0.0

    def start(self) -> ClientCpu:
        self._started = cpu_seconds(self.children)
        return self

    def stop(self) -> float:
        self.seconds = cpu_seconds(self.children) - self._started
        return self.seconds


@dataclass(frozen=True)
class Scaling:
    """The same measurement at N/2 and at N: ``ratio`` = figure(N) / figure(N/2), which should be ~2."""

    what: str
    half: float
    full: float
    #: For times: the longer of the two runs in seconds, so runs too short to judge say so.
    seconds: float | None = None
    min_seconds: float = SCALING_MIN_SECONDS

    @property
    def judged(self) -> bool:
        return self.seconds is None or self.seconds >= self.min_seconds

    @property
    def ratio(self) -> float:
        return self.full / self.half if self.half > 0 else float("inf")

    @property
    def ok(self) -> bool:
        """False only for a judged run whose ratio is out of bounds."""
        return not self.judged or SCALING_LOW <= self.ratio <= SCALING_HIGH

    def __str__(self) -> str:
        if not self.judged:
            verdict = f"not judged: both runs took under {self.min_seconds} s (use a larger scale)"
        elif self.ok:
            verdict = "ok"
        else:
            verdict = "DOES NOT SCALE WITH N: the figure is dominated by something else"
        return (f"{self.what}: N/2 -> {self.half:.4g}, N -> {self.full:.4g}, ratio {self.ratio:.2f} "
                f"(expected ~2): {verdict}")


def scaling_check(what: str, half: float, full: float, *, timed: bool = True,
                  min_seconds: float = SCALING_MIN_SECONDS) -> Scaling:
    """``what`` measured at N/2 (``half``) and at N (``full``): seconds (``timed``), or the counts
    a fixed-duration run got done in T/2 and T (``timed=False``).  ``min_seconds``: timed runs
    both shorter than this are not judged (a micro-benchmark's timed loops can judge shorter runs)."""
    return Scaling(what, half, full, max(half, full) if timed else None, min_seconds)


def report_scaling(checks: list[Scaling]) -> None:
    """Print the verdict of every check that failed, or one line saying they all passed."""
    failed = [check for check in checks if not check.ok]
    unjudged = sum(not check.judged for check in checks)
    if failed:
        print("N-scaling check FAILED for:")
        for check in failed:
            print(f"  {check}")
    else:
        print(f"N-scaling check: every judged figure was about twice as large at N as at N/2 "
              f"({len(checks) - unjudged} judged, {unjudged} too short to judge).")


def ratio_cell(scaling: Scaling) -> str:
    """The ratio for a table cell: ``!`` when it is out of bounds, ``?`` when the run was too short to judge."""
    if not scaling.judged:
        return f"{scaling.ratio:.2f} ?"
    return f"{scaling.ratio:.2f}" + ("" if scaling.ok else " !")
