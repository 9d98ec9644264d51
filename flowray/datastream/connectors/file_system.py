"""``flowray.datastream.connectors.file_system``: as ``pyflink.datastream.connectors.file_system``.

``FileSource`` reads text files; ``FileSink`` writes part files exactly once:

>>> from flowray.common.serialization import Encoder
>>> sink = (FileSink.for_row_format("/tmp/out", Encoder.simple_string_encoder())
...         .with_output_file_config(
...             OutputFileConfig.builder().with_part_prefix("part").with_part_suffix(".txt").build())
...         .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
...         .build())
>>> sink.base_path, sink.output_file_config.get_part_suffix()
('/tmp/out', '.txt')
"""

from flowray.common.serialization import Encoder  # noqa: F401 - importable here, as in PyFlink
from flowray.operators.file_sink import (
    FileSink,
    OutputFileConfig,
    OutputFileConfigBuilder,
    RollingPolicy,
    RowFormatBuilder,
)

from flowray.datastream.connectors._file_source_facade import *  # noqa: F403
from flowray.datastream.connectors._file_source_facade import __all__ as _file_source_all

__all__ = list(_file_source_all) + ["FileSink", "RowFormatBuilder", "OutputFileConfig",
                                    "OutputFileConfigBuilder", "RollingPolicy"]
