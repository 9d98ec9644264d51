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


def test_connector_extras_are_ranges_pinned_in_the_constraints_too():
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    with open(os.path.join(root, "constraints.txt")) as f:
        pins = dict(line.split("#")[0].strip().split("==") for line in f
                    if line.split("#")[0].strip())
    pins = {canonicalize_name(k): v for k, v in pins.items()}
    from flowray.common.optional_deps import EXTRAS
    for module, (dist, extra) in EXTRAS.items():
        [req] = [Requirement(r) for r in extras[extra]]
        assert canonicalize_name(req.name) == canonicalize_name(dist)
        assert {s.operator for s in req.specifier} == {">=", "<"}
        assert req.specifier.contains(pins[canonicalize_name(dist)])
    assert "flowray[kafka,postgres,avro]" in extras["test"]   # the suite tests every connector


# a Python where the connector extras are not installed: their imports fail
NO_EXTRAS = """
import sys
class NoExtras:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("confluent_kafka", "psycopg", "fastavro"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoExtras())
"""


def test_the_core_runs_without_the_connector_extras_and_a_connector_names_its_extra():
    import subprocess
    import sys
    program = NO_EXTRAS + """
from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.optional_deps import MissingDependencyError
from flowray.datastream.connectors.jdbc import JdbcSink
from flowray.datastream.connectors.kafka import KafkaSource
from flowray.datastream.formats.avro import AvroRowSerializationSchema

env = StreamExecutionEnvironment.get_execution_environment(
    Configuration({"execution.target": "local"}))
print(sorted(env.from_collection([3, 1, 2]).map(lambda x: x * 10)
             .execute_and_collect(limit=3)))
for build in (lambda: KafkaSource.builder().set_bootstrap_servers("h:9092")
              .set_topics("t").build(),
              lambda: AvroRowSerializationSchema(avro_schema_string='"string"'),
              lambda: JdbcSink.sink("insert", None, None)):
    try:
        build()
    except MissingDependencyError as e:
        print(e)
"""
    p = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "[10, 20, 30]",
        "KafkaSource needs the Python package 'confluent-kafka', which is not installed: "
        "pip install 'flowray[kafka]'",
        "The Avro row format needs the Python package 'fastavro', which is not installed: "
        "pip install 'flowray[avro]'",
        "JdbcSink needs the Python package 'psycopg', which is not installed: "
        "pip install 'flowray[postgres]'",
    ]


def test_every_package_folder_is_in_the_wheel():
    """setuptools lists the packages by hand (runtime/, operators/ and state/ are mapped
    into flowray): a new subpackage left out of the list would be missing from a user's
    install, though the editable install of the tests finds it."""
    import tomllib
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {name: folder for name, folder in setuptools["package-dir"].items()}
    folders.setdefault("flowray", "flowray")
    found = set()
    for package, folder in folders.items():
        base = os.path.join(root, folder)
        for here, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                rel = os.path.relpath(here, base)
                found.add(package if rel == "." else
                          f"{package}.{rel.replace(os.sep, '.')}")
    assert found - listed == set(), "add these to [tool.setuptools] packages"
