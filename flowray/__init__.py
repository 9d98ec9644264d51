"""flowray: fault-tolerant, stateful stream processing for Python on Ray, shaped like PyFlink.

>>> from flowray import StreamExecutionEnvironment, Configuration
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect(limit=3)
[10, 20, 30]
"""

from flowray.common import *  # noqa: F403
from flowray.common import __all__ as _common_all
from flowray.datastream import *  # noqa: F403
from flowray.datastream import __all__ as _datastream_all
from flowray.datastream.connectors import *  # noqa: F403
from flowray.datastream.connectors import __all__ as _connectors_all
from flowray.datastream.window import *  # noqa: F403
from flowray.datastream.window import __all__ as _window_all
from flowray.runtime.execution.serialization import FunctionSerializationError
from flowray.runtime.graph.transformations import GraphError

# plug-ins: each registers its keys, methods and program runner on import
import flowray.spark  # noqa: F401  (Spark through RayDP)

__version__ = "0.1.0"
__all__ = (_common_all + _datastream_all + _connectors_all + _window_all
           + ["FunctionSerializationError", "GraphError"])
