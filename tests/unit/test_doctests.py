"""Every docstring example in every flowray module runs (found by walking the package, not
listed by hand; examples that need Ray or Spark say so with a doctest skip)."""

import doctest
import importlib
import pkgutil

import pytest

import flowray
import flowray.operators
import flowray.runtime
import flowray.state

# flowray.runtime, .operators and .state live in their own top-level folders (pyproject's
# package-dir), so walking flowray's own folder does not reach them
_ROOTS = (flowray, flowray.runtime, flowray.operators, flowray.state)


def _all_modules():
    names = {root.__name__ for root in _ROOTS}
    for root in _ROOTS:
        for info in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
            names.add(info.name)
    return sorted(names)


MODULES = _all_modules()


def test_the_walk_finds_every_layer():
    for package in ("flowray.common", "flowray.state", "flowray.operators", "flowray.runtime",
                    "flowray.datastream", "flowray.spark", "flowray.testing"):
        assert any(m.startswith(package + ".") for m in MODULES), package


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
