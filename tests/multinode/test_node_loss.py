"""Losing a node mid-job on a 3-node Ray cluster in one machine (issue 14): tasks are spread
over the nodes (TCP channels between them), a worker node hosting tasks is removed, and
the job recovers with its committed output exactly once; then a BATCH job loses a node
running its second stage and finishes without re-running the first (its partitions are
on storage every node sees). The cluster runs in a process of
its own (its own Ray temp folder), apart from the test session's shared local Ray."""

import json
import os
import subprocess
import sys
import tempfile

import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "node_loss_job.py")


@pytest.mark.timeout(600)
def test_a_node_lost_mid_job_recovers_exactly_once(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="frmn", dir="/tmp")  # unix socket paths stay short
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_ADDRESS": ""}
    env.pop("RAY_ADDRESS")
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=540)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout[-3000:], proc.stderr[-6000:])
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["nodes_with_tasks"] >= 2, result      # spread: channels cross nodes
    assert result["tasks_on_victim"] >= 1, result
    assert result["restarts"] + result["job_master_restarts"] >= 1, result
    assert result["exactly_once"], result
    assert result["pending"] == 0, result
    # the same job with a plain checkpoint path not declared shared never started
    assert "execution.checkpointing.dir" in result["refused_local_checkpoints"], result
    assert "3 nodes" in result["refused_local_checkpoints"], result
    # BATCH: a node running second-stage tasks lost after the first stage finished
    batch = result["batch"]
    assert batch["victim_consumers"] >= 1, batch
    assert batch["restarts"] >= 1 and batch["counts_right"], batch
    assert batch["producer_runs"] == ["0", "1", "2"], batch  # partitions survived
    assert batch["committed"] == 7, batch  # one final count per word, once each
