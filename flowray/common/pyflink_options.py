"""Flink's configuration keys behind PyFlink's environment methods (``add_python_file``,
``set_python_requirements``, ``disable_operator_chaining``, global job parameters...).

The ``python.*`` keys keep Flink's names and formats; on Ray they become the job's
``runtime_env`` (see :mod:`flowray.runtime.execution.python_env`).

>>> parse_job_parameters("a:1,b:x")
{'a': '1', 'b': 'x'}
>>> parse_path_list("/x/a.py,/x/b")
['/x/a.py', '/x/b']
"""

from __future__ import annotations

from typing import Any, Dict, List

from flowray.common.configuration import parse_bool, parse_str, register_option

__all__ = ["PYTHON_FILES", "PYTHON_ARCHIVES", "PYTHON_REQUIREMENTS", "PYTHON_EXECUTABLE",
           "PYTHON_CLIENT_EXECUTABLE",
           "OPERATOR_CHAINING", "GLOBAL_JOB_PARAMETERS", "OBJECT_REUSE",
           "parse_path_list", "parse_job_parameters"]


def parse_path_list(value: Any) -> List[str]:
    """A comma-separated list (or a list) of paths."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v)]
    return [p.strip() for p in str(value).split(",") if p.strip()]


def parse_job_parameters(value: Any) -> Dict[str, str]:
    """Flink's map format ``k1:v1,k2:v2`` (or a dict)."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    out: Dict[str, str] = {}
    for item in str(value).split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition(":")
        if not sep:
            raise ValueError(f"expected key:value pairs separated by commas, got {item!r}")
        out[key.strip()] = val.strip()
    return out


PYTHON_FILES = register_option(
    "python.files", parse_path_list, [],
    "Python files, packages (directories) and wheels shipped to the workers and put on "
    "their import path (Ray runtime_env py_modules).")
PYTHON_ARCHIVES = register_option(
    "python.archives", parse_path_list, [],
    "Zip archives extracted in the workers' working directory, each as 'path#target_dir' "
    "(Ray runtime_env working_dir).")
PYTHON_REQUIREMENTS = register_option(
    "python.requirements", parse_str, None,
    "A requirements file installed on the workers, optionally 'file#cache_dir' with "
    "packages to install offline (Ray runtime_env pip).")
PYTHON_EXECUTABLE = register_option(
    "python.executable", parse_str, None,
    "The Python interpreter the workers run (Ray runtime_env py_executable).")
PYTHON_CLIENT_EXECUTABLE = register_option(
    "python.client.executable", parse_str, "python",
    "The Python interpreter that runs the program's driver on the cluster when `flowray run` "
    "submits it through Ray's Job Submission (Flink's key of the same name).")
OPERATOR_CHAINING = register_option(
    "pipeline.operator-chaining.enabled", parse_bool, True,
    "Chain forward-connected operators of equal parallelism into one task.")
GLOBAL_JOB_PARAMETERS = register_option(
    "pipeline.global-job-parameters", parse_job_parameters, {},
    "Parameters every function reads with RuntimeContext.get_job_parameter (k1:v1,k2:v2).")
OBJECT_REUSE = register_option(
    "pipeline.object-reuse", parse_bool, False,
    "Accepted for Flink compatibility: records are never copied between chained operators.")
