"""How a plug-in extends the DataStream API without the core knowing it exists.

A plug-in (flowray's Spark support is one: :mod:`flowray.spark`) may

* add methods to the environment or to streams with :func:`add_method`
  (``env.from_spark``, ``stream.to_spark_dataframe``);
* keep per-environment state with :meth:`StreamExecutionEnvironment.extension_state
  <flowray.datastream.stream_execution_environment.StreamExecutionEnvironment.extension_state>`,
  which is reset when a program is submitted;
* take part in running a program with :func:`register_program_runner`: at
  ``execute_async`` each registered :class:`ProgramRunner` may run the program itself (for
  example in two jobs around a Spark stage) by calling the ``submit`` it is given, or
  decline with ``None``; when all decline the program is submitted as one job.

Plug-ins are registered when :mod:`flowray` is imported. Contract for a runner: it is
called once per ``execute_async``, with the program's transformations and the state its
plug-in kept for that program; it must return a :class:`JobClient` for the last job it
submitted, or ``None`` without having submitted anything.

>>> class Shout:
...     pass
>>> add_method(Shout, "hello", lambda self: "hello")
>>> Shout().hello()
'hello'
>>> add_method(Shout, "hello", lambda self: "again")
Traceback (most recent call last):
...
ValueError: Shout already has an attribute 'hello'; a plug-in cannot replace it
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

if TYPE_CHECKING:
    from flowray.datastream.stream_execution_environment import StreamExecutionEnvironment
    from flowray.runtime.execution.client import JobClient
    from flowray.runtime.graph.transformations import Transformation

__all__ = ["ProgramRunner", "SubmitJob", "add_method", "register_program_runner",
           "program_runners"]

#: ``submit(transformations, job_name)``: build, deploy and start one job; its client
SubmitJob = Callable[[Sequence["Transformation"], Optional[str]], "JobClient"]


class ProgramRunner(abc.ABC):
    """Runs a program in its own way, or declines (see the module doc)."""

    @abc.abstractmethod
    def run(self, env: "StreamExecutionEnvironment", transformations: List["Transformation"],
            state: Any, job_name: str, submit: SubmitJob) -> Optional["JobClient"]:
        """``state``: what this runner's plug-in kept in ``env.extension_state`` for this
        program (``None`` if nothing)."""


_runners: List[tuple] = []  # (state key, runner)


def register_program_runner(state_key: str, runner: ProgramRunner) -> None:
    """Ask ``runner`` first at every ``execute_async``; it gets the extension state kept
    under ``state_key``. Registering the same key again replaces the runner."""
    _runners[:] = [(k, r) for k, r in _runners if k != state_key]
    _runners.append((state_key, runner))


def program_runners() -> List[tuple]:
    """The registered ``(state key, runner)`` pairs, in registration order."""
    return list(_runners)


def add_method(cls: type, name: str, fn: Callable[..., Any]) -> None:
    """Add ``fn`` as method ``name`` of ``cls``; an existing attribute is never replaced."""
    if name in vars(cls) or any(name in vars(base) for base in cls.__mro__[1:]):
        raise ValueError(f"{cls.__name__} already has an attribute {name!r}; a plug-in "
                         "cannot replace it")
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__name__}.{name}"
    setattr(cls, name, fn)
