"""Flink 2's ``config.yaml``: the settings a program starts from, before ``-D`` and code.

The file is found as Flink finds it: ``$FLOWRAY_CONF_DIR/config.yaml`` (Flink's
``FLINK_CONF_DIR``), or the file given to ``flowray run --conf FILE``. Keys are written
nested, flat, or mixed, as in Flink 2::

    execution:
      checkpointing:
        interval: 10 s
        dir: file:///data/checkpoints
    state.backend.type: rocksdb
    parallelism.default: 4

A YAML list becomes a comma-separated value (``[a, b]`` -> ``a,b``); a mapping under a key
that is itself a setting (``pipeline.global-job-parameters: {k: v}``) becomes ``k:v`` pairs.
Every key and value is checked as ``Configuration.set_string`` checks it; an error names the
file, the line and the key. The precedence is code > ``-D`` > file.

>>> settings = parse_config_yaml('''
... execution:
...   checkpointing:
...     interval: 10 s
... parallelism.default: 4
... ''')
>>> [(s.key, s.value, s.line) for s in settings]
[('execution.checkpointing.interval', '10 s', 4), ('parallelism.default', '4', 5)]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

import yaml

from flowray.common.configuration import Configuration, ConfigurationError, all_options

__all__ = ["CONF_DIR_ENV", "CONFIG_FILE_NAME", "FileSetting", "parse_config_yaml",
           "load_config_file", "conf_dir_file", "layered"]

CONF_DIR_ENV = "FLOWRAY_CONF_DIR"
CONFIG_FILE_NAME = "config.yaml"

_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"


@dataclass(frozen=True)
class FileSetting:
    """One setting of a config file: its flat key, its value as text, its line (from 1)."""

    key: str
    value: str
    line: int


def _where(source: str, line: int) -> str:
    return f"{source}, line {line}"


def _scalar_text(node: yaml.ScalarNode, key: str, source: str) -> str:
    if node.tag == _NULL_TAG:
        raise ConfigurationError(
            f"{_where(source, node.start_mark.line + 1)}: {key!r} has no value")
    if node.tag == _BOOL_TAG:
        # YAML's true/yes/on and false/no/off, as Flink's YAML parser reads them
        return "true" if yaml.SafeLoader("").construct_scalar(node).lower() in (
            "true", "yes", "on", "y") else "false"
    return str(node.value)


def _flat_value(node: yaml.Node, key: str, source: str) -> str:
    """A leaf's value as the text ``Configuration.set_string`` takes."""
    if isinstance(node, yaml.ScalarNode):
        return _scalar_text(node, key, source)
    if isinstance(node, yaml.SequenceNode):
        return ",".join(_flat_value(item, key, source) for item in node.value)
    if isinstance(node, yaml.MappingNode):   # a map-typed setting: k:v pairs
        return ",".join(f"{_flat_value(k, key, source)}:{_flat_value(v, key, source)}"
                        for k, v in node.value)
    raise ConfigurationError(
        f"{_where(source, node.start_mark.line + 1)}: {key!r} has a value flowray cannot read")


def parse_config_yaml(text: str, source: str = CONFIG_FILE_NAME) -> List[FileSetting]:
    """The settings in ``text`` (a ``config.yaml``), flattened, in file order; keys are not
    checked here (see :func:`load_config_file`). ``source`` names the file in errors.

    >>> parse_config_yaml("a:\\n  b: 1\\na.b: 2\\n", "conf/config.yaml")
    Traceback (most recent call last):
    ...
    flowray.common.configuration.ConfigurationError: conf/config.yaml, line 3: 'a.b' is set twice (first on line 2)
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise ConfigurationError(
            f"{_where(source, line)}: not valid YAML: {e.problem or e.context}") from None
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode):
        raise ConfigurationError(
            f"{_where(source, root.start_mark.line + 1)}: expected key: value pairs at the top")
    options = all_options()
    out: List[FileSetting] = []
    first_line: Dict[str, int] = {}

    def walk(node: yaml.MappingNode, prefix: str) -> None:
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _NULL_TAG:
                raise ConfigurationError(f"{_where(source, line)}: a key must be text")
            key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            if isinstance(value_node, yaml.MappingNode) and key not in options:
                walk(value_node, key)
                continue
            if key in first_line:
                raise ConfigurationError(f"{_where(source, line)}: {key!r} is set twice "
                                         f"(first on line {first_line[key]})")
            first_line[key] = line
            out.append(FileSetting(key, _flat_value(value_node, key, source), line))

    walk(root, "")
    return out


def load_config_file(path: str) -> Configuration:
    """The configuration in the file at ``path``, every key and value checked; an error
    names the file, the line and the key."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigurationError(f"configuration file not found: {path}") from None
    except OSError as e:
        raise ConfigurationError(f"cannot read configuration file {path}: {e}") from None
    conf = Configuration()
    for setting in parse_config_yaml(text, path):
        try:
            conf.set_string(setting.key, setting.value)
        except ConfigurationError as e:
            raise ConfigurationError(f"{_where(path, setting.line)}: {e}") from None
    return conf


def conf_dir_file(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """``$FLOWRAY_CONF_DIR/config.yaml`` when ``FLOWRAY_CONF_DIR`` is set (an error if the
    folder or the file is missing, as Flink's), else ``None``."""
    conf_dir = environ.get(CONF_DIR_ENV)
    if not conf_dir:
        return None
    if not os.path.isdir(conf_dir):
        raise ConfigurationError(f"{CONF_DIR_ENV} is not a folder: {conf_dir}")
    path = os.path.join(conf_dir, CONFIG_FILE_NAME)
    if not os.path.isfile(path):
        raise ConfigurationError(f"{CONF_DIR_ENV} has no {CONFIG_FILE_NAME}: {path}")
    return path


def layered(*layers: "Configuration | Mapping[str, Any] | None") -> Configuration:
    """One configuration from ``layers``, lowest precedence first; a later layer's key wins
    even when an earlier layer set it under its deprecated name, or the other way round.

    >>> layered({"state.checkpoints.dir": "/file"},
    ...         {"execution.checkpointing.dir": "/cli"}).get_string("execution.checkpointing.dir")
    '/cli'
    """
    merged: Dict[str, Any] = {}
    for layer in layers:
        if layer is not None:
            merged.update((layer if isinstance(layer, Configuration)
                           else Configuration(layer)).to_dict())
    return Configuration(merged)
