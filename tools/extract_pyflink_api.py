#!/usr/bin/env python3
"""Extract PyFlink's public API (names, classes, method signatures) from the released wheel
into ``tests/unit/api/pyflink_api.json``, and compare flowray against it.

The wheel is read as source with :mod:`ast`: PyFlink is never imported (no JVM needed).

    python tools/extract_pyflink_api.py                 # write tests/unit/api/pyflink_api.json
    python tools/extract_pyflink_api.py --missing       # what flowray lacks or gets wrong
    python tools/extract_pyflink_api.py --missing --json  # the same as JSON entries, to paste
                                                          # into tests/unit/api/not_implemented.json

The default wheel is ``/tmp/pyflink_dl/apache_flink-2.3.0-*.whl``; when absent it is fetched
with ``pip download --no-deps apache-flink==2.3.0 -d /tmp/pyflink_dl``.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import subprocess
import sys
import zipfile
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["extract", "main", "MODULES"]

VERSION = "2.3.0"
DEFAULT_DIR = "/tmp/pyflink_dl"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "unit", "api", "pyflink_api.json")
COMMAND = "python tools/extract_pyflink_api.py"

#: the modules whose exports are recorded; packages also contribute the submodules they
#: re-export from (``from pyflink.x.y import ...`` in their ``__init__``)
MODULES = [
    "pyflink.common",
    "pyflink.datastream",
    "pyflink.datastream.connectors",
    "pyflink.datastream.connectors.base",
    "pyflink.datastream.connectors.file_system",
    "pyflink.datastream.connectors.number_seq",
    "pyflink.datastream.state_backend",
    "pyflink.datastream.state",
    "pyflink.datastream.functions",
    "pyflink.datastream.window",
    "pyflink.datastream.time_domain",
    "pyflink.datastream.timerservice",
    "pyflink.datastream.output_tag",
]

#: base classes whose methods are PyFlink's Java bridge, not API (not followed)
JAVA_BASES = {"JavaObjectWrapper", "JavaFunctionWrapper", "JavaCustomPartitionerWrapper"}


def _wheel(path: Optional[str]) -> str:
    if path:
        return path
    found = sorted(glob.glob(os.path.join(DEFAULT_DIR, f"apache_flink-{VERSION}-*.whl")))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        f"apache-flink=={VERSION}", "-d", DEFAULT_DIR], check=True)
        found = sorted(glob.glob(os.path.join(DEFAULT_DIR, f"apache_flink-{VERSION}-*.whl")))
    if not found:
        raise SystemExit(f"no apache_flink-{VERSION} wheel in {DEFAULT_DIR}")
    return found[0]


class _Wheel:
    """The wheel's Python sources, parsed on demand."""

    def __init__(self, path: str) -> None:
        self._zip = zipfile.ZipFile(path)
        self._names = set(self._zip.namelist())
        self._trees: Dict[str, Optional[ast.Module]] = {}

    def file_of(self, module: str) -> Optional[str]:
        base = module.replace(".", "/")
        for cand in (base + "/__init__.py", base + ".py"):
            if cand in self._names:
                return cand
        return None

    def tree(self, module: str) -> Optional[ast.Module]:
        if module not in self._trees:
            f = self.file_of(module)
            self._trees[module] = (ast.parse(self._zip.read(f).decode("utf-8"), f)
                                   if f else None)
        return self._trees[module]

    def is_package(self, module: str) -> bool:
        f = self.file_of(module)
        return bool(f and f.endswith("__init__.py"))


def _imports(tree: ast.Module) -> Dict[str, Tuple[str, str]]:
    """Top-level ``from pyflink.x import y [as z]``: local name -> (module, name)."""
    out: Dict[str, Tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("pyflink"):
            for a in node.names:
                out[a.asname or a.name] = (node.module, a.name)
    return out


def _all_names(tree: ast.Module) -> Optional[List[str]]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    return None


def _installed(tree: ast.Module) -> Dict[str, Tuple[str, str]]:
    """Names a package's ``_install()`` sets on itself (``setattr(pkg, 'Name', value)``):
    name -> (module, name) of the value."""
    out: Dict[str, Tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name == "_install"):
            continue
        local: Dict[str, Tuple[str, str]] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and sub.module:
                for a in sub.names:
                    local[a.asname or a.name] = (sub.module, a.name)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and getattr(sub.func, "id", None) == "setattr" \
                    and len(sub.args) == 3 and isinstance(sub.args[1], ast.Constant):
                v = sub.args[2]
                if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) \
                        and v.value.id in local:
                    m, n = local[v.value.id]
                    out[sub.args[1].value] = (f"{m}.{n}", v.attr)
                elif isinstance(v, ast.Name) and v.id in local:
                    out[sub.args[1].value] = local[v.id]
    return out


