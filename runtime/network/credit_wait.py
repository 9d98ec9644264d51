"""Waiting for a credit without polling: a task whose outputs write in overdraft (unaligned
checkpoints) must not block inside a write, yet must wake the moment a consumer returns a
credit, a priority barrier arrives on an input, or an action lands in its mailbox.

:class:`CreditWaiter` waits on all three at once. Socket channels are waited on with a
selector: a writer's connection is readable when credits came back, a reader's when
frames arrived (a descriptor of -1: its stream ended, nothing is waited for). A channel
without ``fileno`` (in process, through Ray) cannot be selected; then the wait is cut to
``poll_s`` and the caller looks again. ``wake()`` ends
a wait from any thread, and a wake before the wait is not lost.

>>> import socket
>>> waiter = CreditWaiter()
>>> waiter.wake()
>>> waiter.wait([], [], 10.0)     # returns at once: the wake came first
True
>>> a, b = socket.socketpair()
>>> class Writer:
...     def fileno(self): return a.fileno()
>>> waiter.wait([Writer()], [], 0.0)
False
>>> _ = b.send(b"credit")
>>> waiter.wait([Writer()], [], 10.0)
True
>>> waiter.close(); a.close(); b.close()
"""

from __future__ import annotations

import selectors
import socket
from typing import Any, Dict, Sequence

__all__ = ["CreditWaiter"]


class CreditWaiter:
    """One task's wait for output credits, input frames or a wake-up (not thread-safe
    except :meth:`wake`)."""

    def __init__(self, poll_s: float = 0.001) -> None:
        self.poll_s = poll_s
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._registered: Dict[int, Any] = {}

    def wake(self) -> None:
        """End the current or the next :meth:`wait` (any thread)."""
        try:
            self._wake_w.send(b"\0")
        except OSError:   # the buffer is full (a wake is pending anyway), or closed
            pass

    def wait(self, writers: Sequence[Any], readers: Sequence[Any], timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until one of ``writers`` has bytes to read (credits),
        one of ``readers`` has (frames), or :meth:`wake` was called. True if one of them
        happened; False on the timeout (or a cut wait: a channel without a descriptor)."""
        wanted: Dict[int, Any] = {}
        selectable = True
        for channel in (*writers, *readers):
            fileno = getattr(channel, "fileno", None)
            if fileno is None:
                selectable = False
                continue
            fd = fileno()
            if fd >= 0:   # (-1: the channel's stream ended, nothing more comes)
                wanted[fd] = channel
        for fd in list(self._registered):
            # a closed channel's descriptor number may be reused by a new connection
            if wanted.get(fd) is not self._registered[fd]:
                try:
                    self._sel.unregister(fd)
                except (KeyError, ValueError, OSError):
                    pass
                del self._registered[fd]
        for fd, channel in wanted.items():
            if fd not in self._registered:
                try:
                    self._sel.register(fd, selectors.EVENT_READ, channel)
                except (ValueError, OSError):   # closed meanwhile: look again soon
                    selectable = False
                    continue
                self._registered[fd] = channel
        if not selectable:
            timeout_s = min(timeout_s, self.poll_s)
        events = self._sel.select(max(0.0, timeout_s))
        for key, _ in events:
            if key.data is None:
                self._drain_wakes()
        return bool(events)

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
