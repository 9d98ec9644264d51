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

__all__ = ["Encoder", "SimpleStringEncoder", "SerializationSchema", "DeserializationSchema",
           "SimpleStringSchema", "ByteArraySchema", "RowFieldExtractorSchema"]


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


class SerializationSchema:
    """Turns a record into the bytes a connector sends (``serialize``); picklable."""

    def serialize(self, element: Any) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} does not implement serialize()")


class DeserializationSchema:
    """Turns the bytes a connector received into a record (``deserialize``); picklable."""

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement deserialize()")

    def is_end_of_stream(self, next_element: Any) -> bool:
        """``True`` ends the stream at ``next_element`` (not emitted)."""
        return False


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings as bytes in ``charset`` (default UTF-8), as PyFlink's.

    >>> s = SimpleStringSchema()
    >>> s.serialize("héllo"), s.deserialize(b"h\\xc3\\xa9llo")
    (b'h\\xc3\\xa9llo', 'héllo')
    """

    def __init__(self, charset: str = "UTF-8") -> None:
        try:
            codecs.lookup(charset)
        except LookupError:
            raise ValueError(f"SimpleStringSchema: unknown charset {charset!r}") from None
        self.charset = charset

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, str):
            raise TypeError(f"SimpleStringSchema serializes strings, got {element!r}")
        return element.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return bytes(message).decode(self.charset)

    def __repr__(self) -> str:
        return f"SimpleStringSchema({self.charset!r})"


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Bytes as they are, as PyFlink's."""

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, (bytes, bytearray, memoryview)):
            raise TypeError(f"ByteArraySchema serializes bytes, got {element!r}")
        return bytes(element)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)


class RowFieldExtractorSchema(SerializationSchema):
    """Serializes a record to the bytes held in its field ``field_index`` (a ``Row`` or any
    indexable record), as PyFlink's: the field must already be bytes; ``None`` stays
    ``None`` (a Kafka record without key).

    >>> RowFieldExtractorSchema(1).serialize((b"key", b"value"))
    b'value'
    >>> RowFieldExtractorSchema(0).serialize(("not bytes",))
    Traceback (most recent call last):
    ...
    TypeError: RowFieldExtractorSchema(0): field 0 must be bytes, got str 'not bytes'
    """

    def __init__(self, field_index: int) -> None:
        if not isinstance(field_index, int) or field_index < 0:
            raise ValueError(f"Field index must be non-negative, got: {field_index}")
        self.field_index = field_index

    def serialize(self, element: Any) -> Any:
        i = self.field_index
        try:
            value = element[i]
        except (IndexError, TypeError, KeyError):
            raise ValueError(f"RowFieldExtractorSchema({i}): the record has no field {i}: "
                             f"{element!r}") from None
        if value is None or isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"RowFieldExtractorSchema({i}): field {i} must be bytes, got "
                        f"{type(value).__name__} {value!r}")
