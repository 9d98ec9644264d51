"""The job's Ray ``runtime_env`` from Flink's ``python.*`` keys (``add_python_file``,
``add_python_archive``, ``set_python_requirements``, ``set_python_executable``).

The job master gets it when it is created; the task actors it creates inherit it (Ray
passes a parent's runtime env to the actors it creates), so every worker imports the
shipped modules and runs with the packages.

* ``python.files``: ``.py`` files and ``.whl`` files are ``py_modules`` entries; a folder
  is put on the import path as in Flink (each module or package in it is an entry).
* ``python.archives`` (``path#target``): the zips are repacked into one zip, each under
  its target folder, used as ``working_dir`` (the workers' current directory).
* ``python.requirements`` (``file[#cache_dir]``): ``pip`` with the file's requirements
  (offline from ``cache_dir`` when given).
* ``python.executable``: ``py_executable``.

>>> python_runtime_env({}) is None
True
>>> python_runtime_env({"python.executable": "/usr/bin/python3"})
{'py_executable': '/usr/bin/python3'}
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from flowray.common.pyflink_options import parse_path_list

if TYPE_CHECKING:  # pragma: no cover
    from flowray.common.configuration import Configuration

__all__ = ["python_runtime_env", "apply_in_process", "ship_python_file", "ship_python_archive",
           "ship_requirements", "use_python_executable"]


# -- what a program declares (the environment's add_python_file & co.) -----------------------
def _existing(path: str, what: str) -> str:
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what} expects a path, got {path!r}")
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(full):
        raise FileNotFoundError(f"{what}: {path!r} does not exist")
    return full


def _append(config: "Configuration", key: str, value: str) -> None:
    current = config.to_dict().get(key)
    items = [v for v in str(current).split(",") if v] if current else []
    if value not in items:
        items.append(value)
    config.set_string(key, ",".join(items))


def ship_python_file(config: "Configuration", file_path: str) -> None:
    """Add a ``.py`` file, a package or folder, or a ``.whl`` to ``python.files`` (checked:
    it exists and is one of those).

    >>> from flowray.common.configuration import Configuration
    >>> ship_python_file(Configuration(), "/no/such/file.py")
    Traceback (most recent call last):
    ...
    FileNotFoundError: add_python_file: '/no/such/file.py' does not exist
    """
    full = _existing(file_path, "add_python_file")
    if os.path.isfile(full) and not full.endswith((".py", ".whl")):
        raise ValueError(f"add_python_file: {file_path!r} is neither a .py file, a "
                         ".whl, nor a folder (unpack .zip/.egg files into a folder)")
    _append(config, "python.files", full)


def ship_python_archive(config: "Configuration", archive_path: str,
                        target_dir: Optional[str] = None) -> None:
    """Add a zip archive to ``python.archives`` (``path#target_dir`` when given)."""
    full = _existing(archive_path, "add_python_archive")
    if "#" in full or (target_dir and ("#" in target_dir or "," in target_dir)):
        raise ValueError("add_python_archive: '#' and ',' cannot appear in the path or "
                         "target directory")
    _append(config, "python.archives", f"{full}#{target_dir}" if target_dir else full)


def ship_requirements(config: "Configuration", requirements_file_path: str,
                      requirements_cache_dir: Optional[str] = None) -> None:
    """Set ``python.requirements`` (``file[#cache_dir]``, both checked)."""
    full = _existing(requirements_file_path, "set_python_requirements")
    value = full
    if requirements_cache_dir:
        value = f"{full}#{_existing(requirements_cache_dir, 'set_python_requirements')}"
    config.set_string("python.requirements", value)


def use_python_executable(config: "Configuration", python_exec: str) -> None:
    """Set ``python.executable`` (it must exist on every node; not checked here)."""
    if not isinstance(python_exec, str) or not python_exec:
        raise ValueError(f"set_python_executable expects a path, got {python_exec!r}")
    config.set_string("python.executable", python_exec)


def _py_modules(paths: List[str]) -> List[str]:
    out: List[str] = []
    for p in paths:
        if not os.path.exists(p):
            raise FileNotFoundError(f"python.files: {p!r} does not exist")
        if os.path.isdir(p) and not os.path.exists(os.path.join(p, "__init__.py")):
            # a folder on the import path: what it holds becomes importable
            for name in sorted(os.listdir(p)):
                full = os.path.join(p, name)
                if name.endswith(".py") or (os.path.isdir(full) and not name.startswith(".")
                                            and name != "__pycache__"):
                    out.append(full)
        else:
            out.append(p)
    return out


def _archives_zip(entries: List[str]) -> str:
    """One zip holding each archive's contents under its target folder."""
    digest = hashlib.sha1("\n".join(entries).encode()).hexdigest()[:12]
    for entry in entries:
        path = entry.partition("#")[0]
        digest = hashlib.sha1((digest + str(os.path.getmtime(path))).encode()).hexdigest()[:12]
    out = os.path.join(tempfile.gettempdir(), f"flowray-archives-{digest}.zip")
    if os.path.exists(out):
        return out
    tmp = out + f".{os.getpid()}.tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for entry in entries:
            path, _, target = entry.partition("#")
            if not zipfile.is_zipfile(path):
                raise ValueError(f"python.archives: {path!r} is not a zip file")
            target = target or os.path.basename(path)
            with zipfile.ZipFile(path) as src:
                for info in src.infolist():
                    if info.is_dir():
                        continue
                    dst.writestr(f"{target}/{info.filename}", src.read(info))
    os.replace(tmp, out)
    return out


def python_runtime_env(config: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The Ray ``runtime_env`` for the job's ``python.*`` settings; ``None`` if none."""
    env: Dict[str, Any] = {}
    files = parse_path_list(config.get("python.files") or [])
    if files:
        env["py_modules"] = _py_modules(files)
    archives = parse_path_list(config.get("python.archives") or [])
    if archives:
        env["working_dir"] = _archives_zip(archives)
    requirements = config.get("python.requirements")
    if requirements:
        req_file, _, cache_dir = str(requirements).partition("#")
        with open(req_file, encoding="utf-8") as f:
            packages = [line.strip() for line in f
                        if line.strip() and not line.strip().startswith("#")]
        pip: Dict[str, Any] = {"packages": packages}
        if cache_dir:
            pip["pip_install_options"] = ["--no-index", "--find-links", cache_dir]
        env["pip"] = pip
    executable = config.get("python.executable")
    if executable:
        env["py_executable"] = str(executable)
    return env or None


log = logging.getLogger(__name__)


def apply_in_process(config: Mapping[str, Any]) -> None:
    """The local executor runs the job in this process: ``python.files`` go on this
    process's import path; archives, requirements and the executable cannot apply to a
    running interpreter, so they are reported (a warning), not silently dropped."""
    for p in parse_path_list(config.get("python.files") or []):
        entry = p if os.path.isdir(p) and not os.path.exists(os.path.join(p, "__init__.py")) \
            else os.path.dirname(p) if not p.endswith(".whl") else p
        if entry not in sys.path:
            sys.path.insert(0, entry)
    ignored = [k for k in ("python.archives", "python.requirements", "python.executable")
               if config.get(k)]
    if ignored:
        log.warning("flowray: the local executor runs the job in this process; %s apply "
                    "only to jobs on Ray (execution.target=ray)", ", ".join(ignored))
