"""PyFlink's environment and stream methods added for issue 15 (no Ray: the local executor
runs jobs in this process; sources without sleeps)."""

import logging
import zipfile

import pytest

from flowray.common import (
    ByteArraySchema,
    Configuration,
    Duration,
    ExecutionConfig,
    RestartStrategies,
    SimpleStringSchema,
    Types,
)
from flowray.common.compat import not_implemented
from flowray.datastream import (
    KeySelector,
    MapFunction,
    Partitioner,
    RuntimeExecutionMode,
    SourceFunction,
    StreamExecutionEnvironment,
)
from flowray.datastream.connectors import DeliveryGuarantee
from flowray.datastream.externalized_checkpoint_retention import (
    ExternalizedCheckpointRetention,
)
from flowray.operators.source_function import SourceFunctionSource
from flowray.operators.sources import SourceReaderContext
from flowray.runtime.execution.python_env import python_runtime_env
from flowray.runtime.graph.transformations import GraphError
from flowray.runtime.network.custom_partitioner import PartitionerError
from flowray.state.state_backend import EmbeddedRocksDBStateBackend


def local_env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("execution.target", "local"))


# -- ExecutionConfig --------------------------------------------------------------------
def test_get_config_maps_to_environment_settings():
    env = local_env()
    cfg = env.get_config()
    assert isinstance(cfg, ExecutionConfig) and env.get_config() is cfg
    cfg.set_parallelism(4).set_max_parallelism(64).set_auto_watermark_interval(25)
    assert (env.get_parallelism(), env.get_max_parallelism()) == (4, 64)
    assert env.get_configuration().get_string("pipeline.auto-watermark-interval") == "25 ms"
    assert cfg.get_auto_watermark_interval() == 25


def test_global_job_parameters_reach_runtime_context():
    from flowray.datastream import MapFunction

    class Read(MapFunction):
        def open(self, runtime_context):
            self.p = runtime_context.get_job_parameter("p", "missing")

        def map(self, value):
            return value, self.p

    env = local_env()
    env.get_config().set_global_job_parameters({"p": "42"})
    assert env.from_collection([1]).map(Read()).execute_and_collect(limit=1) == [(1, "42")]
    with pytest.raises(TypeError, match="dict"):
        env.get_config().set_global_job_parameters("p=1")


def test_jvm_switches_warn_once_and_unsupported_ones_raise(caplog):
    cfg = local_env().get_config()
    with caplog.at_level(logging.WARNING, logger="flowray"):
        cfg.enable_force_kryo()
        cfg.disable_force_kryo()
    assert sum("force_kryo" in r.getMessage() for r in caplog.records) <= 1
    assert cfg.is_force_kryo_enabled() is False
    with pytest.raises(NotImplementedError, match="set_latency_tracking_interval.*instead"):
        cfg.set_latency_tracking_interval(100)


# -- keyword names as PyFlink -----------------------------------------------------------
def test_keyword_calls_with_pyflink_parameter_names():
    env = local_env()
    env.set_runtime_mode(execution_mode=RuntimeExecutionMode.BATCH)
    assert env.get_configuration().get_string("execution.runtime-mode") == "BATCH"
    out = env.from_collection([1, 2]).execute_and_collect(job_execution_name="kw", limit=2)
    assert out == [1, 2]
    cc = env.get_checkpoint_config()
    cc.set_min_pause_between_checkpoints(min_pause_between_checkpoints=10)
    cc.set_max_concurrent_checkpoints(max_concurrent_checkpoints=1)
    assert cc.get_min_pause_between_checkpoints() == 10


# -- sources ----------------------------------------------------------------------------
class Numbers(SourceFunction):
    def __init__(self, n):
        self.n = n
        self.i = 0

    def run(self, ctx):
        while self.i < self.n:
            with ctx.get_checkpoint_lock():
                ctx.collect(self.i)
                self.i += 1

    def snapshot_position(self):
        return self.i

    def restore_position(self, position):
        self.i = position


def _drain(reader, limit=None):
    out = []
    while limit is None or len(out) < limit:
        batch = reader.poll_next(limit - len(out) if limit else 100)
        if batch is None:
            break
        out += batch
    return out


