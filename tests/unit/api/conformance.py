"""Checks flowray against PyFlink's public API (``pyflink_api.json``) and the explicit list of
what flowray deliberately lacks (``not_implemented.json``). Used by
``test_pyflink_api_conformance.py`` and ``tools/extract_pyflink_api.py --missing``.

Keys: a name is ``"pyflink.module:Name"`` (or the defining class path
``"pyflink.module.Class"``, which covers every module exporting it); a method or class
attribute is ``"<defining class path>.<member>"``.

``not_implemented.json`` has ``"absent"`` (key -> why flowray lacks it), ``"stubs"``
(method key -> what to use instead; the method exists and raises ``NotImplementedError``)
and ``"differs"`` (method key -> how and why flowray's parameters deliberately differ; the
entry goes stale once they match). An absent entry whose reason starts with
``"in progress"`` is work another change is landing: it is skipped, not checked for
staleness. An absent ``__init__`` means PyFlink's constructor wraps a Java object.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Problem", "Stats", "check_all", "load_api", "load_not_implemented",
           "call_stub", "IN_PROGRESS"]

HERE = os.path.dirname(os.path.abspath(__file__))
IN_PROGRESS = "in progress"


@dataclass(frozen=True)
class Problem:
    key: str
    message: str


@dataclass
class Stats:
    names_total: int = 0
    names_ok: int = 0
    methods_total: int = 0
    methods_ok: int = 0
    stubs: int = 0


def load_api() -> Dict[str, Any]:
    with open(os.path.join(HERE, "pyflink_api.json"), encoding="utf-8") as f:
        return json.load(f)


def load_not_implemented() -> Dict[str, Dict[str, str]]:
    with open(os.path.join(HERE, "not_implemented.json"), encoding="utf-8") as f:
        data = json.load(f)
    return {"absent": data.get("absent", {}), "stubs": data.get("stubs", {}),
            "differs": data.get("differs", {})}


def flowray_module(pyflink_module: str) -> str:
    return "flowray" + pyflink_module[len("pyflink"):]


def _lookup(module: str, name: str) -> Tuple[Any, Optional[str]]:
    try:
        mod = importlib.import_module(flowray_module(module))
    except ImportError as e:
        return None, f"module {flowray_module(module)} does not import: {e}"
    if not hasattr(mod, name):
        return None, f"{flowray_module(module)} has no {name}"
    return getattr(mod, name), None


def _is_stub(fn: Any) -> bool:
    return bool(getattr(fn, "__flowray_not_implemented__", False))


def _static_member(cls: Any, name: str) -> Any:
    try:
        return inspect.getattr_static(cls, name)
    except AttributeError:
        return None


def _function_of(member: Any) -> Any:
    if isinstance(member, (staticmethod, classmethod)):
        return member.__func__
    if isinstance(member, property):
        return member.fget
    return member


def call_stub(cls: Any, name: str) -> BaseException:
    """Call ``cls.name`` with placeholder arguments; the exception it raised."""
    member = _static_member(cls, name)
    fn = _function_of(member)
    sig = inspect.signature(fn)
    args = [None for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    kwargs = {p.name: None for p in sig.parameters.values()
              if p.kind == p.KEYWORD_ONLY and p.default is p.empty}
    try:
        fn(*args, **kwargs)
    except BaseException as e:  # noqa: BLE001 - the caller judges it
        return e
    return AssertionError(f"{name} returned instead of raising NotImplementedError")


_POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")


def _signature_problem(member_name: str, expected: Dict[str, Any], member: Any,
                       cls: Any) -> Optional[str]:
    kind = expected["kind"]
    if kind == "property":
        if not isinstance(member, property):
            return "should be a property"
        return None
    if isinstance(member, property):
        return "is a property; PyFlink's is a method"
    if kind == "staticmethod" and not isinstance(member, staticmethod):
        return "should be a staticmethod"
    fn = cls if member_name == "__init__" else _function_of(member)
    if not callable(fn):
        return "is not callable"
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None  # builtins (e.g. Enum machinery): nothing to compare
    if member_name != "__init__" and not isinstance(member, staticmethod) and params and (
            isinstance(member, classmethod) or inspect.isfunction(member)):
        params = params[1:]
    exp = expected["params"]
    exp_pos = [p for p in exp if p[1] in _POSITIONAL]
    got_pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    has_var = any(p.kind == p.VAR_POSITIONAL for p in params)
    has_varkw = any(p.kind == p.VAR_KEYWORD for p in params)
    for i, (name, _, has_default) in enumerate(exp_pos):
        if i >= len(got_pos):
            if has_var and has_varkw:
                break  # (*args, **kwargs) takes anything
            return (f"parameters {[p.name for p in got_pos]} lack PyFlink's {name!r} "
                    f"(PyFlink: {[p[0] for p in exp_pos]})")
        if got_pos[i].name != name:
            return (f"positional parameters {[p.name for p in got_pos]} differ from PyFlink's "
                    f"{[p[0] for p in exp_pos]}")
        if has_default and got_pos[i].default is got_pos[i].empty:
            return f"parameter {name!r} needs a default, as in PyFlink"
    for p in got_pos[len(exp_pos):]:
        if p.default is p.empty:
            return f"extra parameter {p.name!r} must be optional (PyFlink has no such)"
    names = {p.name for p in params if p.kind != p.POSITIONAL_ONLY}
    for name, k, _ in exp:
        if k == "KEYWORD_ONLY" and name not in names and not has_varkw:
            return f"lacks keyword parameter {name!r}"
        if k == "VAR_POSITIONAL" and not has_var:
            return f"should take *{name}"
        if k == "VAR_KEYWORD" and not has_varkw:
            return f"should take **{name}"
    for p in params:
        if p.kind == p.KEYWORD_ONLY and p.default is p.empty and \
                not any(e[0] == p.name for e in exp):
            return f"extra keyword parameter {p.name!r} must be optional"
    return None


def _check_stub(key: str, cls: Any, member_name: str) -> Optional[str]:
    if _static_member(cls, member_name) is None:
        return "listed as a stub but missing"
    err = call_stub(cls, member_name)
    if not isinstance(err, NotImplementedError):
        return f"listed as a stub but does not raise NotImplementedError ({err!r})"
    msg = str(err)
    if member_name not in msg or "instead" not in msg:
        return f"NotImplementedError message must name {member_name!r} and say what to use " \
               f"instead: {msg!r}"
    return None


def check_all(include_listed: bool = True,
              stats: Optional[Stats] = None) -> List[Problem]:
    """Every deviation of flowray from the API list that the not-implemented list does not
    excuse; with ``include_listed`` also the list's stale or wrong entries."""
    api = load_api()
    listed = load_not_implemented()
    absent, stubs, differs = listed["absent"], listed["stubs"], listed["differs"]
    stats = stats if stats is not None else Stats()
    problems: Dict[str, str] = {}
    checked_classes: set = set()
    used_keys: set = set()

    def add(key: str, msg: str) -> None:
        problems.setdefault(key, msg)

    for module in sorted(api["modules"]):
        for name, entry in sorted(api["modules"][module].items()):
            key = f"{module}:{name}"
            ref = entry["ref"]
            stats.names_total += 1
            excuse = key if key in absent else (ref if ref in absent else None)
            obj, err = _lookup(module, name)
            if excuse is not None:
                used_keys.add(excuse)
                if include_listed and err is None and \
                        not absent[excuse].startswith(IN_PROGRESS):
                    add(key, f"listed as absent ({absent[excuse]!r}) but "
                             f"{flowray_module(module)}.{name} exists: drop the entry")
                continue
            if err is not None:
                add(key, err)
                continue
            stats.names_ok += 1
            if entry["kind"] != "class" or (ref, id(obj)) in checked_classes:
                continue
            checked_classes.add((ref, id(obj)))
            info = api["classes"][ref]
            if not inspect.isclass(obj):
                add(key, f"{flowray_module(module)}.{name} should be a class")
                continue
            for meth, expected in info["methods"].items():
                mkey = f"{ref}.{meth}"
                if meth == "__init__":
                    if any(p[0].startswith("j_") for p in expected["params"]):
                        continue  # a Java object's wrapper: not API
                stats.methods_total += 1
                member = _static_member(obj, meth)
                if mkey in stubs:
                    used_keys.add(mkey)
                    stats.stubs += 1
                    if include_listed:
                        msg = _check_stub(mkey, obj, meth)
                        if msg:
                            add(mkey, msg)
                    continue
                if mkey in absent:
                    used_keys.add(mkey)
                    if include_listed and member is not None and meth != "__init__" and \
                            not absent[mkey].startswith(IN_PROGRESS):
                        add(mkey, f"listed as absent ({absent[mkey]!r}) but exists: drop it")
                    continue
                if member is None:
                    add(mkey, "missing")
                    continue
                if _is_stub(_function_of(member)):
                    add(mkey, "raises NotImplementedError but is not in the stubs list")
                    continue
                msg = _signature_problem(meth, expected, member, obj)
                if mkey in differs:
                    used_keys.add(mkey)
                    if include_listed and msg is None:
                        add(mkey, f"listed as differing ({differs[mkey]!r}) but its "
                                  "parameters match PyFlink's: drop the entry")
                    continue
                if msg:
                    add(mkey, msg)
                    continue
                stats.methods_ok += 1
            for attr in info["attributes"]:
                akey = f"{ref}.{attr}"
                if akey in absent:
                    used_keys.add(akey)
                    continue
                if not hasattr(obj, attr):
                    add(akey, "missing class attribute")
    if include_listed:
        for k in sorted((set(absent) | set(stubs) | set(differs)) - used_keys):
            # keys under a class that is itself excused never get visited
            if not any(k.startswith(u + ".") or k.startswith(u.replace(":", ".") + ".")
                       for u in used_keys if u in absent):
                add(k, "entry matches nothing in pyflink_api.json: drop it")
    return [Problem(k, problems[k]) for k in sorted(problems)]
