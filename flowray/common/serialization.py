"""Record encoders for sinks, as ``pyflink.common.serialization``.

An :class:`Encoder` turns one record into the bytes a row-format sink writes for it.
``Encoder.simple_string_encoder()`` writes ``str(record)`` in a charset followed by ``\\n``
(Flink's ``SimpleStringEncoder``). Subclass :class:`Encoder` and override ``encode`` for
other formats; an encoder must be picklable.

>>> Encoder.simple_string_encoder().encode(("a", 1))
b"('a', 1)\\n"
>>> Encoder.simple_string_encoder("UTF-16-LE").encode("é")
b'\\xe9\\x00\\n\\x00'
"""

from __future__ import annotations

import codecs
from typing import Any

__all__ = ["Encoder", "SimpleStringEncoder"]


class Encoder:
    """Turns one record into bytes (for row-format file sinks)."""

    def encode(self, element: Any) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} does not implement encode()")

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "SimpleStringEncoder":
        """``str(record)`` encoded in ``charset_name``, then a line break."""
        return SimpleStringEncoder(charset_name)


class SimpleStringEncoder(Encoder):
    """``str(element).encode(charset) + "\\n".encode(charset)``."""

    def __init__(self, charset_name: str = "UTF-8") -> None:
        try:
            codecs.lookup(charset_name)
        except LookupError:
            raise ValueError(f"simple_string_encoder: unknown charset {charset_name!r}") from None
        self.charset = charset_name
        self._newline = "\n".encode(charset_name)

    def encode(self, element: Any) -> bytes:
        return str(element).encode(self.charset) + self._newline

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset!r})"