def test_add_source_runs_source_function():
    env = local_env()
    ds = env.add_source(Numbers(5), source_name="nums", type_info=Types.INT())
    assert ds.get_type() == Types.INT()
    assert sorted(ds.map(lambda x: x * 2).execute_and_collect()) == [0, 2, 4, 6, 8]


def test_source_function_snapshot_restores_exactly():
    source = SourceFunctionSource(Numbers(50), max_pending=5)
    reader = source.create_reader(SourceReaderContext(0, 1))
    first = _drain(reader, 7)
    state = reader.snapshot_state()  # position + collected but not yet emitted
    reader.close()
    restored = SourceFunctionSource(Numbers(50), max_pending=5).create_reader(
        SourceReaderContext(0, 1))
    restored.restore_state(state)
    assert first + _drain(restored) == list(range(50))


def test_source_function_failure_reaches_task():
    class Boom(SourceFunction):
        def run(self, ctx):
            ctx.collect(1)
            raise RuntimeError("broken source")

    reader = SourceFunctionSource(Boom()).create_reader(SourceReaderContext(0, 1))
    with pytest.raises(RuntimeError, match="broken source"):
        _drain(reader)
    with pytest.raises(TypeError, match="SourceFunction"):
        SourceFunctionSource(object())
    with pytest.raises(NotImplementedError, match="Java source functions.*instead"):
        SourceFunction("org.example.JavaSource")


