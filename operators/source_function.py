"""PyFlink-style ``SourceFunction`` (``run(ctx)`` / ``cancel()``) as a flowray
:class:`Source`, for ``env.add_source``.

``run(ctx)`` runs in a thread of its own and hands records over with ``ctx.collect(x)``;
the source ends when ``run`` returns. ``collect`` blocks while ``max_pending`` records wait
to be emitted (backpressure). A failure in ``run`` fails the task.

Checkpoints. By default nothing of ``run``'s progress is kept: after a restore ``run``
starts again from the beginning, so records may be emitted again (at-least-once when ``run``
reproduces its records, nothing stronger). A function that also defines
``snapshot_position()`` (its picklable position) and ``restore_position(position)`` gets
exactly-once: it must update its position and ``collect`` under
``ctx.get_checkpoint_lock()``, as in Flink; a checkpoint then keeps its position together
with the records collected but not yet emitted, and a restore emits those first.

>>> class Count(SourceFunction):
...     def run(self, ctx):
...         for i in range(3):
...             ctx.collect(i)
>>> reader = SourceFunctionSource(Count()).create_reader(SourceReaderContext(0, 1))
>>> out = []
>>> while True:
...     batch = reader.poll_next(10)
...     if batch is None:
...         break
...     out += batch
>>> out
[0, 1, 2]
"""

from __future__ import annotations

import threading
from typing import Any, List, Optional

from flowray.operators.functions import Function
from flowray.operators.sources import Boundedness, Source, SourceReader, SourceReaderContext

__all__ = ["SourceFunction", "SourceContext", "SourceFunctionSource"]


class SourceFunction(Function):
    """A source written as a loop: ``run(ctx)`` emits with ``ctx.collect`` until it returns
    or ``cancel()`` is called (from another thread; make ``run`` stop soon after)."""

    def __init__(self, source_func: Any = None) -> None:
        if source_func is not None:  # PyFlink's wraps a Java SourceFunction
            raise NotImplementedError(
                f"SourceFunction({source_func!r}): Java source functions are not "
                "implemented in flowray; instead: subclass SourceFunction and implement "
                "run(ctx) and cancel()")

    def run(self, ctx: "SourceContext") -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement run(ctx)")

    def cancel(self) -> None:
        pass


class _Cancelled(BaseException):
    """Unwinds ``run`` when the task closes while ``collect`` waits for room."""


class SourceContext:
    """What ``SourceFunction.run`` gets: ``collect`` and the checkpoint lock."""

    def __init__(self, reader: "_SourceFunctionReader") -> None:
        self._reader = reader

    def collect(self, element: Any) -> None:
        """Emit ``element``; blocks while too many records wait to be emitted."""
        self._reader._put(element)

    def get_checkpoint_lock(self) -> Any:
        """Hold it (``with ctx.get_checkpoint_lock():``) while collecting and updating
        the position ``snapshot_position()`` returns."""
        return self._reader._lock


class _SourceFunctionReader(SourceReader):
    def __init__(self, fn: SourceFunction, max_pending: int) -> None:
        self._fn = fn
        self._max = max_pending
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._pending: List[Any] = []
        self._thread: Optional[threading.Thread] = None
        self._done = False
        self._error: Optional[BaseException] = None
        self._closing = False

    def _checkpointed(self) -> bool:
        return callable(getattr(self._fn, "snapshot_position", None)) and \
            callable(getattr(self._fn, "restore_position", None))

    def _put(self, element: Any) -> None:
        with self._cond:
            while len(self._pending) >= self._max and not self._closing:
                self._cond.wait()
            if self._closing:
                raise _Cancelled()
            self._pending.append(element)

    def _run(self) -> None:
        try:
            self._fn.run(SourceContext(self))
        except _Cancelled:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the task thread
            self._error = e
        finally:
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def poll_next(self, max_records: int) -> Optional[List[Any]]:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"source-function-{type(self._fn).__name__}")
            self._thread.start()
        with self._cond:
            if self._pending:
                batch = self._pending[:max_records]
                del self._pending[:max_records]
                self._cond.notify_all()
                return batch
            if self._done:
                if self._error is not None:
                    raise self._error
                return None
            return []

    def snapshot_state(self) -> Any:
        if not self._checkpointed():
            return None
        with self._lock:
            return (self._fn.snapshot_position(), list(self._pending))  # type: ignore[attr-defined]

    def restore_state(self, state: Any) -> None:
        if state is None or not self._checkpointed():
            return
        position, pending = state
        self._fn.restore_position(position)  # type: ignore[attr-defined]
        self._pending = list(pending)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None and not self._done:
            self._fn.cancel()
            self._thread.join(timeout=5.0)


class SourceFunctionSource(Source):
    """A :class:`SourceFunction` as a :class:`Source` (one reader; run at parallelism 1)."""

    default_name = "Custom Source"

    def __init__(self, source_func: SourceFunction, max_pending: int = 1000) -> None:
        if not callable(getattr(source_func, "run", None)):
            raise TypeError(f"add_source expects a SourceFunction (with run(ctx)), got "
                            f"{source_func!r}")
        self.source_func = source_func
        self.max_pending = max_pending

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED

    def create_reader(self, context: SourceReaderContext) -> SourceReader:
        return _SourceFunctionReader(self.source_func, self.max_pending)
