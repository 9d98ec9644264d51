"""A user's install: flowray from this clone, not editable and without the Makefile, into a
fresh venv whose numpy, pyarrow and pandas are other versions inside flowray's ranges (the
lowest ones: constraints.txt pins the newest); then a job runs there, outside the clone.

    python tools/install_check/check.py [--venv DIR] [--phase install|job]

Exits non-zero, with pip's or the job's output, if the install or the job fails.
``--phase install`` makes the venv and installs (mostly downloads: `make test` runs it
beside the tests); ``--phase job`` then runs the job in that venv; by default both.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

#: the other set of versions: each at the bottom of its range in pyproject.toml
OTHER_VERSIONS = ["numpy==2.4.0", "pyarrow==26.0.0", "pandas==3.1.0"]


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if p.returncode != 0:
        sys.stderr.write(f"$ {' '.join(cmd)}\n{p.stdout}\n{p.stderr}\n")
        raise SystemExit(f"install check: failed: {' '.join(cmd[:4])} ...")
    return p


#: what marks a venv whose install finished (``--phase install``)
INSTALLED_MARK = "flowray-install-check-installed"


def _job_env() -> dict:
    """The environment of a user's shell: nothing of this clone's or the tests' settings."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "RAY_ADDRESS", "FLOWRAY_CLIENT_CONFIG",
                         "FLOWRAY_CONF_DIR", "VIRTUAL_ENV")}


def install(venv: str) -> float:
    """A fresh ``venv`` with flowray installed from the clone's files; the seconds it took."""
    started = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", venv])
    py = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory(prefix="flowray-install-check-") as cwd:
        # the clone's files alone (no venv, caches or an old build/ from an earlier
        # install), as a user's fresh clone; no -e, no constraints: what
        # `pip install <clone>` gives a user next to their own packages
        source = os.path.join(cwd, "flowray")
        shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
            ".venv", ".cache", ".git", "build", "dist", "*.egg-info", "__pycache__",
            ".pytest_cache", "flowray-checkpoints", "spark-warehouse", "metastore_db",
            "*.so"))
        run([py, "-m", "pip", "install", "-q", *OTHER_VERSIONS, source])
        shutil.rmtree(source)   # the job must find flowray in the venv, nowhere else
        # the C halves were built by the user's install too (an error where a compiler is)
        run([py, os.path.join(REPO, "tools", "native_check", "check.py")], cwd=cwd,
            env=_job_env())
    with open(os.path.join(venv, INSTALLED_MARK), "w") as f:
        f.write("installed\n")
    return time.monotonic() - started


def run_job(venv: str) -> str:
    """The job in ``venv`` (installed by :func:`install`), outside the clone; its output
    and flowray's version line."""
    if not os.path.exists(os.path.join(venv, INSTALLED_MARK)):
        raise SystemExit(f"install check: {venv} holds no finished install: run "
                         "--phase install first")
    py = os.path.join(venv, "bin", "python")
    env = _job_env()
    with tempfile.TemporaryDirectory(prefix="flowray-install-check-") as cwd:
        p = run([py, os.path.join(HERE, "job.py")], cwd=cwd, env=env, timeout=600)
        version = run([os.path.join(venv, "bin", "flowray"), "--version"], cwd=cwd,
                      env=env).stdout.strip()
    return p.stdout + f"install check: {version}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(REPO, ".cache", "install-check"))
    parser.add_argument("--phase", choices=["install", "job", "both"], default="both")
    args = parser.parse_args()
    if args.phase in ("install", "both"):
        print(f"install check: pip install {install(args.venv):.0f} s", flush=True)
    if args.phase in ("job", "both"):
        started = time.monotonic()
        out = run_job(args.venv)
        print(f"{out}; job {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
