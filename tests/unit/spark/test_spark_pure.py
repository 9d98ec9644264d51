"""The Spark bridge's pure parts: settings from configuration, the Spark configuration
RayDP gets, Java detection, and the Arrow block source (positions, replay, split)."""

import os
import stat

import pyarrow as pa
import pytest

from flowray.common.types import Row
from flowray.spark.block_source import ArrowBlockSource, InMemoryBlockStore
from flowray.operators.sources import SourceReaderContext
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.spark.session import (
    JAVA_MODULE_OPENINGS,
    JavaNotFoundError,
    check_java,
    parse_java_version,
    spark_configs,
    spark_settings,
)


def test_spark_keys_pass_through_and_flowray_keys_are_checked():
    conf = Configuration({"spark.sql.shuffle.partitions": "4",
                          "spark.executor.extraJavaOptions": "-Dmine=1",
                          "flowray.spark.executors": 2, "flowray.spark.executor-cores": "1",
                          "flowray.spark.executor-memory": "512m"})
    settings = spark_settings(conf)
    assert (settings.executors, settings.executor_cores, settings.executor_memory) == \
        (2, 1, "512m")
    configs = spark_configs(settings, log_config_path="/x/log4j2.properties")
    assert configs["spark.sql.shuffle.partitions"] == "4"
    assert configs["spark.log4j.config.file.name"] == "/x/log4j2.properties"
    assert configs["spark.executorEnv.RAY_LOG_TO_DRIVER"] == "0"
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions",
                "spark.ray.raydp_app_master.extraJavaOptions"):
        for package in JAVA_MODULE_OPENINGS:
            assert f"--add-opens=java.base/{package}=ALL-UNNAMED" in configs[key]
    assert configs["spark.executor.extraJavaOptions"].endswith("-Dmine=1")  # theirs kept


@pytest.mark.parametrize("key,value,words", [
    ("flowray.spark.executors", 0, "must be positive"),
    ("flowray.spark.executor-memory", "lots", "512m"),
    ("flowray.spark.executorz", 1, "did you mean 'flowray.spark.executors'"),
])
def test_bad_spark_settings_name_the_key(key, value, words):
    with pytest.raises(ConfigurationError) as info:
        Configuration({key: value})
    assert key in str(info.value) and words in str(info.value)


def test_a_bare_spark_prefix_is_not_a_key():
    with pytest.raises(ConfigurationError):
        Configuration({"spark.": "x"})


@pytest.mark.parametrize("text,version", [
    ('openjdk version "17.0.12" 2024-07-16', 17), ('java version "1.8.0_402"', 8),
    ('openjdk version "21" 2023-09-19', 21), ("no version here", None)])
def test_java_versions(text, version):
    assert parse_java_version(text) == version


def _fake_java(folder, version_line):
    path = folder / "java"
    path.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_check_java_accepts_17_and_names_the_problem_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError, match="no Java found.*Java 17"):
        check_java()
    _fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15')
    with pytest.raises(JavaNotFoundError, match="is Java 11.*needs Java 17"):
        check_java()
    os.remove(tmp_path / "java")
    good = _fake_java(tmp_path, 'openjdk version "17.0.9" 2023-10-17')
    assert check_java() == str(good)


def _store():
    return InMemoryBlockStore([pa.table({"k": [f"k{b}-{i}" for i in range(5)],
                                         "v": list(range(5))}) for b in range(5)])


def test_blocks_are_split_over_subtasks_and_every_row_comes_once():
    source = ArrowBlockSource(_store())
    seen = []
    for index in range(3):
        reader = source.create_reader(SourceReaderContext(index, 3))
        while (batch := reader.poll_next(2)) is not None:
            seen.extend(batch)
    assert sorted(r.k for r in seen) == sorted(f"k{b}-{i}" for b in range(5) for i in range(5))
    assert all(isinstance(r, Row) and r.as_dict().keys() == {"k", "v"} for r in seen)


def test_a_restored_reader_resumes_at_the_exact_row_across_blocks():
    source = ArrowBlockSource(_store())
    full = source.create_reader(SourceReaderContext(0, 1))
    expected = []
    while (batch := full.poll_next(3)) is not None:
        expected.extend(batch)
    for cut in range(0, 25, 4):
        reader = source.create_reader(SourceReaderContext(0, 1))
        got = []
        while len(got) < cut:
            got.extend(reader.poll_next(min(3, cut - len(got))))
        resumed = source.create_reader(SourceReaderContext(0, 1))
        resumed.restore_state(reader.snapshot_state())
        while (batch := resumed.poll_next(3)) is not None:
            got.extend(batch)
        assert got == expected, cut


def test_blocks_with_other_columns_are_refused():
    with pytest.raises(ValueError, match="block 1 has columns"):
        InMemoryBlockStore([pa.table({"a": [1]}), pa.table({"b": [1]})])


class _T:
    def __init__(self, id_, name, *inputs):
        self.id, self.name, self.inputs = id_, name, list(inputs)


def test_the_program_splits_at_deferred_spark_sources():
    from flowray.spark.stage import split_program
    src = _T(1, "source")
    mapped = _T(2, "map", src)
    stage = _T(3, "Spark stage", mapped)
    after = _T(4, "from_spark")
    joined = _T(5, "map after", after)
    out = _T(6, "sink", joined)
    first, second = split_program([src, mapped, stage, after, joined, out], {4})
    assert [t.name for t in first] == ["source", "map", "Spark stage"]
    assert [t.name for t in second] == ["from_spark", "map after", "sink"]


def test_a_stream_crossing_the_spark_stage_is_an_error_naming_both_ends():
    from flowray.spark.stage import SparkStageError, split_program
    src = _T(1, "source")
    after = _T(2, "from_spark")
    union = _T(3, "union", after, src)
    with pytest.raises(SparkStageError, match="'union' reads 'source'"):
        split_program([src, after, union], {2})
