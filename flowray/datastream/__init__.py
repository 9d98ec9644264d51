"""``flowray.datastream``: as ``pyflink.datastream``."""

from flowray.runtime.api import (
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from flowray.operators.base import CheckpointedFunction, CheckpointListener
from flowray.runtime.checkpoint_config import CheckpointConfig, CheckpointingMode
from flowray.state.backends import EmbeddedRocksDBStateBackend, HashMapStateBackend
from flowray.runtime.client import (
    JobClient,
    JobExecutionError,
    JobExecutionResult,
    JobStatus,
)

from flowray.datastream.functions import *  # noqa: F401,F403
from flowray.datastream.functions import __all__ as _functions_all
from flowray.datastream.state import *  # noqa: F401,F403
from flowray.datastream.state import __all__ as _state_all

__all__ = ["ConnectedStreams", "DataStream", "DataStreamSink", "KeyedStream",
           "RuntimeExecutionMode", "StreamExecutionEnvironment", "JobClient",
           "JobExecutionError", "JobExecutionResult", "JobStatus", "CheckpointConfig",
           "CheckpointingMode", "CheckpointedFunction", "CheckpointListener",
           "HashMapStateBackend", "EmbeddedRocksDBStateBackend"] + _functions_all + _state_all
