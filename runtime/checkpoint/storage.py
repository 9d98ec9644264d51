"""Where checkpoints rest: ``<root>/<job_id>/chk-<n>/`` holding task state files and the
``_metadata`` file that makes the checkpoint complete.

A checkpoint exists once its ``_metadata`` file exists: the coordinator writes it last,
atomically (to ``_metadata.inprogress-<random>``, then renamed), so a crash mid-write
leaves a directory that is not listed as completed. ``_metadata`` is the
:class:`~flowray.runtime.checkpoint.coordinator.CompletedCheckpoint` pickled with
cloudpickle behind a versioned header, so a foreign or damaged file gives an error naming
its path.

Two implementations share the contract: :class:`FsCheckpointStorage` over ``pyarrow.fs``
(local paths, ``file://``, ``s3://``, ``gs://``, ``hdfs://``) and
:class:`MemoryCheckpointStorage` (a dict, for unit tests; instances built on the same dict
see the same files).

>>> from flowray.runtime.graph.execution_graph import SubtaskId
>>> s = MemoryCheckpointStorage("job-1")
>>> s.checkpoint_dir(7)
'memory://job-1/chk-7'
>>> p = s.task_state_path(7, SubtaskId("map", 0), "keyed")
>>> p
'memory://job-1/chk-7/map-0.keyed'
>>> s.write_file(p, b"abc"), s.read_file(p)
(3, b'abc')
>>> s.list_completed()
[]
>>> s.discard_checkpoint(7); s.discard_checkpoint(7)
"""

from __future__ import annotations

from flowray.common.constants import DEFAULT_CHECKPOINTS_DIR
from flowray.common.files import safe_file_name

import abc
import dataclasses
import os
import re
import struct
import threading
import uuid
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Union

import cloudpickle

from flowray.state.snapshot_paths import resolve_relative_paths

if TYPE_CHECKING:  # pragma: no cover
    from flowray.runtime.checkpoint.completed import CompletedCheckpoint
    from flowray.common.configuration import Configuration
    from flowray.runtime.graph.execution_graph import SubtaskId

__all__ = [
    "METADATA_FILE",
    "SHARED_DIR",
    "JOB_FILE",
    "LATEST_COMPLETED_FILE",
    "RESERVED_IDS_FILE",
    "METADATA_MAGIC",
    "METADATA_VERSION",
    "InvalidCheckpointMetadataError",
    "CheckpointStorage",
    "FsCheckpointStorage",
    "MemoryCheckpointStorage",
    "checkpoint_storage_from_config",
    "encode_metadata",
    "decode_metadata",
    "load_checkpoint",
    "file_reader",
    "filesystem_path",
    "RetainedCheckpoint",
    "find_retained_checkpoints",
]

METADATA_FILE = "_metadata"
SHARED_DIR = "shared"
JOB_FILE = "job"
LATEST_COMPLETED_FILE = "latest-completed"
#: checkpoint ids handed out up to (not including) this one: a restarted job master starts
#: past it (Flink's CheckpointIDCounter), so no id of its predecessor is used again
RESERVED_IDS_FILE = "checkpoint-ids"
METADATA_MAGIC = b"FLOWRAY-CHK\x00"
METADATA_VERSION = 1
_HEADER = struct.Struct(">H")  # version, after the magic bytes
_CHK_DIR = re.compile(r"^chk-(\d+)$")


class InvalidCheckpointMetadataError(ValueError):
    """A ``_metadata`` file that is not (or no longer) a readable flowray checkpoint."""


def encode_metadata(checkpoint: "CompletedCheckpoint") -> bytes:
    """Magic bytes, a 2-byte version, then the cloudpickled checkpoint."""
    return METADATA_MAGIC + _HEADER.pack(METADATA_VERSION) + cloudpickle.dumps(checkpoint)


