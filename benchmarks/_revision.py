"""An earlier revision of flowray, exported to run side by side with this tree: the
benchmarks that report "after / before" ratios start their "before" measurements in a
process whose ``PYTHONPATH`` puts the export first (the Ray workers it starts inherit it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile

__all__ = ["ROOT", "export_revision", "env_for"]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: top-level folders installed as subpackages of flowray (pyproject's package-dir)
SUBPACKAGES = ("runtime", "operators", "state")


def export_revision(rev: str, into: str) -> str:
    """``into``/site/flowray laid out as installed, from git revision ``rev``; the site."""
    archive = os.path.join(into, "src.tar")
    subprocess.run(["git", "-C", ROOT, "archive", "-o", archive, rev], check=True)
    src = os.path.join(into, "src")
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    site = os.path.join(into, "site")
    shutil.copytree(os.path.join(src, "flowray"), os.path.join(site, "flowray"))
    for sub in SUBPACKAGES:
        shutil.copytree(os.path.join(src, sub), os.path.join(site, "flowray", sub))
    _build_native(src, site)
    return site


def _build_native(src: str, site: str) -> None:
    """Build the revision's C halves (its pyproject's ext-modules, if any) into ``site``,
    as its install would: without them it would run its pure-Python twins, slower than it
    is."""
    import tomllib

    with open(os.path.join(src, "pyproject.toml"), "rb") as f:
        modules = tomllib.load(f).get("tool", {}).get("setuptools", {}).get("ext-modules", [])
    if not modules:
        return
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    extensions = [Extension(m["name"], [os.path.join(src, s) for s in m["sources"]],
                            depends=[os.path.join(src, d) for d in m.get("depends", [])])
                  for m in modules]
    cmd = build_ext(Distribution({"ext_modules": extensions}))
    cmd.build_lib = site
    cmd.build_temp = os.path.join(src, "build-temp")
    cmd.ensure_finalized()
    cmd.run()


def env_for(site: str | None) -> dict:
    """The environment of a measuring process: ``site`` first on ``PYTHONPATH`` (None: this
    tree, as installed)."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    return env
