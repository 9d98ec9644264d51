"""A subtask's side of a checkpoint (SubtaskCheckpointCoordinator), without a task or Ray:
operators snapshot in the calling thread, keyed state is written to checkpoint storage in
the worker thread, acknowledgements carry the state and the metrics, in checkpoint order;
an asynchronous failure declines the checkpoint."""

import threading

import pytest

from flowray.operators.base import StreamOperator
from flowray.runtime.checkpoint.storage import MemoryCheckpointStorage
from flowray.common.options import MEMORY_THRESHOLD
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.runtime.network.elements import CheckpointBarrier
from flowray.runtime.graph.execution_graph import SubtaskId
from flowray.runtime.task.subtask_checkpoints import (
    CheckpointResponder,
    SubtaskCheckpointCoordinator,
)
from flowray.state.descriptors import ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange
from flowray.state.operator_state import OperatorStateStore
from flowray.state.snapshot import KeyedStateHandle

SUBTASK = SubtaskId("v2", 0)
MAXP = 128


class Recording(CheckpointResponder):
    def __init__(self):
        self.acks, self.declines = [], []

    def acknowledge_checkpoint(self, subtask, checkpoint_id, snapshot, metrics):
        self.acks.append((subtask, checkpoint_id, snapshot, metrics,
                          threading.current_thread().name))

    def decline_checkpoint(self, subtask, checkpoint_id, reason, message):
        self.declines.append((subtask, checkpoint_id, reason, message))


class Counter(StreamOperator):
    """Keeps a count in its operator list state; notes the thread of each snapshot."""

    def __init__(self, store):
        super().__init__("counter")
        self.state = store.get_list_state("count")
        self.count = 0
        self.snapshot_threads = []

    def snapshot_state(self, context):
        self.snapshot_threads.append((context.checkpoint_id, threading.current_thread().name))
        self.state.update([self.count])


def _coordinator(storage_factory, with_keyed=True):
    store = OperatorStateStore()
    op = Counter(store)
    keyed = HeapKeyedStateBackend(KeyGroupRange(0, MAXP - 1), MAXP) if with_keyed else None
    responder = Recording()
    coordinator = SubtaskCheckpointCoordinator(
        SUBTASK, [op], {"counter-uid": store}, keyed, "counter-uid" if with_keyed else None,
        storage_factory, responder)
    return coordinator, op, keyed, responder


def test_sync_part_in_the_caller_async_part_in_the_worker_acks_in_order():
    storage = MemoryCheckpointStorage("job-1")
    coordinator, op, keyed, responder = _coordinator(lambda: storage)
    total = keyed.get_partitioned_state(ValueStateDescriptor("total"))
    for cid, key in [(1, "a"), (2, "b"), (3, "c")]:
        keyed.set_current_key(key)
        total.update(cid * 10)
        op.count = cid
        coordinator.checkpoint(CheckpointBarrier(cid, 1000 + cid), alignment_ms=cid / 2,
                               input_ended=cid == 3)
    coordinator.close()

    caller = threading.current_thread().name
    assert op.snapshot_threads == [(1, caller), (2, caller), (3, caller)]
    assert [a[1] for a in responder.acks] == [1, 2, 3] and responder.declines == []
    assert coordinator.last_checkpoint_id == 3
    # each operator's state size (its stateSize metric): the latest snapshot's, keyed
    # state included
    last = responder.acks[-1][2].operators["counter-uid"]
    assert coordinator.operator_state_sizes == {"counter-uid": last.size()}
    assert last.size() > 0 and last.keyed is not None
    for subtask, cid, snapshot, metrics, thread in responder.acks:
        assert subtask == SUBTASK and thread.startswith("flowray-async-")
        assert set(metrics) == {"sync_ms", "async_ms", "alignment_ms", "bytes"}
        assert metrics["alignment_ms"] == cid / 2 and metrics["bytes"] == snapshot.state_size()
        assert snapshot.input_ended == (cid == 3) and not snapshot.finished
        state = snapshot.operators["counter-uid"]
        assert state.operator_state["count"].items          # the operator list state
        handle = state.keyed
        assert isinstance(handle, KeyedStateHandle)
        # written in the async part, to this checkpoint's path in storage
        assert storage.read_file(storage.task_state_path(cid, SUBTASK, "keyed"))
    restored = HeapKeyedStateBackend(KeyGroupRange(0, MAXP - 1), MAXP)
    restored.restore([responder.acks[1][2].operators["counter-uid"].keyed], storage.read_file)
    value = restored.get_partitioned_state(ValueStateDescriptor("total"))
    restored.set_current_key("a")
    assert value.value() == 10
    restored.set_current_key("b")
    assert value.value() == 20
    restored.set_current_key("c")
    assert value.value() is None                            # written after checkpoint 2


