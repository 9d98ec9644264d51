"""When a source task waits after a thin poll (:class:`ThinPollPacer`).

A source that is not at its top rate (records trickle in: a paced generator, a topic
read at its head) gives a few records at each poll, and its task polls again at once: the
task keeps a core busy moving batches of a handful of records while the tasks downstream
wait for that core, and records queue up in front of them. After a poll that gave under a
sixteenth of what it asked for, the task waits briefly (half its buffer timeout, 1-2 ms,
or until its mailbox has work: a checkpoint trigger does not wait), and the next poll
takes what arrived meanwhile.

A source whose polls give few records however long it waits (one record a poll by
design) would only be slowed: when the poll after a wait gave under twice the thin poll
before it, the pacer stops waiting for the next ``retry_polls`` polls.

>>> pacer = ThinPollPacer(wait_s=0.001, retry_polls=3)
>>> pacer.after_poll(1000, asked=1000)    # a full poll: poll again at once
0.0
>>> pacer.after_poll(4, asked=1000)       # thin: wait for more
0.001
>>> pacer.after_poll(250, asked=1000)     # the wait helped
0.0
>>> pacer.after_poll(10, asked=1000), pacer.after_poll(10, asked=1000)
(0.001, 0.0)
>>> [pacer.after_poll(10, asked=1000) for _ in range(4)]   # not again for 3 polls
[0.0, 0.0, 0.0, 0.001]
"""

from __future__ import annotations

__all__ = ["ThinPollPacer"]


class ThinPollPacer:
    """Says, after each poll of a source task, how long to wait before the next one."""

    #: a poll is thin below this share of what it asked for
    THIN_SHARE = 16

    def __init__(self, wait_s: float = 0.001, retry_polls: int = 1024) -> None:
        if wait_s < 0 or retry_polls < 0:
            raise ValueError(f"ThinPollPacer: wait_s and retry_polls must not be negative, "
                             f"got {wait_s}, {retry_polls}")
        self.wait_s = wait_s
        self.retry_polls = retry_polls
        self._waited_after = 0    # records of the thin poll the last wait followed (0: none)
        self._off_for = 0         # polls left without waits

    @classmethod
    def for_buffer_timeout(cls, timeout_ms: int) -> "ThinPollPacer":
        """The pacer of a source task whose outputs flush after ``timeout_ms`` (the
        smallest of them; ``-1``: only when full): it waits half of that, 1 ms at least
        (at ``0`` too: the core it frees is worth more than the millisecond) and 2 ms at
        most, so that records wait no longer than the buffer timeout lets them anyway.

        >>> [ThinPollPacer.for_buffer_timeout(t).wait_s for t in (0, 2, 3, 5, 100, -1)]
        [0.001, 0.001, 0.0015, 0.002, 0.002, 0.002]
        """
        wait_ms = 2.0 if timeout_ms < 0 else min(2.0, max(1.0, timeout_ms / 2))
        return cls(wait_s=wait_ms / 1000.0)

    def after_poll(self, records: int, asked: int) -> float:
        """Seconds to wait after a poll that gave ``records`` of the ``asked`` (0: poll
        again at once). A poll that gave nothing is not this pacer's (the task waits for
        its source to have records)."""
        if self._off_for > 0:
            self._off_for -= 1
            return 0.0
        if records == 0:   # nothing arrived: says nothing of the source's polls
            self._waited_after = 0
            return 0.0
        thin = records * self.THIN_SHARE < asked
        if self._waited_after:
            before, self._waited_after = self._waited_after, 0
            if records < 2 * before:   # waiting gave no more: polls are small by design
                self._off_for = self.retry_polls
                return 0.0
        if thin and self.wait_s > 0:
            self._waited_after = records
            return self.wait_s
        return 0.0