def test_read_text_file(tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\n")
    env = local_env()
    ds = env.read_text_file(str(tmp_path / "a.txt"))
    assert ds.get_type() == Types.STRING()
    assert sorted(ds.execute_and_collect()) == ["x", "y"]


# -- stream methods ---------------------------------------------------------------------
class ByParity(Partitioner):
    def partition(self, key, num_partitions):
        return key % num_partitions


def test_partition_custom_routes_by_partitioner():
    from flowray.datastream import ProcessFunction

    class Tag(ProcessFunction):
        def open(self, runtime_context):
            self.sub = runtime_context.get_index_of_this_subtask()

        def process_element(self, value, ctx):
            yield self.sub, value

    env = local_env()
    out = (env.from_collection(list(range(6)))
           .partition_custom(ByParity(), lambda x: x)
           .process(Tag()).set_parallelism(2)
           .execute_and_collect())
    assert sorted(out) == [(0, 0), (0, 2), (0, 4), (1, 1), (1, 3), (1, 5)]


def test_partition_custom_accepts_function_and_keyselector_and_checks_result():
    class K(KeySelector):
        def get_key(self, value):
            return value

    env = local_env()
    out = env.from_collection([1, 2]).partition_custom(lambda k, n: 0, K()).map(
        lambda x: x).set_parallelism(2).execute_and_collect()
    assert sorted(out) == [1, 2]
    bad = env.from_collection([1]).partition_custom(lambda k, n: 7, lambda x: x).map(
        lambda x: x).set_parallelism(2)
    with pytest.raises(Exception) as info:
        bad.execute_and_collect(limit=1)
    assert "expected an int in [0, 2)" in str(info.value) or isinstance(info.value,
                                                                       PartitionerError)
    with pytest.raises(TypeError):
        env.from_collection([1]).partition_custom(object(), lambda x: x)
    with pytest.raises(GraphError, match="KeyedStream"):
        env.from_collection([1]).key_by(lambda x: x).partition_custom(ByParity(), lambda x: x)


def test_rescale_project_force_non_parallel_and_plan():
    env = local_env()
    ds = env.from_collection([(1, "a", 2.0)],
                             type_info=Types.TUPLE([Types.INT(), Types.STRING(), Types.DOUBLE()]))
    projected = ds.rescale().project(2, 0)
    assert projected.get_type() == Types.TUPLE([Types.DOUBLE(), Types.INT()])
    projected.force_non_parallel()
    assert projected._t.parallelism == 1 and projected._t.max_parallelism == 1
    assert "RESCALE" in env.get_execution_plan()
    assert projected.execute_and_collect(limit=1) == [(2.0, 1)]
    with pytest.raises(ValueError, match="field indexes"):
        ds.project()


class _Where(MapFunction):
    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return value if isinstance(value, tuple) else (value, self.index)


class _Arrived(MapFunction):
    def open(self, runtime_context):
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return value[0], value[1], self.index


@pytest.mark.parametrize("producers,consumers,channels", [
    (2, 4, {(0, 0), (0, 1), (1, 2), (1, 3)}),
    (4, 2, {(0, 0), (1, 0), (2, 1), (3, 1)}),
])
def test_rescale_feeds_each_consumer_from_its_share_of_producers(producers, consumers,
                                                                  channels):
    env = local_env()
    tagged = env.from_collection(list(range(400))).rebalance().map(_Where()) \
        .set_parallelism(producers)
    out = tagged.rescale().map(_Arrived()).set_parallelism(consumers)
    with out.execute_and_collect() as results:
        got = list(results)
    assert sorted(n for n, _, _ in got) == list(range(400))  # every record, once
    assert {(p, c) for _, p, c in got} == channels  # round robin within the share


def test_description_uid_hash_slot_sharing_group():
    env = local_env()
    m = env.from_collection([1]).map(lambda x: x)
    m.set_description("doubles").set_uid_hash("abc123").slot_sharing_group("g1")
    assert (m._t.description, m._t.uid, m._t.slot_sharing_group) == ("doubles", "abc123", "g1")
    sink = m.print().set_description("out").slot_sharing_group("g2")
    assert sink._ds._t.slot_sharing_group == "g2"
    with pytest.raises(TypeError, match="slot_sharing_group"):
        m.slot_sharing_group(3)
    with pytest.raises(GraphError):
        env.from_collection([1]).key_by(lambda x: x).set_uid_hash("x")
    assert m.get_execution_environment() is env
    assert m.get_execution_config() is env.get_config()
    assert m.set_buffer_timeout(5) is m and m._t.buffer_timeout_ms == 5
    with pytest.raises(ValueError, match="-1 .flush only when full."):
        m.set_buffer_timeout(-2)
    with pytest.raises(GraphError):
        env.from_collection([1]).key_by(lambda x: x).set_buffer_timeout(5)


def test_disable_operator_chaining_splits_tasks():
    env = local_env()
    env.from_collection([1]).map(lambda x: x).filter(bool).print()
    chained = env.get_execution_plan().count("\n")
    assert env.is_chaining_enabled()
    env.disable_operator_chaining()
    assert not env.is_chaining_enabled()
    assert env.get_execution_plan().count("\n") > chained


def test_environment_settings_getters():
    env = local_env()
    env.set_buffer_timeout(30)
    assert env.get_buffer_timeout() == 30
    env.set_default_savepoint_directory("/tmp/sp")
    assert env.get_default_savepoint_directory() == "/tmp/sp"
    env.set_state_backend(EmbeddedRocksDBStateBackend(True))
    backend = env.get_state_backend()
    assert isinstance(backend, EmbeddedRocksDBStateBackend)
    assert backend.is_incremental_checkpoints_enabled()
    assert not env.is_unaligned_checkpoints_enabled()
    assert env.get_checkpointing_consistency_mode() == env.get_checkpointing_mode()
    with pytest.raises(NotImplementedError, match="create_input.*instead"):
        env.create_input(None)


def test_jvm_only_methods_warn_once(caplog):
    env = local_env()
    with caplog.at_level(logging.WARNING, logger="flowray"):
        env.add_jars("file:///a.jar")
        env.add_jars("file:///b.jar")
        env.add_classpaths("file:///c")
    msgs = [r.getMessage() for r in caplog.records]
    assert sum("add_jars" in m for m in msgs) <= 1
    assert all("does nothing" in m for m in msgs)


# -- Python dependencies -> runtime_env ---------------------------------------------------
def test_python_dependencies_become_runtime_env(tmp_path):
    (tmp_path / "mod_a.py").write_text("X = 1\n")
    folder = tmp_path / "libs"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "mod_b.py").write_text("")
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("f.txt", "hello")
    req = tmp_path / "req.txt"
    req.write_text("# comment\nsix==1.16.0\n")
    env = local_env()
    env.add_python_file(str(tmp_path / "mod_a.py"))
    env.add_python_file(str(folder))
    env.add_python_archive(str(archive), "data")
    env.set_python_requirements(str(req), str(tmp_path))
    env.set_python_executable("/usr/bin/python3")
    renv = python_runtime_env(env.get_configuration().to_dict())
    assert renv["py_modules"] == [str(tmp_path / "mod_a.py"), str(folder / "mod_b.py"),
                                  str(folder / "pkg")]
    with zipfile.ZipFile(renv["working_dir"]) as z:
        assert z.read("data/f.txt") == b"hello"
    assert renv["pip"] == {"packages": ["six==1.16.0"],
                           "pip_install_options": ["--no-index", "--find-links", str(tmp_path)]}
    assert renv["py_executable"] == "/usr/bin/python3"
    with pytest.raises(FileNotFoundError):
        env.add_python_file(str(tmp_path / "nope.py"))
    with pytest.raises(ValueError, match="neither"):
        env.add_python_file(str(req))


