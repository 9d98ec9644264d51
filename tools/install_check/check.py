"""A user's install: flowray from this clone, not editable and without the Makefile, into a
fresh venv whose numpy, pyarrow and pandas are other versions inside flowray's ranges (the
lowest ones: constraints.txt pins the newest); then a job runs there, outside the clone.

    python tools/install_check/check.py [--venv DIR]

Exits non-zero, with pip's or the job's output, if the install or the job fails.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default=os.path.join(REPO, ".cache", "install-check"))
    args = parser.parse_args()
    started = time.monotonic()
    shutil.rmtree(args.venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", args.venv])
    py = os.path.join(args.venv, "bin", "python")
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
        installed = time.monotonic()
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "RAY_ADDRESS", "FLOWRAY_CLIENT_CONFIG",
                            "FLOWRAY_CONF_DIR", "VIRTUAL_ENV")}
        shutil.rmtree(source)   # the job must find flowray in the venv, nowhere else
        # the C halves were built by the user's install too (an error where a compiler is)
        run([py, os.path.join(REPO, "tools", "native_check", "check.py")], cwd=cwd, env=env)
        p = run([py, os.path.join(HERE, "job.py")], cwd=cwd, env=env, timeout=600)
        flowray_cli = os.path.join(args.venv, "bin", "flowray")
        version = run([flowray_cli, "--version"], cwd=cwd, env=env).stdout.strip()
    sys.stdout.write(p.stdout)
    print(f"install check: {version}; pip install {installed - started:.0f} s, "
          f"job {time.monotonic() - installed:.0f} s")


if __name__ == "__main__":
    main()
