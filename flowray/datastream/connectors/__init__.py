"""``flowray.datastream.connectors``: sources and sinks, as ``pyflink.datastream.connectors``."""

from flowray.operators.sinks import Sink, SinkWriter, SinkWriterContext
from flowray.operators.sources import (
    Boundedness,
    CollectionSource,
    NumberSequenceSource,
    Source,
    SourceReader,
    SourceReaderContext,
)

__all__ = ["Boundedness", "CollectionSource", "NumberSequenceSource", "Sink", "SinkWriter",
           "SinkWriterContext", "Source", "SourceReader", "SourceReaderContext"]
