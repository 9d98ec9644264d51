"""Damaged checkpoints on a real local Ray: a restore that meets a deleted or corrupted
file falls back to the previous retained checkpoint and says so; with none left, or when
the job's sinks committed the damaged checkpoint's transactions, the job fails naming the
file; a restarted job master whose ``_metadata`` is unreadable fails the job rather than
start over. Checkpoints are taken on demand (``JobClient.trigger_checkpoint``) at points
the test chooses: the source holds at ``HOLD()`` markers, which the test waits for.
"""

import os
import pytest

from flowray import JobExecutionError, StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.datastream.functions import SinkFunction
from flowray.testing import (
    HOLD,
    FaultInjector,
    TestingSource,
    TransactionalTestingSink,
    wait_until,
)
from tests.support.storage import flip_middle_byte

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("ray_session")]

KEYS = 10
PART = 500  # records per part; the source holds after each part


def _items():
    first = [(f"k{i % KEYS}", 1) for i in range(PART)]
    second = [(f"k{i % KEYS}", 1) for i in range(PART, 2 * PART)]
    return first + [HOLD()] + second + [HOLD()]


def _holds():
    return [i for i, x in enumerate(_items()) if not isinstance(x, tuple)]


class _Upsert(SinkFunction):
    """An idempotent sink: one file per key holding its latest value (at-least-once
    delivery gives exactly-once results, as a key-value store would)."""

    def __init__(self, directory):
        self.directory = directory

    def invoke(self, value, context):
        key, total = value
        tmp = os.path.join(self.directory, f".{key}.{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(str(total))
        os.replace(tmp, os.path.join(self.directory, key))


def _latest(directory):
    out = {}
    for name in os.listdir(directory):
        if not name.startswith("."):
            with open(os.path.join(directory, name)) as f:
                out[name] = int(f.read())
    return out


def _submit(tmp_path, retained, transactional=False):
    env = StreamExecutionEnvironment.get_execution_environment()
    for key, value in {"execution.checkpointing.dir": str(tmp_path / "checkpoints"),
                       "execution.checkpointing.num-retained": str(retained),
                       "restart-strategy.type": "fixed-delay",
                       "restart-strategy.fixed-delay.attempts": "5",
                       "restart-strategy.fixed-delay.delay": "100 ms"}.items():
        env.get_configuration().set_string(key, value)
    env.enable_checkpointing(3_600_000)  # only the checkpoints the test triggers
    env.set_parallelism(2)
    source = TestingSource(_items(), ledger_dir=str(tmp_path / "ledger"))
    # one reader, so the source holds at each HOLD() as a whole
    sums = (env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
            .uid("records").set_parallelism(1).key_by(lambda r: r[0]).sum(1).uid("sum"))
    if transactional:
        sums.sink_to(TransactionalTestingSink(str(tmp_path / "out"))).uid("sink")
    else:
        os.makedirs(tmp_path / "out")
        sums.add_sink(_Upsert(str(tmp_path / "out"))).uid("sink")
    return env.execute_async("damaged"), source


def _hold_reached(source, which):
    wait_until(lambda: _holds()[which] in source.fired_markers(), 120,
               f"the source to reach HOLD() #{which}")


def _damage(checkpoint_dir, how):
    """Delete or flip a byte in every keyed-state file of a checkpoint; the paths."""
    damaged = []
    for name in sorted(os.listdir(checkpoint_dir)):
        path = os.path.join(checkpoint_dir, name)
        if ".keyed" not in name or not os.path.isfile(path):
            continue
        if how == "delete":
            os.remove(path)
        else:
            flip_middle_byte(path)
        damaged.append(path)
    assert damaged, f"no keyed state file in {checkpoint_dir}"
    return damaged


def _kill_a_sum_task(client):
    injector = FaultInjector(client)
    sums = sorted(set(injector.subtasks()) - set(injector.subtasks("Source")))
    assert sums, injector.client.task_names()
    injector.kill(sums[0])


@pytest.mark.parametrize("how", ["delete", "corrupt"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, how):
    client, source = _submit(tmp_path, retained=2)
    _hold_reached(source, 0)
    first = client.trigger_checkpoint(timeout_s=60)
    latest = client.trigger_checkpoint(timeout_s=60)
    damaged = _damage(latest, how)
    _kill_a_sum_task(client)
    # the restart restores the previous checkpoint and the source reads on
    _hold_reached(source, 1)
    wait_until(lambda: _latest(tmp_path / "out") == {f"k{k}": 2 * PART // KEYS
                                                   for k in range(KEYS)}, 120,
               "every key's sum over both parts")
    stats = client.get_checkpoint_stats()
    client.cancel()
    assert stats["latest_restore"]["checkpoint_id"] == int(first.rsplit("-", 1)[1])
    [fallback] = stats["fallbacks"]
    assert f"checkpoint {latest.rsplit('-', 1)[1]} cannot be restored" in fallback
    assert any(os.path.basename(p) in fallback for p in damaged), fallback
    assert not os.path.exists(latest)  # the damaged checkpoint is gone


@pytest.mark.parametrize("transactional", [False, True], ids=["no-older", "committed"])
def test_a_damaged_checkpoint_with_nothing_safe_to_fall_back_to_fails_naming_the_file(
        tmp_path, transactional):
    # no older checkpoint retained; or one is, but the sink committed the newer one
    client, source = _submit(tmp_path, retained=2 if transactional else 1,
                             transactional=transactional)
    _hold_reached(source, 0)
    client.trigger_checkpoint(timeout_s=60)
    latest = client.trigger_checkpoint(timeout_s=60)
    if transactional:
        sink = TransactionalTestingSink(str(tmp_path / "out"))
        wait_until(lambda: len(sink.committed()) == PART, 60, "the first part committed")
    damaged = _damage(latest, "corrupt")
    _kill_a_sum_task(client)
    with pytest.raises(JobExecutionError) as info:
        client.wait(120)
    message = str(info.value)
    assert info.value.cause_type == "CorruptedStateError"
    assert any(os.path.basename(p) in message for p in damaged), message
    assert ("would commit records twice" if transactional
            else "no older retained checkpoint") in message
    if transactional:  # what was committed stays, once
        assert sorted(sink.committed()) == sorted(
            (f"k{k}", n) for k in range(KEYS) for n in range(1, PART // KEYS + 1))


def test_a_restarted_job_master_that_cannot_read_the_metadata_fails_the_job(tmp_path):
    client, source = _submit(tmp_path, retained=1, transactional=True)
    _hold_reached(source, 0)
    latest = client.trigger_checkpoint(timeout_s=60)
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    wait_until(lambda: len(sink.committed()) == PART, 60, "the first part to be committed")
    with open(os.path.join(latest, "_metadata"), "wb") as f:
        f.write(b"not a checkpoint")
    FaultInjector(client).kill_job_master()  # Ray restarts it; it must not start over
    with pytest.raises(JobExecutionError) as info:
        client.wait(120)
    message = str(info.value)
    assert info.value.cause_type == "CheckpointRecoveryError", message
    assert "_metadata" in message and "instead of starting over" in message, message
    # nothing replayed: the running sums of the first part, each committed once
    assert sorted(sink.committed()) == sorted(
        (f"k{k}", n) for k in range(KEYS) for n in range(1, PART // KEYS + 1))
