"""What a task that ended leaves behind (``StreamTask._release``, ``can_host_another``): a
cancelled or failed task closes the operators it had opened, as Flink calls ``close()``
then too, each once and whatever the others raise; its actor may host the next attempt
only if every close went through and the failure was not one of its process."""

from types import SimpleNamespace

import pytest

from flowray.runtime.messages import TaskState
from flowray.runtime.task.stream_task import StreamTask


class _Operator:
    def __init__(self, name, closed, error=None):
        self.name, self.closed, self.error = name, closed, error

    def close(self):
        self.closed.append(self.name)
        if self.error is not None:
            raise self.error


def _task(state, operators):
    """A task past its run, with ``operators`` opened (in that order) and nothing else."""
    task = StreamTask.__new__(StreamTask)   # the ending's bookkeeping only
    task.tdd = SimpleNamespace(display_name="map (1/1)")
    task.state = state
    task.operators = list(reversed(operators))   # the head first; opened last
    task._opened = list(operators)
    task._closed_cleanly = False
    task._fatal = False
    task._released = False
    task.unaligned_channels = None
    task.record_writers, task.readers, task._driver_channels = {}, {}, []
    task.gate = task.checkpointer = task.keyed_backend = None
    return task


@pytest.mark.parametrize("state", [TaskState.CANCELED, TaskState.FAILED])
def test_an_aborted_task_closes_its_opened_operators_head_first(state):
    closed = []
    task = _task(state, [_Operator("sink", closed), _Operator("map", closed)])
    task._release()
    assert closed == ["map", "sink"]
    assert task.can_host_another()
    task._release()   # released twice: nothing is closed twice
    assert closed == ["map", "sink"]


def test_a_close_that_raises_does_not_keep_the_others_open_but_the_actor_is_not_reused():
    closed = []
    task = _task(TaskState.CANCELED, [_Operator("sink", closed),
                                      _Operator("map", closed, RuntimeError("boom"))])
    task._release()
    assert closed == ["map", "sink"]
    assert not task.can_host_another()


def test_a_finished_task_closed_its_operators_in_its_run_and_not_again():
    closed = []
    task = _task(TaskState.RUNNING, [_Operator("sink", closed), _Operator("map", closed)])
    task.checkpointer = None
    task._close_operators()
    task.state = TaskState.FINISHED
    task._release()
    assert closed == ["map", "sink"]
    assert task.can_host_another()


def test_nothing_opened_nothing_closed():
    task = _task(TaskState.CANCELED, [])
    task._release()
    assert task.can_host_another()


def test_a_task_not_released_cannot_host_another():
    assert not _task(TaskState.CANCELED, []).can_host_another()


def _wrapped(cause):
    """``cause`` as an operator hands it on: raised from inside a user function."""
    try:
        try:
            raise cause
        except BaseException as e:
            raise RuntimeError("map (1/1) failed") from e
    except RuntimeError as wrapped:
        return wrapped


@pytest.mark.parametrize("error,reusable", [
    (ValueError("bad record"), True),
    (_wrapped(ValueError("bad record")), True),
    (MemoryError(), False),
    (_wrapped(MemoryError()), False),
    (SystemError("interpreter"), False),
    (KeyboardInterrupt(), False),
])
def test_a_failure_of_the_process_leaves_the_actor_unfit(monkeypatch, error, reusable):
    closed = []
    task = _task(TaskState.CREATED, [_Operator("map", closed)])
    task.tdd.subtask = "v1:0"
    task.tdd.restore_checkpoint_id = None
    task._restoring = False
    task._cancelled = SimpleNamespace(is_set=lambda: False)

    def setup():
        raise error
    monkeypatch.setattr(task, "_setup", setup)
    monkeypatch.setattr(task, "_final_metrics", dict)
    result = task.run()
    assert result.state is TaskState.FAILED
    assert closed == ["map"]
    assert task.can_host_another() is reusable
