"""flowray's web UI in a real browser (Debian's Chromium, headless) for a job running on
Ray: the graph's vertices, the back-pressured vertex in front of a slow operator, the
checkpoint count growing, a vertex's subtasks, and the exception behind a restart after a
task is killed. Each tab's screenshot is saved under the test's temp dir. The waits are on
what the page shows (it refreshes itself every 2 s; heartbeats carry the metrics each 1 s).
"""

from __future__ import annotations

import contextlib
import time

from flowray.testing.faults import FaultInjector
from tests.support.environments import endless_numbers_through
from tests.support.web_ui import WebUIPage

TABS = ("graph", "checkpoints", "exceptions", "watermarks", "config")


def _slow(x):
    time.sleep(0.005)
    return x


@contextlib.contextmanager
def _running_job(name: str):
    env = endless_numbers_through(_slow, "slow", **{
        "heartbeat.interval": "1 s", "execution.checkpointing.interval": "500 ms",
        "rest.port": "0"})  # (any free port)
    client = env.execute_async(name)
    try:
        yield client
    finally:
        client.cancel()
        with contextlib.suppress(Exception):
            client.wait(timeout_s=60)


def _vertex_levels(page: WebUIPage):
    """Vertex name -> its colour level on the graph (idle, busy, backpressured, none)."""
    names = [t.split("\n")[0] for t in page.texts("#job-graph g.vertex")]
    return dict(zip(names, page.attribute_of("#job-graph g.vertex", "data-level")))


def _checkpoint_count(page: WebUIPage) -> int:
    texts = page.texts("#checkpoint-count")
    return int(texts[0]) if texts and texts[0].isdigit() else -1


def test_the_web_ui_shows_a_running_job(ray_session, browser, tmp_path):
    with _running_job("web-ui") as client, _running_job("neighbour") as neighbour:
        page = WebUIPage(browser, client.get_web_url()).open()
        assert "web-ui" in page.texts("#job-list .job-row")[0]
        assert page.texts("#job-list .restarts") == ["0"]
        # the other job on the cluster is listed with a link to its own web UI
        page.wait_for(lambda d: page.attribute_of("#cluster-jobs a.web-url", "href"),
                      "the other job of the cluster")
        assert [h.rstrip("/") for h in page.attribute_of("#cluster-jobs a.web-url", "href")
                ] == [neighbour.get_web_url()]
        assert "neighbour" in page.texts("#cluster-jobs .cluster-job-row")[0]

        levels = page.wait_for(lambda d: len(_vertex_levels(page)) == 3 and _vertex_levels(page),
                               "the job's three vertices")
        assert any(n.startswith("Source: numbers") for n in levels) and "slow" in levels, levels
        source = next(n for n in levels if n.startswith("Source"))
        page.wait_for(lambda d: _vertex_levels(page).get(source) == "backpressured",
                      "the source in front of the slow map back-pressured")
        assert _vertex_levels(page)["slow"] == "busy"   # the slow map: busy, not waiting
        page.screenshot(tmp_path, "graph")

        browser.find_elements("css selector", "#job-graph g.vertex")[0].click()
        page.wait_for(lambda d: d.find_elements("css selector", "#vertex-panel .subtask-row"),
                      "the clicked vertex's subtasks")
        metrics = page.texts("#vertex-metrics tbody td:first-child")
        assert {"numRecordsOut", "backPressuredTimeMsPerSecond"} <= set(metrics), metrics
        page.screenshot(tmp_path, "vertex")

        page.show_tab("checkpoints")
        first = page.wait_for(lambda d: _checkpoint_count(page) >= 1 and _checkpoint_count(page),
                              "a completed checkpoint")
        page.wait_for(lambda d: _checkpoint_count(page) > first, "the checkpoint count growing")
        assert page.texts("#checkpoint-history tr.COMPLETED")
        for tab in TABS[1:]:
            page.show_tab(tab)
            page.screenshot(tmp_path, tab)
        assert sorted(p.stem for p in tmp_path.glob("*.png")) == sorted(TABS + ("vertex",))


def test_the_exception_behind_a_restart_shows_with_its_cause(ray_session, browser, tmp_path):
    with _running_job("web-ui-kill") as client:
        page = WebUIPage(browser, client.get_web_url()).open()
        page.wait_for(lambda d: "busy" in _vertex_levels(page).values(),
                      "the slow map busy (every task running)")
        page.show_tab("exceptions")
        assert page.texts("#no-exceptions")
        injector = FaultInjector(client)
        injector.kill(injector.subtasks("slow")[0])

        entries = page.wait_for(lambda d: page.texts("#exceptions .exception"),
                                "the exception behind the restart")
        assert "slow (1/1)" in entries[0] and "TaskLost" in entries[0], entries
        cause = page.texts("#exceptions .root-cause")[0]
        assert "ActorDiedError" in cause or "died" in cause, cause
        page.screenshot(tmp_path, "exceptions")
        page.wait_for(lambda d: page.texts("#job-list .restarts") == ["1"]
                      and "RUNNING" in page.texts("#job-title")[0],
                      "one restart in the job list, and the job running again")
