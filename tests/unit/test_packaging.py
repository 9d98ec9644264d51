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