def decode_metadata(data: bytes, path: str) -> "CompletedCheckpoint":
    """Inverse of :func:`encode_metadata`; errors name ``path``.

    >>> decode_metadata(b"garbage", "/x/_metadata")
    Traceback (most recent call last):
    ...
    flowray.runtime.checkpoint.storage.InvalidCheckpointMetadataError: not a flowray checkpoint metadata file: /x/_metadata (bad magic bytes)
    """
    n = len(METADATA_MAGIC)
    if len(data) < n + _HEADER.size or data[:n] != METADATA_MAGIC:
        raise InvalidCheckpointMetadataError(
            f"not a flowray checkpoint metadata file: {path} (bad magic bytes)")
    (version,) = _HEADER.unpack_from(data, n)
    if version != METADATA_VERSION:
        raise InvalidCheckpointMetadataError(
            f"unsupported checkpoint metadata version {version} in {path} "
            f"(this flowray reads version {METADATA_VERSION})")
    try:
        return cloudpickle.loads(data[n + _HEADER.size:])
    except Exception as e:  # any unpickling failure means a bad file
        raise InvalidCheckpointMetadataError(
            f"corrupt checkpoint metadata file: {path} ({type(e).__name__}: {e})") from e


class CheckpointStorage(abc.ABC):
    """Checkpoint files of one job under ``<root>/<job_id>``.

    Paths returned here (:meth:`checkpoint_dir`, :meth:`task_state_path`,
    :meth:`write_metadata`) are the storage's own and are what :meth:`write_file` and
    :meth:`read_file` take; any instance over the same root resolves them alike.
    Implementations provide the file primitives; layout and metadata format live here.
    """

    job_id: str
    job_root: str

    # -- layout ----------------------------------------------------------------------------
    def checkpoint_dir(self, checkpoint_id: int) -> str:
        return f"{self.job_root}/chk-{int(checkpoint_id)}"

    @property
    def shared_dir(self) -> str:
        """``<job root>/shared``: files that several incremental checkpoints reference
        (deleted by the job master's shared state registry, not with a ``chk-<n>``)."""
        return f"{self.job_root}/{SHARED_DIR}"

    @property
    def job_file_path(self) -> str:
        """``<job root>/job``: the pickled job, read by a restarted job master."""
        return f"{self.job_root}/{JOB_FILE}"

    def metadata_path(self, checkpoint_id: int) -> str:
        return f"{self.checkpoint_dir(checkpoint_id)}/{METADATA_FILE}"

    def task_state_path(self, checkpoint_id: int, subtask: "SubtaskId", suffix: str) -> str:
        """``chk-<n>/<vertex>-<index>.<suffix>``, safe for any vertex id."""
        return (f"{self.checkpoint_dir(checkpoint_id)}/"
                f"{safe_file_name(subtask.vertex_id, allow_empty=True)}-{int(subtask.index)}.{safe_file_name(suffix, allow_empty=True)}")

    # -- files (implementations) ------------------------------------------------------------
    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> int:
        """Write ``data`` to ``path`` (creating parent directories); bytes written."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """The bytes at ``path``; :class:`FileNotFoundError` naming it if missing."""

    @abc.abstractmethod
    def _rename(self, src: str, dst: str) -> None:
        """Move ``src`` to ``dst`` (replacing ``dst``)."""

    @abc.abstractmethod
    def _delete_file(self, path: str) -> None:
        """Delete one file; missing is fine."""

    @abc.abstractmethod
    def _delete_tree(self, path: str) -> None:
        """Delete a directory and everything in it; missing is fine."""

    @abc.abstractmethod
    def _child_dirs(self, path: str) -> List[str]:
        """Names of the directories directly under ``path`` ([] if it does not exist)."""

    @abc.abstractmethod
    def _is_file(self, path: str) -> bool: ...

    @abc.abstractmethod
    def _files_in(self, path: str) -> List[str]:
        """Paths of the files directly under ``path`` ([] if it does not exist)."""

    def _resolve_metadata_path(self, checkpoint_dir: str) -> str:
        p = checkpoint_dir.rstrip("/")
        return p if p.rsplit("/", 1)[-1] == METADATA_FILE else f"{p}/{METADATA_FILE}"

    # -- the contract ------------------------------------------------------------------------
    def write_metadata(self, checkpoint: "CompletedCheckpoint") -> str:
        """Write ``_metadata`` of ``checkpoint`` atomically; returns its path (also set as
        ``checkpoint.external_path``)."""
        final = self.metadata_path(checkpoint.checkpoint_id)
        checkpoint.external_path = final
        data = encode_metadata(checkpoint)
        tmp = f"{final}.inprogress-{uuid.uuid4().hex}"
        self.write_file(tmp, data)
        try:
            self._rename(tmp, final)
        except BaseException:
            try:
                self._delete_file(tmp)
            except Exception:  # noqa: BLE001 - the original error matters more
                pass
            raise
        return final

    def read_metadata(self, checkpoint_dir: str) -> "CompletedCheckpoint":
        """The checkpoint in ``checkpoint_dir`` (a ``chk-<n>`` directory or its
        ``_metadata`` file)."""
        path = self._resolve_metadata_path(checkpoint_dir)
        checkpoint = decode_metadata(self.read_file(path), path)
        checkpoint.external_path = path
        return checkpoint

    def discard_checkpoint(self, checkpoint_id: int) -> None:
        """Delete ``chk-<n>`` and everything in it; a missing directory is fine."""
        self._delete_tree(self.checkpoint_dir(checkpoint_id))

    def delete_file(self, path: str) -> None:
        """Delete one file (e.g. a shared file no checkpoint references); missing is fine."""
        self._delete_file(path)

    def list_shared_files(self) -> List[str]:
        """Paths of every file in :attr:`shared_dir`."""
        return self._files_in(self.shared_dir)

    def list_incomplete(self) -> List[int]:
        """Ids of ``chk-<n>`` directories without ``_metadata`` (checkpoints that never
        completed, e.g. when the job master died), ascending."""
        ids = []
        for name in self._child_dirs(self.job_root):
            m = _CHK_DIR.match(name)
            if m and not self._is_file(f"{self.job_root}/{name}/{METADATA_FILE}"):
                ids.append(int(m.group(1)))
        return sorted(ids)

    def list_completed(self) -> List[int]:
        """Ids of the checkpoints whose ``_metadata`` exists, ascending."""
        ids = []
        for name in self._child_dirs(self.job_root):
            m = _CHK_DIR.match(name)
            if m and self._is_file(f"{self.job_root}/{name}/{METADATA_FILE}"):
                ids.append(int(m.group(1)))
        return sorted(ids)

    def discard_job(self) -> None:
        """Delete ``<root>/<job_id>`` entirely."""
        self._delete_tree(self.job_root)

    def record_latest_completed(self, checkpoint_id: int) -> None:
        """Note the newest completed checkpoint (a restarted job master then knows one
        completed even if its ``_metadata`` is gone)."""
        self.write_file(f"{self.job_root}/{LATEST_COMPLETED_FILE}",
                        str(int(checkpoint_id)).encode())

    def record_reserved_ids(self, up_to: int) -> None:
        """Note that checkpoint ids below ``up_to`` may have been handed out."""
        self.write_file(f"{self.job_root}/{RESERVED_IDS_FILE}", str(int(up_to)).encode())

    def reserved_ids_record(self) -> Optional[int]:
        """What :meth:`record_reserved_ids` noted last (None: nothing, or unreadable)."""
        try:
            return int(self.read_file(f"{self.job_root}/{RESERVED_IDS_FILE}").decode())
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None

    def latest_completed_record(self) -> Optional[int]:
        """What :meth:`record_latest_completed` noted last (None: nothing, or unreadable)."""
        try:
            return int(self.read_file(f"{self.job_root}/{LATEST_COMPLETED_FILE}").decode())
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None


# -----------------------------------------------------------------------------------------
# pyarrow.fs
# -----------------------------------------------------------------------------------------

def _filesystem(uri_or_path: str) -> "tuple[Any, str]":
    """(pyarrow filesystem, path in it); plain paths are local and made absolute."""
    import pyarrow.fs as pafs

    if "://" in uri_or_path:
        fs, path = pafs.FileSystem.from_uri(uri_or_path)
        return fs, path.rstrip("/") or "/"
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(uri_or_path))


class FsCheckpointStorage(CheckpointStorage):
    """Checkpoints on a ``pyarrow.fs`` filesystem: a plain path (local, made absolute) or
    a URI (``file://``, ``s3://``, ``gs://``, ``hdfs://``)."""

    def __init__(self, uri_or_path: Union[str, os.PathLike], job_id: str) -> None:
        if not job_id:
            raise ValueError("job_id must not be empty")
        self.uri = os.fspath(uri_or_path)
        self.job_id = job_id
        self.fs, root = _filesystem(self.uri)
        self.root = root.rstrip("/") if root != "/" else ""
        self.job_root = f"{self.root}/{safe_file_name(job_id, allow_empty=True)}"

    def __repr__(self) -> str:
        return f"FsCheckpointStorage({self.uri!r}, job_id={self.job_id!r})"

    def __reduce__(self) -> Any:  # filesystems with credentials are rebuilt, not pickled
        return (FsCheckpointStorage, (self.uri, self.job_id))

    def write_file(self, path: str, data: bytes) -> int:
        parent = path.rsplit("/", 1)[0]
        if parent:
            self.fs.create_dir(parent, recursive=True)
        with self.fs.open_output_stream(path) as out:
            out.write(data)
        return len(data)

    def read_file(self, path: str) -> bytes:
        try:
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"checkpoint file not found: {path}") from None

    def _rename(self, src: str, dst: str) -> None:
        self.fs.move(src, dst)

    def _delete_file(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            pass

    def _delete_tree(self, path: str) -> None:
        import pyarrow.fs as pafs

        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return
        try:
            self.fs.delete_dir(path)
        except FileNotFoundError:
            pass

    def _child_dirs(self, path: str) -> List[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
        return [info.base_name for info in self.fs.get_file_info(selector)
                if info.type == pafs.FileType.Directory]

    def _is_file(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return self.fs.get_file_info(path).type == pafs.FileType.File

    def _files_in(self, path: str) -> List[str]:
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
        return sorted(info.path for info in self.fs.get_file_info(selector)
                      if info.type == pafs.FileType.File)

    def read_metadata(self, checkpoint_dir: str) -> "CompletedCheckpoint":
        if "://" in checkpoint_dir:  # a URI, e.g. a savepoint path given by the user
            return load_checkpoint(checkpoint_dir)
        return super().read_metadata(checkpoint_dir)


# -----------------------------------------------------------------------------------------
# memory
# -----------------------------------------------------------------------------------------

class MemoryCheckpointStorage(CheckpointStorage):
    """The same contract over a dict of ``path -> bytes`` (for unit tests).

    Pass ``files`` (e.g. another instance's ``.files``) to share one store between
    instances, as tasks and the job master share a file system.
    """

    def __init__(self, job_id: str, files: Optional[Dict[str, bytes]] = None) -> None:
        if not job_id:
            raise ValueError("job_id must not be empty")
        self.job_id = job_id
        self.job_root = f"memory://{safe_file_name(job_id, allow_empty=True)}"
        self.files: Dict[str, bytes] = {} if files is None else files
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryCheckpointStorage({self.job_id!r}, {len(self.files)} files)"

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def write_file(self, path: str, data: bytes) -> int:
        data = bytes(data)
        with self._lock:
            self.files[path] = data
        return len(data)

    def read_file(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(f"checkpoint file not found: {path}") from None

    def _rename(self, src: str, dst: str) -> None:
        with self._lock:
            self.files[dst] = self.files.pop(src)

    def _delete_file(self, path: str) -> None:
        with self._lock:
            self.files.pop(path, None)

    def _delete_tree(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for p in [p for p in self.files if p.startswith(prefix) or p == path]:
                del self.files[p]

    def _child_dirs(self, path: str) -> List[str]:
        prefix = path.rstrip("/") + "/"
        names = set()
        for p in list(self.files):
            if p.startswith(prefix):
                rest = p[len(prefix):]
                if "/" in rest:
                    names.add(rest.split("/", 1)[0])
        return sorted(names)

    def _is_file(self, path: str) -> bool:
        return path in self.files

    def _files_in(self, path: str) -> List[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p for p in list(self.files)
                      if p.startswith(prefix) and "/" not in p[len(prefix):])


# -----------------------------------------------------------------------------------------
# helpers
# -----------------------------------------------------------------------------------------

def checkpoint_storage_from_config(config: "Union[Configuration, Mapping[str, Any], None]",
                                   job_id: str) -> CheckpointStorage:
    """:class:`FsCheckpointStorage` at ``execution.checkpointing.dir``, or at
    ``./flowray-checkpoints`` under the current working directory (resolved now)."""
    from flowray.common.options import CHECKPOINTS_DIR
    from flowray.common.configuration import Configuration

    if config is None:
        config = Configuration()
    elif not isinstance(config, Configuration):
        config = Configuration(config)
    directory = config.get(CHECKPOINTS_DIR)
    if not directory:
        directory = os.path.join(os.getcwd(), DEFAULT_CHECKPOINTS_DIR)
    return FsCheckpointStorage(directory, job_id)


def filesystem_path(uri_or_path: str) -> str:
    """``uri_or_path`` as a path inside its file system (local paths made absolute)."""
    return _filesystem(os.fspath(uri_or_path))[1]


def file_reader(location: str) -> "Callable[[str], bytes]":
    """``read(path)`` for paths in the file system of ``location`` (a path or URI)."""
    fs, _ = _filesystem(os.fspath(location))

    def read(path: str) -> bytes:
        try:
            with fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"checkpoint file not found: {path}") from None
    return read


def load_checkpoint(uri_or_path: str) -> "CompletedCheckpoint":
    """Read a checkpoint or savepoint from its ``chk-<n>`` directory or ``_metadata`` file,
    given as a path or URI, without knowing its job (``flowray run -s PATH``). A
    savepoint's relative file paths are resolved against where it is now."""
    fs, path = _filesystem(os.fspath(uri_or_path))
    path = path.rstrip("/")
    if path.rsplit("/", 1)[-1] != METADATA_FILE:
        path = f"{path}/{METADATA_FILE}"
    try:
        with fs.open_input_stream(path) as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"no checkpoint metadata at {path}") from None
    checkpoint = decode_metadata(data, path)
    # as given (a URI keeps its scheme): tasks read the files through it
    given = os.fspath(uri_or_path).rstrip("/")
    if "://" not in given:
        given = path
    elif given.rsplit("/", 1)[-1] != METADATA_FILE:
        given = f"{given}/{METADATA_FILE}"
    checkpoint.external_path = given
    if checkpoint.is_savepoint:
        checkpoint.task_states = resolve_relative_paths(checkpoint.task_states,
                                                        path.rsplit("/", 1)[0])
    return checkpoint


@dataclasses.dataclass(frozen=True)
class RetainedCheckpoint:
    """The newest readable checkpoint of one job folder."""

    job_id: str
    job_name: str
    checkpoint_id: int
    path: str  # its chk-<n> directory, to restore from (execution.savepoint.path)
    completed_ms: int


def find_retained_checkpoints(checkpoints_dir: str, job_name: Optional[str] = None
                              ) -> List[RetainedCheckpoint]:
    """The newest readable checkpoint of every job under ``checkpoints_dir`` (only jobs
    named ``job_name`` if given), newest first: how a user finds the checkpoint to resume
    a cancelled or failed job from (with externalized checkpoint retention)."""
    found: List[RetainedCheckpoint] = []
    scan = FsCheckpointStorage(checkpoints_dir, "scan")
    for folder in scan._child_dirs(scan.root or "/"):
        storage = FsCheckpointStorage(checkpoints_dir, folder)
        for cid in reversed(storage.list_completed()):
            try:
                checkpoint = storage.read_metadata(storage.checkpoint_dir(cid))
            except Exception:  # noqa: BLE001 - a damaged one is skipped for an older one
                continue
            name = getattr(checkpoint, "job_name", "")
            if job_name is None or name == job_name:
                where = checkpoints_dir.rstrip("/") + f"/{folder}/chk-{cid}" \
                    if "://" in checkpoints_dir else storage.checkpoint_dir(cid)
                found.append(RetainedCheckpoint(checkpoint.job_id, name, cid, where,
                                                checkpoint.completed_ms))
            break
    return sorted(found, key=lambda c: c.completed_ms, reverse=True)