# -- common / connectors names --------------------------------------------------------------
def test_schemas_and_small_names():
    s = SimpleStringSchema()
    assert s.deserialize(s.serialize("ü")) == "ü"
    with pytest.raises(TypeError):
        s.serialize(1)
    with pytest.raises(ValueError, match="charset"):
        SimpleStringSchema("no-such-charset")
    assert ByteArraySchema().deserialize(b"x") == b"x"
    assert DeliveryGuarantee.AT_LEAST_ONCE.name == "AT_LEAST_ONCE"
    from flowray.common import JobClient, JobExecutionResult, JobStatus  # noqa: F401
    from flowray.common.job_status import JobStatus as JS
    assert JS.SUSPENDED.is_terminal_state() and not JS.SUSPENDED.is_globally_terminal_state()
    assert RestartStrategies.fall_back_restart().to_dict() == {}


def test_checkpoint_config_retention_and_failures():
    cc = local_env().get_checkpoint_config()
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    assert cc.is_externalized_checkpoints_enabled()
    assert cc.get_externalized_checkpoint_retention() is \
        ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
    cc.set_fail_on_checkpointing_errors(True)
    assert cc.is_fail_on_checkpointing_errors()
    assert not cc.is_unaligned_checkpoints_enabled()
    cc.enable_unaligned_checkpoints()
    cc.set_aligned_checkpoint_timeout(Duration.of_millis(200))
    cc.set_force_unaligned_checkpoints(True)
    assert cc.is_unaligned_checkpoints_enabled() and cc.is_force_unaligned_checkpoints()
    assert cc.get_aligned_checkpoint_timeout().to_milliseconds() == 200
    assert cc.get_alignment_timeout().to_milliseconds() == 200
    cc.disable_unaligned_checkpoints()
    assert not cc.is_unaligned_checkpoints_enabled()


def test_configuration_additions():
    a = Configuration().set_string("pipeline.name", "x")
    d = {}
    a.add_all_to_dict(d)
    assert d == {"pipeline.name": "x"}
    assert Configuration.from_dict(d).get_string("pipeline.name") == "x"
    assert Configuration.parse_list_value("a;b") == ["a", "b"]
    with pytest.raises(NotImplementedError, match="set_bytearray"):
        a.set_bytearray("k", b"v")


def test_not_implemented_helper_message():
    stub = not_implemented("X.y", "use z()")
    with pytest.raises(NotImplementedError) as info:
        stub(1, k=2)
    assert str(info.value) == "X.y is not implemented in flowray; instead: use z()"


def test_local_executor_puts_python_files_on_import_path(tmp_path, monkeypatch, caplog):
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "flowray_local_shipped.py").write_text("VALUE = 7\n")
    env = local_env()
    env.add_python_file(str(tmp_path / "flowray_local_shipped.py"))
    env.set_python_executable("/usr/bin/python3")

    def read(x):
        import importlib

        return importlib.import_module("flowray_local_shipped").VALUE + x

    with caplog.at_level(logging.WARNING):
        assert env.from_collection([1]).map(read).execute_and_collect(limit=1) == [8]
    assert any("python.executable" in r.getMessage() for r in caplog.records)
    sys.modules.pop("flowray_local_shipped", None)


