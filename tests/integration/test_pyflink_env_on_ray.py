"""PyFlink environment methods on Ray (issue 15): ``add_python_file`` ships a module to
the task actors through the job's runtime env; ``add_source`` runs a ``SourceFunction`` that restores its checkpointed position exactly
once after a failure."""

import os
import sys
import time
import uuid
from collections import Counter

from flowray import RestartStrategies, SourceFunction, StreamExecutionEnvironment
from flowray.testing import TransactionalTestingSink, wait_until


def test_add_python_file_module_importable_in_tasks(env, tmp_path):
    name = f"flowray_shipped_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("OFFSET = 1000\n")
    assert name not in sys.modules
    env.add_python_file(str(tmp_path / f"{name}.py"))
    env.set_parallelism(2)

    def shifted(x):
        import importlib

        return importlib.import_module(name).OFFSET + x  # only the shipped copy exists there

    out = env.from_collection([1, 2, 3]).map(shifted).execute_and_collect("shipped-module")
    assert sorted(out) == [1001, 1002, 1003]


class FailingNumbers(SourceFunction):
    """0..n-1 with its position checkpointed; halfway, once, it waits for ``go`` (the test
    writes it after a checkpoint completed) and raises."""

    def __init__(self, n, go, failed):
        super().__init__()
        self.n, self.go, self.failed = n, go, failed
        self.i = 0
        self.stopped = False

    def run(self, ctx):
        while self.i < self.n and not self.stopped:
            if self.i == self.n // 2 and not os.path.exists(self.failed):
                while not os.path.exists(self.go) and not self.stopped:
                    time.sleep(0.01)  # waits for the test's event, outside the lock
                open(self.failed, "w").close()
                raise RuntimeError("injected source failure")
            with ctx.get_checkpoint_lock():
                ctx.collect(self.i)
                self.i += 1

    def cancel(self):
        self.stopped = True

    def snapshot_position(self):
        return self.i

    def restore_position(self, position):
        self.i = position


def test_add_source_restores_its_position_exactly_once(ray_session, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_configuration().set_string("execution.checkpointing.dir", str(tmp_path / "chk"))
    env.enable_checkpointing(50)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    env.set_parallelism(2)
    n = 2000
    go, failed = str(tmp_path / "go"), str(tmp_path / "failed")
    sink = TransactionalTestingSink(str(tmp_path / "out"))
    (env.add_source(FailingNumbers(n, go, failed), "numbers")
        .map(lambda x: x * 2)
        .sink_to(sink))
    client = env.execute_async("add-source")

    def checkpointed():
        if client.get_job_status().is_globally_terminal_state():
            raise AssertionError("the job ended before the failure was injected")
        return client.get_checkpoint_stats().get("counts", {}).get("completed", 0) >= 1

    wait_until(checkpointed, 120, "a completed checkpoint")
    open(go, "w").close()
    result = client.wait(timeout_s=300)
    assert os.path.exists(failed) and result.outcome.restarts >= 1
    assert Counter(sink.committed()) == Counter(2 * i for i in range(n))


def test_slot_sharing_group_resources_reach_the_task_actors(env):
    from flowray.datastream import MemorySize, SlotSharingGroup

    # small enough to fit beside everything else of the test session on 2 cores
    group = (SlotSharingGroup.builder("enrich").set_cpu_cores(0.01)
             .set_task_heap_memory(MemorySize.of_mebi_bytes(1)).build())
    env.set_parallelism(2)

    def assigned(x):
        import ray

        r = ray.get_runtime_context().get_assigned_resources()
        return x, r.get("CPU", 0.0), r.get("memory", 0.0)

    numbers = env.from_collection(list(range(6)))
    plain = numbers.map(assigned).name("plain")
    grouped = numbers.map(assigned).name("grouped").slot_sharing_group(group)
    out = plain.union(grouped).execute_and_collect("slot-sharing-groups")
    by_value = Counter((cpu, mem) for _, cpu, mem in out)
    assert by_value == Counter({(0.0, 0.0): 6, (0.01, float(1 << 20)): 6})


def test_a_group_no_node_can_hold_fails_at_submission(env):
    import pytest

    from flowray.datastream import SlotSharingGroup

    group = SlotSharingGroup.builder("huge").set_cpu_cores(4096).build()
    env.from_collection([1]).map(lambda x: x).name("huge map").slot_sharing_group(group).print()
    with pytest.raises(ValueError, match="'huge map.* asks Ray for CPU=4096 per task actor"):
        env.execute("unplaceable")


def test_rescale_on_ray_connects_each_producer_to_its_share(env):
    from flowray.datastream import MapFunction

    class Where(MapFunction):
        def open(self, runtime_context):
            self.index = runtime_context.get_index_of_this_subtask()

        def map(self, value):
            return value, self.index

    class Arrived(MapFunction):
        def open(self, runtime_context):
            self.index = runtime_context.get_index_of_this_subtask()

        def map(self, value):
            return value[0], value[1], self.index

    tagged = env.from_collection(list(range(300))).rebalance().map(Where()).set_parallelism(2)
    out = list(tagged.rescale().map(Arrived()).set_parallelism(3)
               .execute_and_collect("rescale"))
    assert sorted(n for n, _, _ in out) == list(range(300))
    assert {(p, c) for _, p, c in out} == {(0, 0), (1, 1), (1, 2)}
