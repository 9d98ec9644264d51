"""flowray against PyFlink 2.3's public API (``pyflink_api.json``, made by
``python tools/extract_pyflink_api.py``): every name importable from the same path under
``flowray``, methods with PyFlink's parameter names, and the explicit list of what is
deliberately missing (``not_implemented.json``) kept honest. No Ray."""

import inspect

import pytest

from tests.unit.api import conformance as C


def _by_kind(problems):
    return "\n".join(f"{p.key}: {p.message}" for p in problems)


def test_api_list_is_the_extracted_one():
    api = C.load_api()
    assert api["_header"]["pyflink_version"] == "2.3.0"
    assert api["_header"]["generated_by"].startswith("python tools/extract_pyflink_api.py")
    assert len(api["modules"]) >= 30 and len(api["classes"]) >= 100


def test_flowray_conforms_to_pyflink_api():
    """Every PyFlink name and method exists with PyFlink's parameters, or is listed in
    not_implemented.json (run ``tools/extract_pyflink_api.py --missing`` to see why not)."""
    problems = C.check_all(include_listed=True)
    assert not problems, "\n" + _by_kind(problems)


def test_stubs_raise_not_implemented_naming_method_and_alternative():
    listed = C.load_not_implemented()
    api = C.load_api()
    checked = 0
    for key, instead in listed["stubs"].items():
        cls_ref, meth = key.rsplit(".", 1)
        exports = [(m, n) for m, exp in api["modules"].items() for n, e in exp.items()
                   if e["ref"] == cls_ref]
        assert exports, f"{key}: class not in the API list"
        obj, err = C._lookup(*exports[0])
        assert err is None, err
        exc = C.call_stub(obj, meth)
        assert isinstance(exc, NotImplementedError), f"{key}: {exc!r}"
        assert meth in str(exc) and "instead" in str(exc), str(exc)
        assert instead, f"{key}: the list must say what to use instead"
        checked += 1
    assert checked == len(listed["stubs"]) > 0


def test_every_list_entry_has_a_reason():
    listed = C.load_not_implemented()
    for section in ("absent", "stubs", "differs"):
        for key, reason in listed[section].items():
            assert isinstance(reason, str) and len(reason) > 10, f"{section} {key}"


def test_coverage_numbers_are_reported(capsys):
    stats = C.Stats()
    C.check_all(include_listed=False, stats=stats)
    with capsys.disabled():
        print(f"\nPyFlink API: {stats.names_ok}/{stats.names_total} names, "
              f"{stats.methods_ok}/{stats.methods_total} methods implemented, "
              f"{stats.stubs} methods raise NotImplementedError")
    assert stats.names_ok > 0 and stats.methods_ok > 0


@pytest.mark.parametrize("call", [
    lambda env: env.set_runtime_mode(execution_mode=__import__(
        "flowray.datastream", fromlist=["RuntimeExecutionMode"]).RuntimeExecutionMode.BATCH),
])
def test_keyword_calls_with_pyflink_names(call):
    from flowray.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    call(env)
    assert env.get_configuration().get_string("execution.runtime-mode") == "BATCH"
    params = inspect.signature(env.from_collection([1]).execute_and_collect).parameters
    assert list(params)[:2] == ["job_execution_name", "limit"]
