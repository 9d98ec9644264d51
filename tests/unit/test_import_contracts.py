"""The layer contracts of ``.importlinter`` hold (import-linter, pinned in pyproject), and a
wrong import breaks them with a message that names it."""

from tests.support.import_contracts import import_cycles, lint_imports, original


def test_every_contract_is_kept(tmp_path):
    ok, report = lint_imports(tmp_path)
    assert ok, report
    assert "Contracts: 4 kept, 0 broken." in report, report


def test_an_upward_import_fails_and_is_named(tmp_path):
    # state is below the API: state importing flowray.datastream breaks the layers
    text = original("state/descriptors.py") + "\nimport flowray.datastream  # noqa\n"
    ok, report = lint_imports(tmp_path, edit={"state/descriptors.py": text})
    assert not ok
    assert "BROKEN" in report
    assert "flowray.state.descriptors -> flowray.datastream" in report, report


def test_the_core_importing_spark_fails(tmp_path):
    text = original("runtime/jobmaster/scheduler.py") + "\nimport pyspark  # noqa\n"
    ok, report = lint_imports(tmp_path, edit={"runtime/jobmaster/scheduler.py": text})
    assert not ok
    assert "flowray.runtime.jobmaster.scheduler -> pyspark" in report, report


def test_the_job_master_importing_the_task_loop_fails(tmp_path):
    text = original("runtime/jobmaster/failover.py") + \
        "\nfrom flowray.runtime.task import stream_task  # noqa\n"
    ok, report = lint_imports(tmp_path, edit={"runtime/jobmaster/failover.py": text})
    assert not ok
    assert "flowray.runtime.jobmaster.failover -> flowray.runtime.task.stream_task" in report, \
        report


def test_no_module_imports_itself_through_others(tmp_path):
    assert import_cycles(tmp_path) == []
