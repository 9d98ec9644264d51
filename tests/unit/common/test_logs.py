"""flowray's logger: one line per event on stderr while the program has not configured
logging, and records that reach the logging the program configures, even when it does so
after flowray started logging (no propagate=False)."""

import logging

import pytest

import flowray.common.logs as logs


@pytest.fixture
def fresh_flowray_logger(monkeypatch):
    """A flowray logger as a new process has it, restored afterwards. Call it in the test
    body: it also takes pytest's capture handlers off the root logger (they are put on
    after fixtures run), so the root has none, as in a program that configured nothing."""
    log = logging.getLogger("flowray")
    saved = (list(log.handlers), log.level, log.propagate)
    monkeypatch.setattr(logs, "_configured", False)

    def fresh():
        monkeypatch.setattr(logging.getLogger(), "handlers", [])
        log.handlers[:] = []
        log.setLevel(logging.NOTSET)
        return log

    yield fresh
    log.handlers[:] = saved[0]
    log.setLevel(saved[1])
    log.propagate = saved[2]


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_unconfigured_programs_get_one_line_per_event_on_stderr(fresh_flowray_logger, capsys):
    fresh_flowray_logger()
    log = logs.configure_logging()
    logging.getLogger("flowray.runtime.x").info("job 'j' FINISHED")
    assert capsys.readouterr().err == "job 'j' FINISHED\n"
    assert log.propagate


def test_logging_configured_later_receives_the_records_once(fresh_flowray_logger, capsys):
    fresh_flowray_logger()
    logs.configure_logging()
    mine = _Collect()
    logging.getLogger().addHandler(mine)   # the program configures logging afterwards
    logging.getLogger("flowray.runtime.x").info("progress")
    assert mine.lines == ["progress"]
    assert capsys.readouterr().err == ""   # not printed a second time by flowray


def test_logging_configured_first_is_left_alone(fresh_flowray_logger):
    fresh_flowray_logger()
    mine = _Collect()
    logging.getLogger().addHandler(mine)
    log = logs.configure_logging()
    assert log.handlers == [] and log.level == logging.NOTSET
    logging.getLogger("flowray.x").warning("w")
    assert mine.lines == ["w"]
