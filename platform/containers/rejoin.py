"""What a container does to rejoin a run after its ZooKeeper session was lost.

A container whose session expired (a network cut, a long freeze, a ZooKeeper outage) was
taken for dead: its run is restarted with a new hello (:mod:`linkstream.containers.runtime`).
Two things must happen first:

* :func:`open_receiver` gives it a new data-plane socket: whatever the driver sent on the
  old connection before the cut (held in TCP buffers and delivered when the network comes
  back) is discarded with the old socket instead of reaching the restarted run;
* :func:`await_key` waits until its CURVE public key is in ZooKeeper again, since the driver
  admits a CURVE peer only while its key is published and does not retry a refused handshake.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import zmq
from kazoo.exceptions import KazooException

from linkstream.containers.transport import CurveKeys, Receiver
from linkstream.scheduler.keyring import KeyRing

#: how long a fixed data-plane port may stay held after its socket closed
REBIND_S = 3.0


def open_receiver(bind: str, keys: Callable[[], CurveKeys | None], wait: float = REBIND_S) -> Receiver:
    """A data-plane PULL socket bound to ``bind`` (retried while a fixed port is still held).

    Args:
        bind: The endpoint (``tcp://HOST:PORT`` or ``tcp://HOST:*``).
        keys: Makes the socket's CURVE server keys (``None``: plaintext).
        wait: Seconds to retry an address in use.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            return Receiver(bind, rcvhwm=10000, curve_keys=keys())
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def await_key(keyring: KeyRing, container: str, timeout: float = 10.0) -> bool:
    """Waits until ``container``'s public key is published; whether it was within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if keyring.public_key(container) is not None:
                return True
        except KazooException:
            pass
        time.sleep(0.05)
    return False