def _vertices_by_name(env):
    job = env._prepare("groups")
    return {v.name: v for v in job.job_graph.vertices.values()}


def test_slot_sharing_group_resources_become_ray_actor_options():
    from flowray.datastream import MemorySize, SlotSharingGroup

    heavy = (SlotSharingGroup.builder("heavy").set_cpu_cores(2)
             .set_managed_memory(MemorySize.of_mebi_bytes(64))
             .set_external_resource("gpu", 1).build())
    assert heavy.get_managed_memory().get_bytes() == 64 << 20 and heavy.has_resources()
    env = local_env()
    src = env.from_collection([1, 2]).name("src")
    scored = src.map(lambda x: x).name("score").slot_sharing_group(heavy)
    after = scored.map(lambda x: x).name("after")  # no group: its input's, "heavy"
    after.print()
    vertices = _vertices_by_name(env)
    # the source is in "default", so the map is not chained to it; "after" chains to it
    assert vertices["src"].resources == {}
    chain = next(v for name, v in vertices.items() if "score" in name)
    assert "after" in chain.name
    assert chain.resources == {"num_cpus": 2.0, "memory": 64 << 20, "num_gpus": 1.0}
    graph = env._prepare("groups").execution_graph()  # each subtask's actor asks for them
    tdds = {s: graph.deployment_descriptor(s, "job", b"", {}) for s in graph.subtasks()}
    assert {s.vertex_id: d.resources for s, d in tdds.items()} == {
        vertices["src"].id: {}, chain.id: chain.resources}


def test_register_slot_sharing_group_by_name_and_conflicts():
    from flowray.datastream import SlotSharingGroup

    env = local_env()
    env.register_slot_sharing_group(SlotSharingGroup.builder("io").set_cpu_cores(0.5).build())
    env.from_collection([1]).map(lambda x: x).name("lookup").slot_sharing_group("io").print()
    vertices = _vertices_by_name(env)
    assert next(v for n, v in vertices.items() if "lookup" in n).resources == {"num_cpus": 0.5}
    with pytest.raises(ValueError, match="declared twice with different resources"):
        env.register_slot_sharing_group(SlotSharingGroup.builder("io").set_cpu_cores(1).build())
    env.register_slot_sharing_group(SlotSharingGroup.builder("io").set_cpu_cores(0.5).build())
    with pytest.raises(TypeError, match="SlotSharingGroup"):
        env.register_slot_sharing_group("io")
    with pytest.raises(ValueError, match="name"):
        SlotSharingGroup(None)


def test_operators_of_different_groups_are_not_chained():
    env = local_env()
    a = env.from_collection([1]).name("a")
    b = a.map(lambda x: x).name("b").slot_sharing_group("one")
    c = b.map(lambda x: x).name("c").slot_sharing_group("two")
    c.map(lambda x: x).name("d").print()  # takes "two" from c: chained to it
    names = sorted(_vertices_by_name(env))
    assert [n for n in names if n.startswith("b")] == ["b"]
    assert any(n.startswith("c") and "d" in n for n in names)


def test_unplaceable_group_fails_naming_the_operator():
    from flowray.runtime.execution.task_resources import unplaceable_tasks

    nodes = [{"CPU": 2.0, "memory": 4e9}, {"CPU": 8.0, "memory": 1e9}]
    assert unplaceable_tasks({"ok": {"num_cpus": 8.0}}, nodes) == []
    (msg,) = unplaceable_tasks({"big": {"num_cpus": 8.0, "memory": 2e9}}, nodes)
    assert "'big'" in msg and "CPU=8" in msg and "largest has CPU=8, memory=4e+09" in msg
    (msg,) = unplaceable_tasks({"tpu": {"resources": {"TPU": 1}}}, nodes)
    assert "TPU=1" in msg and "TPU=0" in msg
