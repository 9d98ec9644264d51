"""Watermark alignment over the channels of one input (Flink's ``StatusWatermarkValve``).

The input's watermark is the minimum over channels that are neither ended nor idle. An
idle channel holds nothing back; when it becomes active again it joins the minimum only
once its watermark has caught up with the input's (so the input's watermark never goes
back). When every live channel is idle, the input is idle and its watermark moves to the
highest any channel reached.

>>> v = WatermarkValve(["a", "b"])
>>> v.on_watermark("a", 5) is None      # b still holds it back
True
>>> v.on_watermark("b", 7)
5
>>> v.on_end_of_partition("a")          # an ended channel no longer holds back
7
>>> v.on_status("b", idle=True)         # every live channel idle: the input is idle
(None, True)
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Set, Tuple

from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["WatermarkValve"]


class WatermarkValve:
    def __init__(self, channels: Iterable[str]) -> None:
        self._wm: Dict[str, int] = {c: MIN_WATERMARK for c in channels}
        self._ended: Set[str] = set()
        self._idle: Set[str] = set()
        self._unaligned: Set[str] = set()  # active again, not yet caught up
        self.current = MIN_WATERMARK
        self.idle = False

    def _advance(self) -> Optional[int]:
        live = [w for c, w in self._wm.items()
                if c not in self._ended and c not in self._idle and c not in self._unaligned]
        if not live:
            if any(c not in self._ended for c in self._wm):
                return None  # every live channel idle or catching up: nothing to say
            new = MAX_WATERMARK
        else:
            new = min(live)
        if new > self.current:
            self.current = new
            return new
        return None

    def on_watermark(self, channel: str, timestamp: int) -> Optional[int]:
        """The input's new watermark if it advanced, else ``None``."""
        if timestamp > self._wm[channel]:
            self._wm[channel] = timestamp
            if channel in self._unaligned and timestamp >= self.current:
                self._unaligned.discard(channel)
            return self._advance()
        return None

    def on_end_of_partition(self, channel: str) -> Optional[int]:
        self._ended.add(channel)
        self._idle.discard(channel)
        self._unaligned.discard(channel)
        return self._advance()

    def status_change(self) -> Optional[bool]:
        """The input's new idleness if it changed since last reported (e.g. after the last
        active channel ended while the others are idle), else ``None``."""
        live = [c for c in self._wm if c not in self._ended]
        now_idle = bool(live) and all(c in self._idle for c in live)
        if now_idle == self.idle:
            return None
        self.idle = now_idle
        return now_idle

    def on_status(self, channel: str, idle: bool) -> Tuple[Optional[int], Optional[bool]]:
        """A channel went idle or active: ``(new watermark or None, new input status or
        None)``; the status is reported only when the input's idleness changed."""
        if idle:
            self._idle.add(channel)
            self._unaligned.discard(channel)
            live = [c for c in self._wm if c not in self._ended]
            if live and all(c in self._idle for c in live):
                # the last active channel went idle: event time moves to the highest
                # watermark any channel reached (Flink's StatusWatermarkValve)
                highest = max(self._wm[c] for c in live)
                if highest > self.current:
                    self.current = highest
                    return highest, self.status_change()
                return None, self.status_change()
        else:
            if channel not in self._idle:
                return None, None
            self._idle.discard(channel)
            if self._wm[channel] < self.current:
                self._unaligned.add(channel)
        wm = self._advance()
        return wm, self.status_change()
