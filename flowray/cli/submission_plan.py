"""What ``flowray run`` hands Ray's Job Submission (pure; the cluster side is
:mod:`flowray.runtime.execution.job_submission`).

The program's folder (a script's folder; the current folder for ``-pym``) is uploaded as
the job's ``working_dir`` and the driver starts there, so every path the program ships
(``-pyfs``, ``-pyreq``, ``-pyarch``) must lie inside it and is handed on relative to it. The
settings go into the entrypoint (``FLOWRAY_CLIENT_CONFIG=... python -m flowray.cli.program
...``), without ``ray.address``: the driver runs on the cluster and joins it there.

>>> plan = plan_submission(["/home/me/jobs/wc.py", "in.txt"], {"parallelism.default": "2",
...                        "ray.address": "10.0.0.1:6379"}, "python", "flowray-1a2b", "/tmp")
>>> plan.working_dir, plan.settings
('/home/me/jobs', {'parallelism.default': '2', 'flowray.submission-id': 'flowray-1a2b'})
>>> print(plan.entrypoint)
FLOWRAY_CLIENT_CONFIG='{"parallelism.default": "2", "flowray.submission-id": "flowray-1a2b"}' python -m flowray.cli.program wc.py in.txt
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

__all__ = ["SubmissionPlan", "plan_submission", "SUBMITTED_LINE", "submitted_job_id",
           "ERROR_PREFIX", "new_submission_id", "ProgramOutput"]

#: what a detached program prints once its job runs (StreamExecutionEnvironment._submit)
SUBMITTED_LINE = re.compile(r"^Job has been submitted with JobID (\w+)", re.MULTILINE)
#: the lines Ray's job manager writes into a job's log before the program's own output
RAY_JOB_NOTE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+INFO job_manager\.py:"
                          r"|Running entrypoint for job \S+: )")
#: how flowray.cli.program reports a flowray error in one line
ERROR_PREFIX = "flowray run: error: "

#: settings whose local paths the job ships from the driver's machine
_SHIPPED_PATHS = {"python.files": "-pyfs", "python.requirements": "-pyreq",
                  "python.archives": "-pyarch"}


@dataclass(frozen=True)
class SubmissionPlan:
    working_dir: str
    entrypoint: str
    settings: Dict[str, str]
    submission_id: str


def new_submission_id() -> str:
    import uuid

    return f"flowray-{uuid.uuid4().hex[:12]}"


def _inside(path: str, folder: str, option: str) -> str:
    """``path`` relative to ``folder`` (a ``#suffix`` kept: an archive's target folder; a
    requirements file's cache folder is a local path too); ValueError if it is outside."""
    local, sep, suffix = path.partition("#")
    if option == "-pyreq" and suffix:
        suffix = _inside(suffix, folder, option)
    if "://" in local:
        return path
    full = os.path.abspath(os.path.join(folder, local))
    rel = os.path.relpath(full, folder)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise ValueError(
            f"{option} {local} is outside the program's folder {folder}, which is what Ray's "
            "Job Submission uploads: move it into that folder, or run with --local-driver")
    return rel + sep + suffix


def plan_submission(program: List[str], settings: Dict[str, str], python: str,
                    submission_id: str, cwd: str,
                    gcs_address: Optional[str] = None) -> SubmissionPlan:
    """The submission of ``program`` (``[script, args...]`` or ``["-m", module, args...]``)
    with the CLI's ``settings``; ValueError names a shipped path outside the folder.
    ``gcs_address``: the cluster's, when known, for the driver to join (Ray's own choice,
    the newest cluster started on the head node, may be another one)."""
    if program[0] == "-m":
        working_dir, command = os.path.abspath(cwd), list(program)
    else:
        script = os.path.abspath(program[0])
        working_dir, command = os.path.dirname(script), [os.path.basename(script), *program[1:]]
    out: Dict[str, str] = {}
    for key, value in settings.items():
        if key == "ray.address":
            continue
        if key in _SHIPPED_PATHS and value:
            value = ",".join(_inside(p, working_dir, _SHIPPED_PATHS[key])
                             for p in value.split(",") if p)
        out[key] = value
    out["flowray.submission-id"] = submission_id
    cluster = [f"RAY_ADDRESS={shlex.quote(gcs_address)}"] if gcs_address else []
    paths = [os.path.dirname(p) if p.endswith(".py") else p
             for p in out.get("python.files", "").split(",") if p and "://" not in p]
    if paths:   # on the driver's sys.path too, as `flowray run` does locally
        cluster.append(f"PYTHONPATH={shlex.quote(os.pathsep.join(p or '.' for p in paths))}"
                       "${PYTHONPATH:+:$PYTHONPATH}")
    entrypoint = " ".join([*cluster, f"FLOWRAY_CLIENT_CONFIG={shlex.quote(json.dumps(out))}",
                           shlex.quote(python), "-m", "flowray.cli.program",
                           *(shlex.quote(a) for a in command)])
    return SubmissionPlan(working_dir, entrypoint, out, submission_id)


def submitted_job_id(output: str) -> Optional[str]:
    """The flowray job id a detached program printed, if it did.

    >>> submitted_job_id("...\\nJob has been submitted with JobID 4f2a9c0d (name 'wc')\\n")
    '4f2a9c0d'
    """
    m = SUBMITTED_LINE.search(output)
    return m.group(1) if m else None


class ProgramOutput:
    """The submitted program's output as it arrives in pieces: whole lines go to ``out``,
    except flowray's one-line errors, which go to ``err`` (as they would locally).

    >>> seen = []
    >>> output = ProgramOutput(lambda l: seen.append(("out", l)), lambda l: seen.append(("err", l)))
    >>> output.feed("Running entrypoint for job flowray-1: python -m ...\\nhello\\n")
    >>> output.feed("flowray run: err"); output.feed("or: bad\\npart"); output.flush()
    >>> seen
    [('out', 'hello'), ('err', 'flowray run: error: bad'), ('out', 'part')]
    """

    def __init__(self, out: Callable[[str], None], err: Callable[[str], None]) -> None:
        self._out, self._err = out, err
        self._partial = ""
        self.errors = 0
        self.text: List[str] = []

    def feed(self, text: str) -> None:
        self.text.append(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._emit(line)

    def flush(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = ""

    def _emit(self, line: str) -> None:
        if RAY_JOB_NOTE.match(line):
            return   # Ray's own notes in the job's log, not the program's output
        if line.startswith(ERROR_PREFIX):
            self.errors += 1
            self._err(line)
        else:
            self._out(line)