def _defined(tree: ast.Module) -> Dict[str, ast.AST]:
    out: Dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
    return out


def _params(fn: ast.FunctionDef, drop_first: bool) -> List[List[Any]]:
    a = fn.args
    positional = list(a.posonlyargs) + list(a.args)
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out: List[List[Any]] = []
    for i, (arg, d) in enumerate(zip(positional, defaults)):
        if drop_first and i == 0:
            continue
        kind = "POSITIONAL_ONLY" if i < len(a.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append([arg.arg, kind, d is not None])
    if a.vararg:
        out.append([a.vararg.arg, "VAR_POSITIONAL", False])
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append([arg.arg, "KEYWORD_ONLY", d is not None])
    if a.kwarg:
        out.append([a.kwarg.arg, "VAR_KEYWORD", False])
    return out


def _method(fn: ast.FunctionDef) -> Dict[str, Any]:
    decos = {getattr(d, "id", getattr(d, "attr", "")) for d in fn.decorator_list}
    if "staticmethod" in decos:
        kind = "staticmethod"
    elif "classmethod" in decos:
        kind = "classmethod"
    elif "property" in decos:
        kind = "property"
    elif any(d.endswith("setter") or d == "setter" for d in decos):
        kind = "setter"
    else:
        kind = "method"
    return {"kind": kind, "params": _params(fn, drop_first=kind != "staticmethod")}


class _Extractor:
    def __init__(self, wheel: _Wheel) -> None:
        self.w = wheel
        self.classes: Dict[str, Dict[str, Any]] = {}
        self.functions: Dict[str, Dict[str, Any]] = {}

    def resolve(self, module: str, name: str, depth: int = 0) -> Tuple[str, str, Optional[ast.AST]]:
        """Where ``module.name`` is defined: (module, name, node)."""
        tree = self.w.tree(module)
        if tree is None or depth > 10:
            return module, name, None
        defined = _defined(tree)
        if name in defined:
            return module, name, defined[name]
        imp = _imports(tree).get(name)
        if imp:
            return self.resolve(imp[0], imp[1], depth + 1)
        sub = f"{module}.{name}"
        if self.w.tree(sub) is not None:
            return sub, "", None
        return module, name, None

    def class_info(self, module: str, node: ast.ClassDef) -> str:
        qual = f"{module}.{node.name}"
        if qual in self.classes:
            return qual
        info: Dict[str, Any] = {"bases": [], "methods": {}, "attributes": []}
        self.classes[qual] = info
        own: Dict[str, Any] = {}
        attrs = set()
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                m = _method(item)
                if m["kind"] == "setter":
                    continue
                own[item.name] = m
            elif isinstance(item, ast.FunctionDef) and item.name == "__init__":
                own["__init__"] = _method(item)
            elif isinstance(item, ast.Assign):
                for t in item.targets:
                    if isinstance(t, ast.Name) and not t.id.startswith("_"):
                        attrs.add(t.id)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                    and not item.target.id.startswith("_"):
                attrs.add(item.target.id)
        inherited: Dict[str, Any] = {}
        inherited_attrs: set = set()
        for b in node.bases:
            bname = b.id if isinstance(b, ast.Name) else (
                b.value.id if isinstance(b, ast.Subscript) and isinstance(b.value, ast.Name)
                else None)
            if bname is None:
                continue
            bmod, bn, bnode = self.resolve(module, bname)
            if isinstance(bnode, ast.ClassDef):
                info["bases"].append(f"{bmod}.{bn}")
                if bn in JAVA_BASES:
                    continue
                bq = self.class_info(bmod, bnode)
                for k, v in self.classes[bq]["methods"].items():
                    if k != "__init__":
                        inherited.setdefault(k, v)
                inherited_attrs.update(self.classes[bq]["attributes"])
            else:
                info["bases"].append(bname)
        inherited.update(own)
        info["methods"] = {k: inherited[k] for k in sorted(inherited)}
        info["attributes"] = sorted(attrs | inherited_attrs)
        return qual

    def exports(self, module: str) -> Dict[str, Dict[str, Any]]:
        tree = self.w.tree(module)
        if tree is None:
            raise SystemExit(f"{module} is not in the wheel")
        names = _all_names(tree)
        if names is None:  # public top-level classes and functions defined here
            names = [n for n, node in _defined(tree).items()
                     if isinstance(node, (ast.ClassDef, ast.FunctionDef))
                     and not n.startswith("_")]
        installed = _installed(tree)
        names = list(names) + [n for n in sorted(installed) if n not in names]
        out: Dict[str, Dict[str, Any]] = {}
        for name in names:
            if name in installed and name not in _imports(tree) and name not in _defined(tree):
                dmod, dname, node = self.resolve(*installed[name])
            else:
                dmod, dname, node = self.resolve(module, name)
            if isinstance(node, ast.ClassDef):
                out[name] = {"kind": "class", "ref": self.class_info(dmod, node)}
            elif isinstance(node, ast.FunctionDef):
                qual = f"{dmod}.{dname}"
                self.functions[qual] = {"params": _params(node, drop_first=False)}
                out[name] = {"kind": "function", "ref": qual}
            elif dname == "":
                out[name] = {"kind": "module", "ref": dmod}
            else:
                out[name] = {"kind": "value", "ref": f"{dmod}.{dname}"}
        return out

    def reexported_submodules(self, package: str) -> List[str]:
        tree = self.w.tree(package)
        subs = set()
        for mod, _ in _imports(tree).values() if tree else []:
            if mod.startswith(package + ".") and mod.count(".") == package.count(".") + 1:
                subs.add(mod)
        return sorted(subs)


def extract(wheel_path: str) -> Dict[str, Any]:
    """The API of the PyFlink wheel at ``wheel_path``, as written to pyflink_api.json."""
    w = _Wheel(wheel_path)
    ex = _Extractor(w)
    modules: List[str] = []
    for m in MODULES:
        modules.append(m)
        if w.is_package(m):
            modules.extend(ex.reexported_submodules(m))
    result_modules = {m: ex.exports(m) for m in sorted(set(modules))}
    used = {e["ref"] for exp in result_modules.values() for e in exp.values()}
    pending = [q for q in used if q in ex.classes]
    keep = set()
    while pending:  # classes reachable from exports (incl. bases)
        q = pending.pop()
        if q in keep:
            continue
        keep.add(q)
        pending.extend(b for b in ex.classes[q]["bases"] if b in ex.classes)
    return {
        "_header": {
            "generated_by": COMMAND,
            "source": os.path.basename(wheel_path),
            "pyflink_version": VERSION,
            "note": "PyFlink's public names per module, classes with their public methods "
                    "(inherited within pyflink, Java bridge bases not followed); params are "
                    "[name, kind, has_default] without self/cls. Do not edit: regenerate.",
        },
        "modules": result_modules,
        "classes": {q: ex.classes[q] for q in sorted(keep)},
        "functions": {q: ex.functions[q] for q in sorted(ex.functions) if q in used},
    }


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--wheel", help="the apache-flink wheel (default: /tmp/pyflink_dl)")
    p.add_argument("--out", default=DEFAULT_OUT)
    p.add_argument("--missing", action="store_true",
                   help="list what flowray lacks or gets wrong against the checked-in list")
    p.add_argument("--json", action="store_true", help="with --missing: as JSON entries")
    args = p.parse_args(argv)
    if args.missing:
        sys.path.insert(0, REPO)
        from tests.unit.api import conformance

        problems = conformance.check_all(include_listed=False)
        if args.json:
            print(json.dumps({p.key: p.message for p in problems}, indent=1, sort_keys=True))
        else:
            for pr in problems:
                print(f"{pr.key}: {pr.message}")
            print(f"{len(problems)} problem(s)", file=sys.stderr)
        return 0
    api = extract(_wheel(args.wheel))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(api, f, indent=1, sort_keys=True)
        f.write("\n")
    n_cls = len(api["classes"])
    n_meth = sum(len(c["methods"]) for c in api["classes"].values())
    print(f"wrote {args.out}: {len(api['modules'])} modules, {n_cls} classes, "
          f"{n_meth} methods", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
