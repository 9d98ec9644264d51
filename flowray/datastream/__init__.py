"""``flowray.datastream``: as ``pyflink.datastream``."""

from flowray.datastream.data_stream import (
    ConnectedStreams,
    DataStream,
    DataStreamSink,
    KeyedStream,
)
from flowray.datastream.broadcast_stream import BroadcastConnectedStream, BroadcastStream
from flowray.datastream.execution_mode import RuntimeExecutionMode
from flowray.datastream.output_tag import OutputTag
from flowray.datastream.windowed_stream import AllWindowedStream, WindowedStream
from flowray.datastream.stream_execution_environment import StreamExecutionEnvironment
from flowray.operators.base import CheckpointedFunction, CheckpointListener
from flowray.datastream.checkpoint_config import CheckpointConfig
from flowray.datastream.checkpointing_mode import CheckpointingMode
from flowray.state.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
from flowray.runtime.execution.client import (
    JobClient,
    JobExecutionError,
    JobExecutionResult,
    SavepointError,
)
from flowray.common.job_status import JobStatus
from flowray.runtime.checkpoint.storage import RetainedCheckpoint, find_retained_checkpoints

from flowray.datastream.async_data_stream import AsyncDataStream
from flowray.datastream.functions import *  # noqa: F403
from flowray.datastream.functions import __all__ as _functions_all
from flowray.datastream.state import *  # noqa: F403
from flowray.datastream.state import __all__ as _state_all

__all__ = ["ConnectedStreams", "DataStream", "DataStreamSink", "KeyedStream",
           "WindowedStream", "AllWindowedStream", "OutputTag",
           "RuntimeExecutionMode", "StreamExecutionEnvironment", "JobClient", "SavepointError",
           "RetainedCheckpoint", "find_retained_checkpoints",
           "JobExecutionError", "JobExecutionResult", "JobStatus", "CheckpointConfig",
           "AsyncDataStream",
           "CheckpointingMode", "CheckpointedFunction", "CheckpointListener",
           "HashMapStateBackend", "EmbeddedRocksDBStateBackend"] + _functions_all + _state_all
__all__ += ["BroadcastStream", "BroadcastConnectedStream"]

# PyFlink's remaining pyflink.datastream names (issue 15)
from flowray.datastream.externalized_checkpoint_retention import (  # noqa: E402
    ExternalizedCheckpointRetention,
)
from flowray.datastream.state_backend import StateBackend  # noqa: E402
from flowray.datastream.window import (  # noqa: E402
    CountWindow,
    GlobalWindow,
    MergingWindowAssigner,
    TimeWindow,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
)

__all__ += ["ExternalizedCheckpointRetention", "StateBackend", "CountWindow", "GlobalWindow",
            "MergingWindowAssigner", "TimeWindow", "Trigger", "TriggerResult", "Window",
            "WindowAssigner"]
from flowray.datastream.slot_sharing_group import MemorySize, SlotSharingGroup  # noqa: E402

__all__ += ["MemorySize", "SlotSharingGroup"]

# the columnar path (an extension): map_batches, to_columnar, env.from_arrow
from flowray.datastream import columnar as _columnar  # noqa: E402,F401

# cycles (Flink's DataStream iteration API; PyFlink has none)
from flowray.datastream.data_stream import (  # noqa: E402
    ConnectedIterativeStreams,
    IterativeStream,
)

__all__ += ["IterativeStream", "ConnectedIterativeStreams"]

# plug-ins (Spark via RayDP) register their keys, methods and program runner on import
from flowray.common.configuration import load_plugins as _load_plugins  # noqa: E402

_load_plugins()
