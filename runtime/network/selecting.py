"""One selector over channel descriptors plus a wake-up: what a task waits on when it
waits for input (:class:`~flowray.runtime.network.socket_transport.SocketInputGate`) or
for credits (:class:`~flowray.runtime.network.credit_wait.CreditWaiter`).

``wake()`` writes a byte to a socket pair the selector watches; the byte stays until a
select returns it, so a wake before the wait is not lost.

>>> import socket
>>> sel = ChannelSelector()
>>> sel.wake()
>>> sel.select({}, 10.0)           # the wake: nothing ready, at once
(True, [])
>>> a, b = socket.socketpair()
>>> sel.select({a.fileno(): "a"}, 0.0)
(False, [])
>>> _ = b.send(b"x")
>>> sel.select({a.fileno(): "a"}, 10.0)
(True, ['a'])
>>> sel.close(); a.close(); b.close()
"""

from __future__ import annotations

import selectors
import socket
from typing import Any, Dict, List, Tuple

__all__ = ["ChannelSelector"]


class ChannelSelector:
    """Waits until one of the given descriptors is readable or :meth:`wake` was called
    (not thread-safe except :meth:`wake`)."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._registered: Dict[int, Any] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)

    def wake(self) -> None:
        """End the current or the next :meth:`select` (any thread)."""
        try:
            self._wake_w.send(b"\0")
        except OSError:   # the buffer is full (a wake is pending anyway), or closed
            pass

    def select(self, wanted: Dict[int, Any], timeout_s: float) -> Tuple[bool, List[Any]]:
        """Wait up to ``timeout_s`` for the descriptors of ``wanted`` (descriptor ->
        what to return for it): (whether anything happened, a wake included; the values
        of the readable descriptors)."""
        registered = self._registered
        for fd in list(registered):
            # a closed channel's descriptor number may be reused by a new connection
            if wanted.get(fd) is not registered[fd]:
                try:
                    self._sel.unregister(fd)
                except (KeyError, ValueError, OSError):
                    pass
                del registered[fd]
        for fd, data in wanted.items():
            if fd not in registered:
                self._sel.register(fd, selectors.EVENT_READ, data)
                registered[fd] = data
        events = self._sel.select(max(0.0, timeout_s))
        ready = []
        for key, _ in events:
            if key.data is None:
                self._drain_wakes()
            else:
                ready.append(key.data)
        return bool(events), ready

    def _drain_wakes(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:   # BlockingIOError: drained
            pass

    def close(self) -> None:
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
