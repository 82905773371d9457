"""StopDeadline: the last-resort bound on a broker's stop.

Every step of the stop is bounded by itself (the controlled shutdown by its
retries and ``controller.socket.timeout.ms``, the drain by its timeout, a
request still pending then is expired), so a stop normally ends well within
its bound.  This is for what is not: a service whose ``stopService``
Deferred never fires, or a call that blocks the reactor's thread (a thread
pool joining a worker stuck in a system call), or a thread that keeps the
interpreter from exiting once the reactor has stopped.  Kafka's broker has
the same kind of backstop (its shutdown hook exits the JVM whatever is left
running).

``arm(seconds, phase)`` sets the deadline ``seconds`` from now (arming again
moves it: the broker arms it when its stop begins, for the controlled
shutdown, the drain and the rest, and again when the drain begins).  When
it passes:

* on the reactor (``clock.callLater``), if the reactor still runs: one
  critical log line naming the phase, the service still stopping and the
  requests still in flight, then the process exits with status 1;
* on a daemon thread ``THREAD_MARGIN_SECONDS`` later, if the process is
  still there and either the stop has not finished (the reactor's thread is
  blocked) or the reactor has stopped (the interpreter waits for a thread
  at exit): one line written straight to standard error, then the same
  exit.

``disarm()`` cancels the reactor's timer once the stop has finished.  The
thread then only acts if the reactor is no longer running, so a broker
stopped inside a process that goes on (a test's reactor) is left alone.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable

from twisted.logger import Logger

#: How long after the deadline the watching thread ends the process, if the reactor could not.
THREAD_MARGIN_SECONDS = 2.0
#: The process's exit status when the bound ended it.
EXIT_STATUS = 1


class StopDeadline:
    log = Logger(namespace="twisted_kafka.server.StopDeadline")

    def __init__(self, clock, *, describe: Callable[[], str] = lambda: "", exit: Callable[[int], None] = os._exit,
                 monotonic: Callable[[], float] = time.monotonic, start_thread: bool = True):
        self.clock = clock
        self.describe = describe          # what is still stopping, for the log line
        self._exit = exit
        self._monotonic = monotonic
        self._start_thread = start_thread
        self._timer = None
        self._thread: threading.Thread | None = None
        self._wakeup = threading.Event()
        self._lock = threading.Lock()
        self.phase = ""
        self.seconds = 0.0
        self.deadline: float | None = None    # on ``monotonic``'s scale, for the watching thread
        self.expired = False
        self.finished = False                 # disarmed: the stop has finished

    def arm(self, seconds: float, phase: str) -> None:
        """The process must be gone ``seconds`` from now (this replaces any earlier deadline)."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        with self._lock:
            self.phase, self.seconds = phase, seconds
            self.deadline = self._monotonic() + seconds
            self.finished = False
        self._timer = self.clock.callLater(seconds, self._expired_on_reactor)
        if self._start_thread and self._thread is None:
            self._thread = threading.Thread(target=self.watch, name="stop-deadline", daemon=True)
            self._thread.start()
        self._wakeup.set()

    def disarm(self) -> None:
        """The stop has finished: no log line and no exit from the reactor (the thread still watches)."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self.finished = True

    @property
    def armed(self) -> bool:
        return self._timer is not None and self._timer.active()

    def _expired_on_reactor(self) -> None:
        self._timer = None
        self.expired = True
        self.log.critical("The broker did not stop within {seconds:g}s ({phase}; {what}); exiting now with "
                          "status {status}", seconds=self.seconds, phase=self.phase, what=self.describe() or "-",
                          status=EXIT_STATUS)
        _flush()
        self._exit(EXIT_STATUS)

    def watch(self, wait: Callable[[float], object] | None = None) -> None:
        """The watching thread's loop: exit once the deadline plus the margin has passed."""
        wait = wait if wait is not None else self._wakeup.wait
        while True:
            self._wakeup.clear()          # before reading: an arm() from now on wakes the wait below
            with self._lock:
                deadline, phase, seconds = self.deadline, self.phase, self.seconds
            if deadline is None:
                wait(3600.0)
                continue
            left = deadline + THREAD_MARGIN_SECONDS - self._monotonic()
            if left <= 0:
                break
            wait(left)
        if self.finished and getattr(self.clock, "running", False):
            self._thread = None
            return                        # stopped in time, and the process goes on: not ours to end
        self.expired = True
        line = (f"The broker did not stop within {seconds:g}s ({phase}) and its reactor is not answering; "
                f"exiting now with status {EXIT_STATUS}\n")
        with contextlib.suppress(OSError):
            os.write(2, line.encode())
        self._exit(EXIT_STATUS)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


__all__ = ["StopDeadline", "THREAD_MARGIN_SECONDS", "EXIT_STATUS"]
