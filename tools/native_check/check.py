"""After `make` installs flowray: are the C halves of its hot paths built?

Each C module has a pure-Python twin that flowray falls back to (flowray/common/native.py),
and pyproject marks them `optional`, so that `pip install` goes on without a C compiler.
That also hides a compile error: on a machine that has a C compiler, a module that did not
build is an error here (the Makefile stops); without one, a warning.

    .venv/bin/python tools/native_check/check.py
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def modules() -> list:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    return [m["name"] for m in project["tool"]["setuptools"].get("ext-modules", [])]


def main() -> int:
    missing = []
    for name in modules():
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if not missing:
        return 0
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    lines = "\n".join(f"  - {m}" for m in missing)
    if compiler is None:
        print(f"warning: no C compiler, so these C halves were not built; flowray runs "
              f"their pure-Python twins (slower):\n{lines}", file=sys.stderr)
        return 0
    print(f"error: {compiler} is here but these C modules did not build:\n{lines}\n"
          f"       `.venv/bin/python -m pip install -v --no-deps -e .` shows the compiler's "
          f"output", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
