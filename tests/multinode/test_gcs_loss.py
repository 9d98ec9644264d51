"""Losing Ray's head GCS server mid-job (issue 31) on a 3-node Ray cluster in one machine
with GCS fault tolerance (an external Redis from Debian's redis-server, as Ray documents):
the GCS server is killed and started again while a keyed exactly-once job runs spread
over the nodes; the job goes on checkpointing, is still found by name, recovers from a
task killed after the GCS came back (new actors need the GCS's tables), and its committed
output is exactly once.
The cluster runs in a process of its own (its own Ray temp folder)."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "gcs_loss_job.py")


@pytest.mark.timeout(600)
def test_the_gcs_server_lost_and_restarted_mid_job_leaves_exactly_once_output(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="frgcs", dir="/tmp")  # unix socket paths stay short
    env = {**os.environ, "RAY_TMPDIR": ray_tmp}
    env.pop("RAY_ADDRESS", None)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=540)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout[-3000:], proc.stderr[-6000:])
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["nodes_with_tasks"] >= 2, result
    assert result["job_listed_after_gcs_restart"], result
    assert result["status"] == "FINISHED" and result["restarts"] >= 1, result
    assert result["checkpoints_after_gcs_restart"] >= result["checkpoints_before_gcs_loss"] + 3, \
        result
    assert result["exactly_once"], result
    assert result["pending"] == 0, result
