"""PyFlink's remaining ``StreamExecutionEnvironment`` methods, mixed into it: ``get_config``,
``add_source``, ``read_text_file``, chaining, savepoint directory, and the Python
dependency methods, which ship code and packages to the workers through the job's Ray
``runtime_env`` (``python.*`` keys, see :mod:`flowray.runtime.execution.python_env`).

>>> from flowray.common import Configuration
>>> from flowray.datastream import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment(
...     Configuration().set_string("execution.target", "local"))
>>> env.disable_operator_chaining().is_chaining_enabled()
False
>>> env.set_default_savepoint_directory("/tmp/sp").get_default_savepoint_directory()
'/tmp/sp'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from flowray.common.compat import not_implemented, warn_once
from flowray.common.configuration import Configuration
from flowray.common.execution_config import ExecutionConfig
from flowray.common.options import buffer_timeout_ms
from flowray.common.pyflink_options import (
    OPERATOR_CHAINING,
)
from flowray.operators.source_function import SourceFunctionSource
from flowray.runtime.execution.python_env import (
    ship_python_archive,
    ship_python_file,
    ship_requirements,
    use_python_executable,
)
from flowray.runtime.graph.transformations import ChainingStrategy, Transformation
from flowray.state.state_backend import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)

if TYPE_CHECKING:
    from flowray.datastream.checkpointing_mode import CheckpointingMode
    from flowray.datastream.data_stream import DataStream
    from flowray.datastream.stream_execution_environment import StreamExecutionEnvironment

__all__ = ["EnvironmentApiMixin", "apply_chaining_setting"]

_SAVEPOINT_DIR = "execution.checkpointing.savepoint-dir"


def apply_chaining_setting(config: Configuration, transformations: Any) -> None:
    """With ``pipeline.operator-chaining.enabled=false`` no operator is chained."""
    if config.get(OPERATOR_CHAINING):
        return
    seen = set()
    stack = list(transformations)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t, Transformation) and not t.is_virtual:
            t.chaining = ChainingStrategy.NEVER
        stack.extend(getattr(t, "inputs", ()))


class EnvironmentApiMixin:
    """Methods of PyFlink's ``StreamExecutionEnvironment`` (see the module doc)."""

    _config: Configuration

    # -- settings --------------------------------------------------------------------
    def get_config(self) -> ExecutionConfig:
        """The environment's :class:`ExecutionConfig` (parallelism, watermark interval,
        global job parameters...)."""
        cfg = self.__dict__.get("_execution_config")
        if cfg is None:
            cfg = self.__dict__["_execution_config"] = ExecutionConfig(self)
        return cfg

    def disable_operator_chaining(self) -> Any:
        """Run every operator in a task of its own (``pipeline.operator-chaining.enabled``)."""
        self._config.set_string(OPERATOR_CHAINING.key, "false")
        return self

    def is_chaining_enabled(self) -> bool:
        return bool(self._config.get(OPERATOR_CHAINING))

    def is_chaining_of_operators_with_different_max_parallelism_enabled(self) -> bool:
        """Always ``False``: chained operators share their key groups."""
        return False

    def get_buffer_timeout(self) -> int:
        """The job's buffer timeout in milliseconds (``-1``: flush only when full)."""
        return buffer_timeout_ms(self._config)

    def get_state_backend(self) -> StateBackend:
        """The state backend the configuration selects (``state.backend.type``)."""
        values = self._config.to_dict()
        if str(values.get("state.backend.type", "hashmap")).lower() == "rocksdb":
            incremental = values.get("execution.checkpointing.incremental")
            return EmbeddedRocksDBStateBackend(
                None if incremental is None else str(incremental).lower() == "true",
                values.get("state.backend.rocksdb.localdir"))
        return HashMapStateBackend()

    def set_default_savepoint_directory(self, directory: str) -> Any:
        """Where savepoints go when none is named
        (``execution.checkpointing.savepoint-dir``)."""
        self._config.set_string(_SAVEPOINT_DIR, directory)
        return self

    def get_default_savepoint_directory(self) -> Optional[str]:
        return self._config.get_string(_SAVEPOINT_DIR)

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self.get_checkpoint_config().is_unaligned_checkpoints_enabled()

    def is_force_unaligned_checkpoints(self) -> bool:
        return self.get_checkpoint_config().is_force_unaligned_checkpoints()

    def get_checkpointing_consistency_mode(self) -> "CheckpointingMode":
        return self.get_checkpoint_config().get_checkpointing_mode()  # type: ignore

    # -- sources -----------------------------------------------------------------------
    def add_source(self, source_func: Any, source_name: str = "Custom Source",
                   type_info: Any = None) -> "DataStream":
        """A stream of what ``source_func.run(ctx)`` collects (a ``SourceFunction``),
        at parallelism 1. Checkpoint guarantee: see :mod:`flowray.operators.source_function`."""
        ds = self.from_source(SourceFunctionSource(source_func), None,  # type: ignore
                              source_name, type_info)
        ds._t.parallelism = 1
        return ds

    def read_text_file(self, file_path: str, charset_name: str = "UTF-8") -> "DataStream":
        """The lines of the file (or of the files in the folder) at ``file_path``, once."""
        from flowray.datastream.connectors.file_system import FileSource, StreamFormat

        source = FileSource.for_record_stream_format(
            StreamFormat.text_line_format(charset_name), file_path).build()
        from flowray.common.typeinfo import Types

        return self.from_source(source, None, f"Read Text File {file_path}",  # type: ignore
                                Types.STRING())

    # -- slot sharing groups ------------------------------------------------------------
    def register_slot_sharing_group(self, slot_sharing_group: Any
                                    ) -> "StreamExecutionEnvironment":
        """Declare a ``SlotSharingGroup``'s resources; operators given its name
        (``DataStream.slot_sharing_group(name)``) ask Ray for them, per task actor."""
        from flowray.datastream.slot_sharing_group import SlotSharingGroup

        if not isinstance(slot_sharing_group, SlotSharingGroup):
            raise TypeError(f"register_slot_sharing_group expects a SlotSharingGroup, got "
                            f"{slot_sharing_group!r}")
        groups = self._slot_sharing_groups  # type: ignore[attr-defined]
        name = slot_sharing_group.get_name()
        known = groups.get(name)
        if known is not None and known != slot_sharing_group:
            raise ValueError(f"slot sharing group {name!r} is declared twice with different "
                             f"resources: {known} and {slot_sharing_group}")
        groups[name] = slot_sharing_group
        return self  # type: ignore[return-value]

    # -- Python dependencies (shipped with the job's Ray runtime_env: python_env.py) ------
    def add_python_file(self, file_path: str) -> Any:
        """Ship a ``.py`` file, a package or folder, or a ``.whl`` to the workers and put
        it on their import path (folder: its contents become importable, as in Flink)."""
        ship_python_file(self._config, file_path)
        return self

    def add_python_archive(self, archive_path: str, target_dir: Optional[str] = None) -> Any:
        """Ship a zip archive, extracted into the workers' working directory (under
        ``target_dir`` if given, else under the archive's file name)."""
        ship_python_archive(self._config, archive_path, target_dir)
        return self

    def set_python_requirements(self, requirements_file_path: str,
                                requirements_cache_dir: Optional[str] = None) -> Any:
        """Install a requirements file on the workers (pip, in the job's runtime env);
        ``requirements_cache_dir``: a folder of packages to install from, offline (it must
        exist at the same path on every node)."""
        ship_requirements(self._config, requirements_file_path, requirements_cache_dir)
        return self

    def set_python_executable(self, python_exec: str) -> Any:
        """The Python interpreter the workers run (it must exist on every node)."""
        use_python_executable(self._config, python_exec)
        return self

    def add_jars(self, *jars_path: str) -> Any:
        """Accepted for PyFlink programs; flowray runs no JVM, so jars do nothing."""
        warn_once("add_jars", "flowray: add_jars does nothing here (no JVM): the jars are "
                              "not used")
        return self

    def add_classpaths(self, *classpaths: str) -> Any:
        """Accepted for PyFlink programs; flowray runs no JVM, so classpaths do nothing."""
        warn_once("add_classpaths", "flowray: add_classpaths does nothing here (no JVM): "
                                    "the classpaths are not used")
        return self

    # -- not implemented -------------------------------------------------------------
    create_input = not_implemented(
        "StreamExecutionEnvironment.create_input",
        "InputFormat is a Java API: write a flowray Source and use from_source(...)")
    register_cached_file = not_implemented(
        "StreamExecutionEnvironment.register_cached_file",
        "ship files with add_python_file/add_python_archive, or read them from storage "
        "every node reaches")
    enable_changelog_state_backend = not_implemented(
        "StreamExecutionEnvironment.enable_changelog_state_backend",
        "use EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)")
    is_changelog_state_backend_enabled = not_implemented(
        "StreamExecutionEnvironment.is_changelog_state_backend_enabled",
        "there is no changelog state backend; see get_state_backend()")
    set_default_local_parallelism = not_implemented(
        "StreamExecutionEnvironment.set_default_local_parallelism",
        "set_parallelism(...) applies to local and Ray runs alike")
    get_default_local_parallelism = not_implemented(
        "StreamExecutionEnvironment.get_default_local_parallelism", "get_parallelism()")
