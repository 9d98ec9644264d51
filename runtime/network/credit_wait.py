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

from typing import Any, Dict, Sequence

from flowray.runtime.network.selecting import ChannelSelector

__all__ = ["CreditWaiter"]


class CreditWaiter:
    """One task's wait for output credits, input frames or a wake-up (not thread-safe
    except :meth:`wake`)."""

    def __init__(self, poll_s: float = 0.001) -> None:
        self.poll_s = poll_s
        self._selector = ChannelSelector()

    def wake(self) -> None:
        """End the current or the next :meth:`wait` (any thread)."""
        self._selector.wake()

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
        if not selectable:
            timeout_s = min(timeout_s, self.poll_s)
        happened, _ = self._selector.select(wanted, timeout_s)
        return happened

    def close(self) -> None:
        self._selector.close()
