"""The ``FileSource`` half of ``flowray.datastream.connectors.file_system`` (as
``pyflink.datastream.connectors.file_system``); merged into that module's exports."""

from flowray.operators.file_source import FileSource, FileSourceBuilder, StreamFormat

__all__ = ["FileSource", "FileSourceBuilder", "StreamFormat"]
