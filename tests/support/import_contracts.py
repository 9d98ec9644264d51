"""Run import-linter's contracts (``.importlinter`` at the project root) over flowray.

``flowray.runtime``, ``.operators`` and ``.state`` live in top-level folders mapped into the
``flowray`` package by pyproject's ``package-dir``; import-linter only walks the root
package's own folder, so the check runs over a mirror: a ``flowray/`` folder of symbolic
links to the real files and folders. ``edit`` replaces one module in the mirror (to show a
contract failing on purpose).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
import json
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
MAPPED = {"runtime": "runtime", "operators": "operators", "state": "state"}


def build_mirror(workdir: Path, edit: Optional[Dict[str, str]] = None) -> Path:
    """A folder holding ``flowray/`` as the installed package sees it; ``edit`` maps a
    path inside it (``"state/heap_backend.py"``) to new source text."""
    mirror = workdir / "mirror"
    package = mirror / "flowray"
    package.mkdir(parents=True)
    for entry in (ROOT / "flowray").iterdir():
        if entry.name != "__pycache__":
            os.symlink(entry, package / entry.name)
    for name, folder in MAPPED.items():
        os.symlink(ROOT / folder, package / name)
    for rel, text in (edit or {}).items():
        _materialize(package, Path(rel))
        (package / rel).write_text(text)
    shutil.copy(ROOT / ".importlinter", mirror / ".importlinter")
    return mirror


def _materialize(package: Path, rel: Path) -> None:
    """Turn the symbolic links on the way to ``rel`` into real folders of links, so the
    edit does not touch the project."""
    here = package
    for part in rel.parts[:-1]:
        here = here / part
        if here.is_symlink():
            target = here.resolve()
            here.unlink()
            here.mkdir()
            for entry in target.iterdir():
                if entry.name != "__pycache__":
                    os.symlink(entry, here / entry.name)
    leaf = package / rel
    if leaf.is_symlink():
        leaf.unlink()


def lint_imports(workdir: Path, edit: Optional[Dict[str, str]] = None) -> Tuple[bool, str]:
    """(all contracts kept, import-linter's report)."""
    mirror = build_mirror(workdir, edit)
    env = dict(os.environ, PYTHONPATH=str(mirror))
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache"], cwd=mirror, env=env,
                          capture_output=True, text=True)
    return proc.returncode == 0, proc.stdout + proc.stderr


def original(rel: str) -> str:
    """The project's source of a module, by its path inside the flowray package."""
    first, _, rest = rel.partition("/")
    folder = ROOT / MAPPED[first] if first in MAPPED else ROOT / "flowray" / first
    return (folder / rest).read_text() if rest else folder.read_text()


_CYCLES = """
import json, sys
import grimp
graph = grimp.build_graph("flowray", cache_dir=None, exclude_type_checking_imports=True)
index, low, stack, on_stack, cycles, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def visit(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on_stack.add(v)
    for w in graph.find_modules_directly_imported_by(v):
        if w not in graph.modules:
            continue
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop(); on_stack.discard(w); component.append(w)
            if w == v:
                break
        if len(component) > 1:
            cycles.append(sorted(component))
for m in sorted(graph.modules):
    if m not in index:
        visit(m)
print(json.dumps(cycles))
"""


def import_cycles(workdir: Path) -> List[List[str]]:
    """Groups of modules that import each other, directly or through others (grimp's import
    graph; imports under ``if TYPE_CHECKING:`` do not count)."""
    mirror = build_mirror(workdir)
    env = dict(os.environ, PYTHONPATH=str(mirror))
    proc = subprocess.run([sys.executable, "-c", _CYCLES], cwd=mirror, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)
