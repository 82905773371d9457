"""BrokerEpoch: this broker's epoch (KIP-380), held in one place and read by whoever needs it.

The controller fences a broker's earlier incarnations by its epoch, and a
broker applies only the controller requests that carry its current one
(``ControllerRequestGuard``).  A single node draws its epoch when the server
is built (``new_broker_epoch``: growing across restarts, with random low
bits).  A ZooKeeper cluster member's epoch is the czxid of its registration
znode: unknown (-1) until ``BrokerRegistration`` has made it, and new each
time a new session makes it again -- the registration calls ``update``.

Its readers -- the guard, the lifecycle manager (ControlledShutdown carries
it), the ISR manager (AlterPartition does) and the log manager (the
clean-shutdown marker records it) -- read ``current`` when they need it,
so a new epoch reaches every one of them at once.
"""

from __future__ import annotations


class BrokerEpoch:
    """The broker epoch in force; see the module docstring."""

    def __init__(self, value: int = -1):
        self._value = value

    def __repr__(self) -> str:
        return f"BrokerEpoch({self._value})"

    @property
    def current(self) -> int:
        """The epoch now; -1 while a cluster member is not registered yet."""
        return self._value

    def update(self, value: int) -> None:
        """This broker's registration was (re)created: its czxid is the epoch from now on."""
        self._value = value


__all__ = ["BrokerEpoch"]
