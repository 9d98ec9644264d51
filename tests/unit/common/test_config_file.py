"""Flink 2's config.yaml: nested, flat and mixed keys, lists and maps, errors that name the
file, the line and the key, FLOWRAY_CONF_DIR, and the precedence code > -D > file."""

import logging

import pytest

from flowray import StreamExecutionEnvironment
from flowray.common.config_file import (
    conf_dir_file,
    layered,
    load_config_file,
    parse_config_yaml,
)
from flowray.common.configuration import Configuration, ConfigurationError
from flowray.datastream.stream_execution_environment import CLIENT_CONFIG_ENV

NESTED = """\
# Flink 2's config.yaml
execution:
  checkpointing:
    interval: 10 s
    dir: file:///data/checkpoints
    unaligned.enabled: true
state.backend.type: rocksdb
parallelism:
  default: 4
pipeline.global-job-parameters:
  region: eu
  tier: gold
python.files: [a.py, b.py]
restart-strategy:
  type: fixed-delay
  fixed-delay.attempts: 3
"""


def test_nested_flat_and_mixed_keys_become_flat_settings():
    settings = {s.key: (s.value, s.line) for s in parse_config_yaml(NESTED)}
    assert settings == {
        "execution.checkpointing.interval": ("10 s", 4),
        "execution.checkpointing.dir": ("file:///data/checkpoints", 5),
        "execution.checkpointing.unaligned.enabled": ("true", 6),
        "state.backend.type": ("rocksdb", 7),
        "parallelism.default": ("4", 9),
        "pipeline.global-job-parameters": ("region:eu,tier:gold", 10),
        "python.files": ("a.py,b.py", 13),
        "restart-strategy.type": ("fixed-delay", 15),
        "restart-strategy.fixed-delay.attempts": ("3", 16),
    }


def test_a_loaded_file_is_checked_and_typed(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(NESTED)
    conf = load_config_file(str(path))
    assert conf.get_integer("parallelism.default") == 4
    assert conf.get_string("execution.checkpointing.dir") == "file:///data/checkpoints"
    assert conf.get_boolean("execution.checkpointing.unaligned.enabled") is True


def test_yaml_booleans_are_flinks_booleans():
    assert [s.value for s in parse_config_yaml("a: yes\nb: Off\nc: 'yes'\n")] == \
        ["true", "false", "yes"]


@pytest.mark.parametrize("text, line, words", [
    ("parallelism.default: 2\nno.such.key: 1\n", 2, "unknown configuration key 'no.such.key'"),
    ("execution:\n  checkpointing:\n    interval: soon\n", 3,
     "invalid value 'soon' for configuration key 'execution.checkpointing.interval'"),
    ("parallelism.default:\n", 1, "'parallelism.default' has no value"),
    ("parallelism:\n  default: 2\nparallelism.default: 3\n", 3,
     "'parallelism.default' is set twice (first on line 2)"),
    ("a: [1, 2\nb: 3\n", 2, "not valid YAML"),
    ("- parallelism.default\n", 1, "expected key: value pairs at the top"),
])
def test_a_bad_file_names_the_file_the_line_and_the_problem(tmp_path, text, line, words):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as e:
        load_config_file(str(path))
    assert str(e.value).startswith(f"{path}, line {line}: "), str(e.value)
    assert words in str(e.value)


def test_a_missing_file_or_conf_dir_is_named(tmp_path):
    with pytest.raises(ConfigurationError, match="configuration file not found: .*nope.yaml"):
        load_config_file(str(tmp_path / "nope.yaml"))
    assert conf_dir_file({}) is None
    with pytest.raises(ConfigurationError, match="FLOWRAY_CONF_DIR is not a folder"):
        conf_dir_file({"FLOWRAY_CONF_DIR": str(tmp_path / "missing")})
    with pytest.raises(ConfigurationError, match="FLOWRAY_CONF_DIR has no config.yaml"):
        conf_dir_file({"FLOWRAY_CONF_DIR": str(tmp_path)})
    (tmp_path / "config.yaml").write_text("parallelism.default: 2\n")
    assert conf_dir_file({"FLOWRAY_CONF_DIR": str(tmp_path)}) == str(tmp_path / "config.yaml")


def test_a_later_layer_wins_whatever_name_either_used(caplog):
    with caplog.at_level(logging.WARNING):
        new_over_old = layered({"state.checkpoints.dir": "/file"},
                               {"execution.checkpointing.dir": "/cli"})
        old_over_new = layered({"execution.checkpointing.dir": "/file"},
                               {"state.checkpoints.dir": "/cli"})
    assert new_over_old.get_string("execution.checkpointing.dir") == "/cli"
    assert old_over_new.get_string("execution.checkpointing.dir") == "/cli"


def test_the_environment_starts_from_conf_dir_and_code_wins(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text(
        "parallelism:\n  default: 3\npipeline:\n  name: from-file\n")
    monkeypatch.setenv("FLOWRAY_CONF_DIR", str(tmp_path))
    monkeypatch.delenv(CLIENT_CONFIG_ENV, raising=False)
    env = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("pipeline.name", "from-code"))
    assert env.get_parallelism() == 3
    assert env.get_configuration().get_string("pipeline.name") == "from-code"


def test_under_the_cli_the_file_is_already_in_the_clients_settings(tmp_path, monkeypatch):
    (tmp_path / "config.yaml").write_text("parallelism.default: 3\n")
    monkeypatch.setenv("FLOWRAY_CONF_DIR", str(tmp_path))
    monkeypatch.setenv(CLIENT_CONFIG_ENV, '{"parallelism.default": "5"}')
    assert StreamExecutionEnvironment.get_execution_environment().get_parallelism() == 5
