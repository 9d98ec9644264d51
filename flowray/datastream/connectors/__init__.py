"""``flowray.datastream.connectors``: sources and sinks, as ``pyflink.datastream.connectors``."""

from flowray.operators.sinks import Sink, SinkWriter, SinkWriterContext
from flowray.operators.two_phase_commit import TwoPhaseCommitSink
from flowray.operators.sources import (
    Boundedness,
    CollectionSource,
    NumberSequenceSource,
    Source,
    SourceReader,
    SourceReaderContext,
)

from flowray.datastream.connectors.base import DeliveryGuarantee
from flowray.datastream.connectors.file_system import (
    FileSink,
    FileSource,
    FileSourceBuilder,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from flowray.datastream.connectors.kafka import KafkaSource
from flowray.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)

__all__ = ["Boundedness", "CollectionSource", "NumberSequenceSource", "Sink", "SinkWriter",
           "SinkWriterContext", "Source", "SourceReader", "SourceReaderContext",
           "DeliveryGuarantee", "FileSink", "FileSource", "FileSourceBuilder",
           "OutputFileConfig", "RollingPolicy", "StreamFormat", "KafkaSource", "JdbcSink",
           "JdbcConnectionOptions", "JdbcExecutionOptions", "TwoPhaseCommitSink"]
