"""Checkpoint settings through the API and Configuration, and the state pieces a task
snapshots: heap keyed state, source positions."""

import pytest

from flowray import Configuration
from flowray.common import RestartStrategies
from flowray.datastream import CheckpointingMode
from flowray.operators.base import (CollectingOutput, OperatorContext, ProcessingTimeService,
                                    StateInitializationContext, StateSnapshotContext)
from flowray.operators.sources import NumberSequenceSource, SourceOperator
from flowray.common.clock import ManualClock
from flowray.common.configuration import ConfigurationError
from flowray.runtime.jobmaster.restart_strategy import restart_strategy_from_config
from flowray.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group
from flowray.state.operator_state import OperatorStateStore
from tests.support.environments import local_env


def test_enable_checkpointing_writes_flink_keys():
    env = local_env()
    assert not env.get_checkpoint_config().is_checkpointing_enabled()
    env.enable_checkpointing(250, CheckpointingMode.AT_LEAST_ONCE)
    cc = env.get_checkpoint_config()
    (cc.set_checkpoint_timeout(30_000).set_min_pause_between_checkpoints(100)
       .set_max_concurrent_checkpoints(2).set_tolerable_checkpoint_failure_number(3)
       .set_num_retained_checkpoints(4).set_checkpoint_storage_dir("/tmp/x"))
    conf = env.get_configuration().to_dict()
    assert conf["execution.checkpointing.interval"] == "250 ms"
    assert conf["execution.checkpointing.mode"] == "AT_LEAST_ONCE"
    assert (cc.get_checkpoint_interval(), cc.get_checkpoint_timeout(),
            cc.get_min_pause_between_checkpoints(), cc.get_max_concurrent_checkpoints(),
            cc.get_tolerable_checkpoint_failure_number(), cc.get_num_retained_checkpoints(),
            cc.get_checkpoint_storage_path()) == (250, 30_000, 100, 2, 3, 4, "/tmp/x")
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE


def test_the_same_settings_through_configuration():
    env = local_env(**{"execution.checkpointing.interval": "2 s",
                       "execution.checkpointing.mode": "at-least-once",
                       "execution.checkpointing.timeout": "1 min"})
    cc = env.get_checkpoint_config()
    assert cc.get_checkpoint_interval() == 2_000
    assert cc.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert cc.get_checkpoint_timeout() == 60_000


@pytest.mark.parametrize("key, value, words", [
    ("execution.checkpointing.interval", "soon", ["execution.checkpointing.interval", "soon"]),
    ("execution.checkpointing.interval", "0 ms", ["must be positive"]),
    ("execution.checkpointing.mode", "MOSTLY_ONCE", ["EXACTLY_ONCE", "AT_LEAST_ONCE"]),
    ("execution.checkpointing.max-concurrent-checkpoints", "0", ["at least 1"]),
    ("execution.checkpointing.tolerable-failed-checkpoints", "-1", ["negative"]),
    ("execution.checkpointing.aligned-checkpoint-timeout", "soon", ["aligned-checkpoint-timeout", "not a duration"]),
    ("execution.checkpointing.num-retained", "0", ["execution.checkpointing.num-retained"]),
    ("restart-strategy.type", "sometimes", ["restart-strategy.type", "fixed-delay"]),
    ("restart-strategy.fixed-delay.delay", "10 parsecs", ["unknown time unit"]),
    ("execution.checkpointing.intervall", "1 s", ["did you mean"]),
])
def test_bad_settings_name_the_key_and_value(key, value, words):
    with pytest.raises(ConfigurationError) as info:
        Configuration({key: value})
    for w in words:
        assert w in str(info.value)


def test_restart_strategies_factory_sets_keys_and_replaces_the_previous_one():
    env = local_env(**{"restart-strategy.failure-rate.delay": "5 s"})
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 10_000))
    conf = env.get_configuration().to_dict()
    assert conf["restart-strategy.type"] == "fixed-delay"
    assert "restart-strategy.failure-rate.delay" not in conf
    strategy = restart_strategy_from_config(env.get_configuration(), True)
    assert strategy.describe().startswith("fixed-delay")
    env.set_restart_strategy(RestartStrategies.no_restart())
    assert restart_strategy_from_config(env.get_configuration(), True).name == "none"
    with pytest.raises(TypeError):
        env.set_restart_strategy({"restart-strategy.type": "none"})


# -- heap keyed state snapshots ----------------------------------------------------------

def _backend(rng=KeyGroupRange(0, 127)):
    return HeapKeyedStateBackend(rng, 128)


def test_heap_snapshot_is_isolated_from_later_changes_and_restores_exactly():
    b = _backend()
    value = b.get_partitioned_state(ValueStateDescriptor("v"))
    table = b.get_partitioned_state(MapStateDescriptor("m", None, None))
    for k in range(200):
        b.set_current_key(k)
        value.update(k)
        table.put("x", [k])
    writer = b.snapshot(1)
    b.set_current_key(5)
    value.update(-1)
    table.get("x").append("changed after the snapshot")
    files = {}
    handle = writer.write(lambda p, d: files.__setitem__(p, d) or len(d), "chk-1/keyed")
    assert handle.size == len(files["chk-1/keyed"])

    r = _backend()
    r.restore([handle], files.__getitem__)
    rv = r.get_partitioned_state(ValueStateDescriptor("v"))
    rm = r.get_partitioned_state(MapStateDescriptor("m", None, None))
    for k in range(200):
        r.set_current_key(k)
        assert rv.value() == k and rm.get("x") == [k]


def test_heap_restore_into_a_narrower_range_keeps_only_its_key_groups():
    b = _backend()
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for k in range(300):
        b.set_current_key(k)
        v.update(k)
    files = {}
    handle = b.snapshot(1).write(lambda p, d: files.__setitem__(p, d) or len(d), "f")
    half = KeyGroupRange(64, 127)
    r = _backend(half)
    r.restore([handle], files.__getitem__)
    keys = set(r.get_keys("v"))
    assert keys == {k for k in range(300) if assign_to_key_group(k, 128) in half}


def test_empty_heap_backend_writes_nothing():
    assert _backend().snapshot(1).write(lambda p, d: 1 / 0, "never") is None


# -- source positions --------------------------------------------------------------------

def _source_op(store, restored_id=None):
    op = SourceOperator(NumberSequenceSource(1, 10))
    ctx = OperatorContext("src", 0, 1, 128, KeyGroupRange(0, 127),
                          ProcessingTimeService(ManualClock()))
    out = CollectingOutput()
    op.setup(ctx, out)
    op.initialize_state(StateInitializationContext(store, None, restored_id))
    op.open()
    return op, out


def test_source_position_is_snapshotted_and_restored():
    store = OperatorStateStore()
    op, out = _source_op(store)
    op.emit_next(4)
    op.snapshot_state(StateSnapshotContext(1, 0))
    snapshot = store.snapshot()
    op.emit_next(4)  # after the checkpoint: replayed after a restore
    assert out.records == list(range(1, 9))

    restored, out2 = _source_op(OperatorStateStore.restore(snapshot), restored_id=1)
    while restored.emit_next(100) is not None:
        pass
    assert out2.records == list(range(5, 11))
