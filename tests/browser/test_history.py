"""An ended job on Ray is archived by its job master (jobmanager.archive.fs.dir) and the
history server (what ``flowray history`` runs) serves it with the same pages: the job list
shows it FINISHED, its graph draws its vertices, and its metrics are its final ones (the
source's numRecordsOut is every record it emitted)."""

from __future__ import annotations

import json
import urllib.request

from flowray import Configuration, StreamExecutionEnvironment
from flowray.common.options import ports_of
from flowray.runtime.rest.history import HistoryServer
from tests.support.web_ui import WebUIPage

N = 5_000


def test_an_ended_job_is_served_from_its_archive(ray_session, browser, tmp_path):
    archive = tmp_path / "completed-jobs"
    env = StreamExecutionEnvironment.get_execution_environment(Configuration({
        "jobmanager.archive.fs.dir": str(archive), "rest.port": "0"}))
    env.set_parallelism(2)
    (env.from_collection(list(range(N))).name("numbers")
     .map(lambda x: x * 2).name("double").key_by(lambda x: x % 7)
     .reduce(lambda a, b: a + b).name("sum").add_sink(lambda v: None))
    result = env.execute("archived")
    job_id = result.get_job_id()
    assert [p.name for p in archive.iterdir()] == [job_id]   # written before execute returned

    server = HistoryServer([str(archive)], "127.0.0.1", ports_of("0"), 60_000).start()
    try:
        def get(path):
            with urllib.request.urlopen(server.url + path, timeout=10) as resp:
                return json.loads(resp.read())
        job = get(f"/jobs/{job_id}")
        assert job["state"] == "FINISHED" and job["name"] == "archived"
        source = next(v for v in job["vertices"] if "numbers" in v["name"])
        out = get(f"/jobs/{job_id}/vertices/{source['id']}/subtasks/metrics"
                  f"?get=numRecordsOut")
        assert out[0]["sum"] == N

        page = WebUIPage(browser, server.url).open()
        assert "flowray history" in browser.title
        row = page.texts("#job-list .job-row")[0]
        assert "archived" in row and "FINISHED" in row
        names = page.wait_for(lambda d: page.texts("#job-graph g.vertex"), "the graph")
        assert len(names) == len(job["vertices"])
        assert any("numbers" in n for n in names) and any("sum" in n for n in names)
        assert set(page.attribute_of("#job-graph g.vertex", "data-level")) == {"ended"}
        page.screenshot(tmp_path, "history-graph")
        page.show_tab("checkpoints")
        page.show_tab("config")
        assert "jobmanager.archive.fs.dir" in " ".join(page.texts("#job-config td"))
    finally:
        server.close()
