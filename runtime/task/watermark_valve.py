"""Watermark alignment over the channels of one input (Flink's ``StatusWatermarkValve``).

>>> v = WatermarkValve(["a", "b"])
>>> v.on_watermark("a", 5) is None      # b still holds it back
True
>>> v.on_watermark("b", 7)
5
>>> v.on_end_of_partition("a")          # an ended channel no longer holds back
7
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional

from flowray.common.constants import MAX_WATERMARK, MIN_WATERMARK

__all__ = ["WatermarkValve"]


class WatermarkValve:
    def __init__(self, channels: Iterable[str]) -> None:
        self._wm: Dict[str, int] = {c: MIN_WATERMARK for c in channels}
        self._ended: set = set()
        self.current = MIN_WATERMARK

    def _advance(self) -> Optional[int]:
        live = [w for c, w in self._wm.items() if c not in self._ended]
        new = min(live) if live else MAX_WATERMARK
        if new > self.current:
            self.current = new
            return new
        return None

    def on_watermark(self, channel: str, timestamp: int) -> Optional[int]:
        """The input's new watermark if it advanced, else ``None``."""
        if timestamp > self._wm[channel]:
            self._wm[channel] = timestamp
            return self._advance()
        return None

    def on_end_of_partition(self, channel: str) -> Optional[int]:
        self._ended.add(channel)
        return self._advance()
