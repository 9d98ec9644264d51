"""flowray: fault-tolerant, stateful stream processing for Python on Ray, shaped like PyFlink.

>>> from flowray import StreamExecutionEnvironment, Configuration
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> env.from_collection([1, 2, 3]).map(lambda x: x * 10).execute_and_collect(limit=3)
[10, 20, 30]

The API's names are imported on first use (``from flowray import X``, ``flowray.X``,
``from flowray import *``): a task or job master process, which imports only the runtime
it needs (``flowray.runtime...``), starts without loading the whole API.
"""

from typing import Any, List

__version__ = "0.1.0"

#: where the package's names come from (each module's ``__all__``)
_API_MODULES = ("flowray.common", "flowray.datastream", "flowray.datastream.connectors",
                "flowray.datastream.window")
_EXTRA = {"FunctionSerializationError": "flowray.runtime.execution.serialization",
          "GraphError": "flowray.runtime.graph.transformations"}


def _api() -> List[Any]:
    import importlib
    return [importlib.import_module(m) for m in _API_MODULES]  # (the API loads plug-ins)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        names: List[str] = []
        for module in _api():
            names += list(module.__all__)
        value: Any = names + sorted(_EXTRA)
    elif name in _EXTRA:
        import importlib
        value = getattr(importlib.import_module(_EXTRA[name]), name)
    else:
        for module in _api():
            if name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                break
        else:
            raise AttributeError(f"module 'flowray' has no attribute {name!r}")
    globals()[name] = value
    return value
