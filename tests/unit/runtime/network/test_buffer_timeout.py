"""Flink's buffer timeout: when a partly filled channel batch goes out (RecordWriter with a
manual clock), and how a per-operator ``set_buffer_timeout`` reaches its output edges."""

import pytest

from flowray.common.options import buffer_timeout_ms
from flowray.common.configuration import Configuration
from flowray.runtime.graph.execution_graph import ExecutionGraph
from flowray.runtime.graph.job_graph import build_job_graph
from flowray.runtime.network.in_process import InProcessChannel
from flowray.runtime.network.partitioners import ForwardPartitioner, RecordWriter
from tests.support.environments import local_env, stream_graph_of


def writer(timeout_ms):
    ch = InProcessChannel("e/0->0", 1000)
    rw = RecordWriter(ForwardPartitioner(), [ch.writer], 0, batch_size=1000,
                      buffer_timeout_ms=timeout_ms)
    return rw, ch


def frames(ch):
    out = []
    while (f := ch.reader.poll()) is not None:
        out.append(f)
    return out


def test_a_partly_filled_batch_goes_out_once_it_waited_the_timeout():
    rw, ch = writer(5)
    rw.emit([1, 2], now_ms=100.0)
    rw.emit([3], now_ms=102.0)
    assert rw.flush_if_due(104.0) == pytest.approx(1.0)   # the oldest record waited 4 ms
    assert frames(ch) == []
    assert rw.flush_if_due(105.0) is None
    assert len(frames(ch)) == 1 and rw.pending_since_ms is None


def test_zero_sends_every_emitted_batch_at_once():
    rw, ch = writer(0)
    rw.emit([1], now_ms=0.0)
    rw.emit([2, 3], now_ms=0.0)
    assert len(frames(ch)) == 2 and rw.pending_since_ms is None


def test_minus_one_sends_only_full_batches_and_on_flush():
    rw, ch = writer(-1)
    rw.emit(list(range(10)), now_ms=0.0)
    assert rw.flush_if_due(10 ** 9) is None
    assert frames(ch) == []
    rw.emit(list(range(990)), now_ms=1.0)          # the batch is full: out
    assert len(frames(ch)) == 1
    rw.emit([1], now_ms=2.0)
    rw.flush()                                     # a barrier, a watermark stall, the end
    assert len(frames(ch)) == 1


def test_a_timeout_below_minus_one_is_refused():
    with pytest.raises(ValueError, match="-1"):
        writer(-2)


def test_the_job_setting_and_enabled_false():
    assert buffer_timeout_ms(Configuration()) == 100
    assert buffer_timeout_ms(Configuration({"execution.buffer-timeout.interval": "0"})) == 0
    assert buffer_timeout_ms(Configuration({"execution.buffer-timeout": "-1"})) == -1
    off = Configuration({"execution.buffer-timeout.interval": "5 ms",
                         "execution.buffer-timeout.enabled": "false"})
    assert buffer_timeout_ms(off) == -1


def test_set_buffer_timeout_reaches_the_operators_output_edges_only():
    env = local_env(2)
    (env.from_collection(list(range(10))).map(lambda x: x).set_buffer_timeout(5)
     .key_by(lambda x: x % 2).map(lambda x: x).rebalance().print())
    job_graph = build_job_graph(stream_graph_of(env))
    eg = ExecutionGraph(job_graph)
    timeouts = {e.id: e.buffer_timeout_ms for e in job_graph.edges.values()}
    # collection -> map (p=1 to 2), map -> key_by (5 ms), keyed map -> print
    assert sorted(timeouts.values(), key=str) == [5, None, None]
    for subtask in eg.subtasks():
        for spec in eg.output_edges(subtask):
            assert spec.buffer_timeout_ms == timeouts[spec.edge_id]
