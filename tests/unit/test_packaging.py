"""What an installed flowray declares: its version (defined once, in flowray/__init__.py,
and read from there by pyproject), the typing marker, and the web UI's files."""

import importlib.metadata
import os

import flowray


def test_the_installed_version_is_the_packages():
    assert importlib.metadata.version("flowray") == flowray.__version__


def test_the_package_is_marked_typed_and_ships_the_web_ui():
    from flowray.runtime.rest.web_ui import WEB_DIR
    assert os.path.isfile(os.path.join(os.path.dirname(flowray.__file__), "py.typed"))
    assert {"index.html", "app.js", "app.css"} <= set(os.listdir(WEB_DIR))


def test_the_package_data_in_pyproject_names_those_files():
    import tomllib
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)
    setuptools = project["tool"]["setuptools"]
    assert "flowray.runtime.rest.web" in setuptools["packages"]
    assert setuptools["package-data"]["flowray"] == ["py.typed"]
    assert project["project"]["dynamic"] == ["version"]
    assert setuptools["dynamic"]["version"] == {"attr": "flowray.__version__"}
    assert project["project"]["license"] == "Apache-2.0"


def test_runtime_dependencies_are_ranges_and_the_constraints_pin_a_version_inside_each():
    """pyproject declares what flowray supports (ranges, so it installs beside a user's
    own packages); constraints.txt is the exact set the Makefile installs and the suite
    ran on: one pinned version per dependency, inside its range."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        requirements = [Requirement(r) for r in tomllib.load(f)["project"]["dependencies"]]
    pins = {}
    with open(os.path.join(root, "constraints.txt")) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line:
                name, version = line.split("==")
                pins[canonicalize_name(name)] = version
    for req in requirements:
        ops = {spec.operator for spec in req.specifier}
        assert ops == {">=", "<"}, f"{req}: a range from a lower to an upper bound"
        pinned = pins.get(canonicalize_name(req.name))
        assert pinned is not None, f"{req.name} is not in constraints.txt"
        assert req.specifier.contains(pinned), f"{req.name}=={pinned} is outside {req}"