def test_without_keyed_state_nothing_is_written_to_storage():
    def no_storage():
        raise AssertionError("storage opened without keyed state")

    coordinator, op, _, responder = _coordinator(no_storage, with_keyed=False)
    coordinator.checkpoint(CheckpointBarrier(7, 0), alignment_ms=0.0, input_ended=False)
    coordinator.close()
    (_, cid, snapshot, metrics, _), = responder.acks
    assert cid == 7 and snapshot.operators["counter-uid"].keyed is None


def test_an_async_failure_declines_the_checkpoint_and_later_ones_go_on():
    class Flaky(MemoryCheckpointStorage):
        fail_next = True

        def write_file(self, path, data):
            if Flaky.fail_next:
                Flaky.fail_next = False
                raise OSError("disk full")
            return super().write_file(path, data)

    storage = Flaky("job-1")
    coordinator, _, keyed, responder = _coordinator(lambda: storage)
    keyed.set_current_key("k")
    keyed.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    coordinator.checkpoint(CheckpointBarrier(1, 0), alignment_ms=0.0, input_ended=False)
    coordinator.checkpoint(CheckpointBarrier(2, 0), alignment_ms=0.0, input_ended=False)
    coordinator.close()
    assert responder.declines == [(SUBTASK, 1, "ASYNC_FAILURE", "OSError: disk full")]
    assert [a[1] for a in responder.acks] == [2]


def test_decline_is_passed_on_and_advances_the_last_checkpoint_id():
    coordinator, _, _, responder = _coordinator(lambda: None, with_keyed=False)
    coordinator.decline(4, "CHECKPOINT_DECLINED_SUBSUMED", "newer barrier")
    assert responder.declines == [(SUBTASK, 4, "CHECKPOINT_DECLINED_SUBSUMED", "newer barrier")]
    assert coordinator.last_checkpoint_id == 4


def test_operator_state_above_the_memory_threshold_goes_to_a_file():
    storage = MemoryCheckpointStorage("job-1")
    store_big, store_small = OperatorStateStore(), OperatorStateStore()
    store_big.get_list_state("items").update(list(range(500)))
    store_small.get_list_state("offset").update([42])
    responder = Recording()
    coordinator = SubtaskCheckpointCoordinator(
        SUBTASK, [], {"big": store_big, "small": store_small}, None, None,
        lambda: storage, responder, memory_threshold=256)
    coordinator.checkpoint(CheckpointBarrier(3, 0), alignment_ms=0.0, input_ended=False)
    coordinator.close()
    (_, _, snapshot, metrics, _), = responder.acks
    big, small = snapshot.operators["big"], snapshot.operators["small"]
    assert big.operator_state == {} and big.operator_state_file is not None
    assert big.operator_state_file.path == storage.task_state_path(3, SUBTASK, "op0")
    assert small.operator_state_file is None and small.operator_state    # stays inline
    assert metrics["bytes"] == snapshot.state_size() > big.operator_state_file.size
    restored = OperatorStateStore.restore(big.load_operator_state(storage.read_file))
    assert list(restored.get_list_state("items").get()) == list(range(500))
    assert small.load_operator_state(storage.read_file) == small.operator_state


def test_memory_threshold_config_bounds():
    assert Configuration({}).get(MEMORY_THRESHOLD) == 20 * 1024
    assert Configuration({"state.storage.fs.memory-threshold": "1 mb"}).get(
        MEMORY_THRESHOLD) == 1 << 20
    with pytest.raises(ConfigurationError, match="memory-threshold.*between 0 and 1 mb"):
        Configuration({"state.storage.fs.memory-threshold": "2 mb"}).get(MEMORY_THRESHOLD)
