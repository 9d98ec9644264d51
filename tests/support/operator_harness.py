"""A harness around one operator (or a chain of them), as Flink's operator test harnesses:
a manual clock behind the ProcessingTimeService, a heap or RocksDB keyed backend, outputs
that keep everything (main and side outputs by tag), snapshots of the keyed state written
to files, and restore into a fresh copy of the operator (optionally another key-group
range, to test redistribution).

>>> from flowray.operators.basic import MapOperator
>>> h = OperatorHarness(MapOperator(lambda x: x * 2))
>>> h.process([1, 2], timestamps=[5, None]); h.watermark(7)
>>> h.records, h.timestamps, h.watermarks
([2, 4], [5, None], [7])
"""

import itertools
import os
import tempfile

import cloudpickle

from flowray.common.clock import ManualClock
from flowray.operators.base import (
    ChainedOutput,
    CollectingOutput,
    OperatorContext,
    ProcessingTimeService,
)
from flowray.state.heap_backend import HeapKeyedStateBackend
from flowray.state.key_groups import KeyGroupRange, assign_to_key_group

MAXP = 128
FULL = KeyGroupRange(0, MAXP - 1)
LOWER, UPPER = KeyGroupRange(0, 63), KeyGroupRange(64, 127)
BACKENDS = ["heap", "rocksdb"]

_snapshot_ids = itertools.count(1)  # unique snapshot folders within one storage

__all__ = ["MAXP", "FULL", "LOWER", "UPPER", "BACKENDS", "FileStorage", "OrderedOutput",
           "OperatorHarness", "Harnesses", "keys_in"]


def keys_in(kgr, n, prefix="k"):
    """``n`` string keys whose key groups lie in ``kgr`` (for redistribution tests)."""
    out = []
    for i in range(100_000):
        k = f"{prefix}{i}"
        if assign_to_key_group(k, MAXP) in kgr:
            out.append(k)
            if len(out) == n:
                return out
    raise AssertionError("not enough keys")


class FileStorage:
    """Snapshot files under ``root``: ``write_file(path, data) -> size`` and ``read(path)``;
    a path is written once (a checkpoint never overwrites a file)."""

    def __init__(self, root=None):
        self._root = None if root is None else str(root)

    @property
    def root(self):
        if self._root is None:  # a temporary folder, made on first use
            self._root = tempfile.mkdtemp(prefix="harness-")
        return self._root

    def write_file(self, path, data):
        full = os.path.join(self.root, path)
        assert not os.path.exists(full), f"overwrote {path}"
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(bytes(data))
        return len(data)

    def read(self, path):
        with open(os.path.join(self.root, path), "rb") as f:
            return f.read()


class OrderedOutput(CollectingOutput):
    """A CollectingOutput that also keeps the order of everything in ``events``:
    ``("records", records, timestamps)``, ``("watermark", ts)``, ``("status", idle)``."""

    def __init__(self):
        super().__init__()
        self.events = []

    def emit(self, records, timestamps=None):
        super().emit(records, timestamps)
        self.events.append(("records", list(records),
                            None if timestamps is None else list(timestamps)))

    def emit_watermark(self, timestamp):
        super().emit_watermark(timestamp)
        self.events.append(("watermark", timestamp))

    def emit_watermark_status(self, idle):
        super().emit_watermark_status(idle)
        self.events.append(("status", idle))


def _make_backend(kind, key_group_range, working_dir):
    if kind == "heap":
        return HeapKeyedStateBackend(key_group_range, MAXP)
    from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
    return RocksDBKeyedStateBackend(key_group_range, MAXP, working_dir)


class BackendFactory:
    """Makes keyed backends of one kind (``"heap"`` or ``"rocksdb"``) over ``tmp_path``;
    :meth:`close` disposes of every backend it made."""

    def __init__(self, kind, tmp_path):
        self.kind, self.tmp_path, self.created = kind, tmp_path, []

    def __call__(self, key_group_range=FULL):
        b = _make_backend(self.kind, key_group_range,
                          self.tmp_path / f"rocks-{len(self.created)}")
        self.created.append(b)
        return b

    def close(self):
        for b in self.created:
            b.dispose()


class OperatorHarness:
    """One operator, or a chain ``[head, ..., tail]`` (each feeding the next), set up and
    opened with an :class:`OperatorContext` of its own.

    ``records``/``timestamps``/``watermarks``/``statuses``/``events`` are the tail's main
    output; ``side(tag, at)`` the side output ``tag`` of the chain's operator ``at``.
    """

    def __init__(self, operator, *, backend="heap", key_group_range=FULL, clock_ms=0,
                 side_tags=(), batch_execution=False, auto_watermark_interval_ms=200,
                 storage=None, working_dir=None, restore_from=None, keyed=None,
                 metrics=None):
        chain = list(operator) if isinstance(operator, (list, tuple)) else [operator]
        #: the pickled definitions, taken before setup (restore builds fresh copies)
        self.definition = cloudpickle.dumps(chain)
        self.chain = chain
        self.operator = chain[0]
        self.backend_kind = backend
        self.clock = ManualClock(clock_ms)
        self.processing_time_service = ProcessingTimeService(self.clock)
        self.storage = storage or FileStorage()
        self.side_tags = tuple(side_tags)
        self.batch_execution = batch_execution
        self.auto_watermark_interval_ms = auto_watermark_interval_ms
        if keyed is None:
            keyed = any(op.is_keyed for op in chain)
        if keyed and backend != "heap" and working_dir is None:
            working_dir = tempfile.mkdtemp(prefix="harness-rocks-")  # dispose() removes it
        self.backend = _make_backend(backend, key_group_range, working_dir) if keyed else None
        if self.backend is not None:
            self.backend.ttl_clock = self.clock  # state TTL runs on the manual clock
        if restore_from is not None and self.backend is not None:
            self.backend.restore(restore_from, self.storage.read)
        self.ctx = OperatorContext(
            task_name="harness", subtask_index=0, parallelism=1, max_parallelism=MAXP,
            key_group_range=key_group_range,
            processing_time_service=self.processing_time_service,
            keyed_backend=self.backend, batch_execution=batch_execution,
            auto_watermark_interval_ms=auto_watermark_interval_ms, metrics=metrics)
        self.output = OrderedOutput()
        #: per operator of the chain, its side outputs by tag name
        self.side_outputs_by_operator = [
            {t.tag_id if hasattr(t, "tag_id") else t: OrderedOutput() for t in self.side_tags}
            for _ in chain]
        self.side_outputs = self.side_outputs_by_operator[0]
        outputs = [ChainedOutput(op) for op in chain[1:]] + [self.output]
        for op, out, side in zip(chain, outputs, self.side_outputs_by_operator):
            op.setup(self.ctx, out, side)
        for op in reversed(chain):  # the tail first, as a task opens its chain
            op.open()
        self._checkpoint_id = 0

    # -- input ---------------------------------------------------------------------------
    def process(self, records, timestamps=None, key_groups=None, input_index=0):
        records = list(records)
        timestamps = None if timestamps is None else list(timestamps)
        if input_index == 0:
            self.operator.process_batch(records, key_groups, timestamps)
        else:
            self.operator.process_batch2(records, key_groups, timestamps)

    def process2(self, records, timestamps=None, key_groups=None):
        self.process(records, timestamps, key_groups, input_index=1)

    def watermark(self, timestamp, input_index=0):
        self.operator.process_watermark(timestamp, input_index)

    def watermark_status(self, idle, input_index=0):
        self.operator.process_watermark_status(idle, input_index)

    def advance_clock(self, ms):
        """Move processing time on by ``ms`` and fire the processing-time callbacks due."""
        self.clock.advance(ms)
        return self.fire_due()

    def set_clock(self, now_ms):
        self.clock.set(now_ms)
        return self.fire_due()

    def fire_due(self):
        """What the task loop does between batches: fire the callbacks due now."""
        return self.processing_time_service.fire_due()

    def end_input(self):
        """End of a bounded input: end_input + finish along the chain (head first)."""
        for op in self.chain:
            op.end_input()
            op.finish()

    # -- output --------------------------------------------------------------------------
    @property
    def records(self):
        return self.output.records

    @property
    def timestamps(self):
        return self.output.timestamps

    @property
    def watermarks(self):
        return self.output.watermarks

    @property
    def statuses(self):
        return self.output.statuses

    @property
    def events(self):
        """The main output in the order it was emitted (records, watermarks, statuses)."""
        return self.output.events

    def stamped(self):
        """The main output as ``(record, timestamp)`` pairs."""
        return list(zip(self.output.records, self.output.timestamps))

    def side(self, tag, at=0):
        """The side output ``tag`` of the chain's operator ``at`` (the head by default)."""
        return self.side_outputs_by_operator[at][tag.tag_id if hasattr(tag, "tag_id") else tag]

    def clear_output(self):
        sides = [o for by_tag in self.side_outputs_by_operator for o in by_tag.values()]
        for out in [self.output, *sides]:
            out.records.clear()
            out.timestamps.clear()
            out.watermarks.clear()
            out.statuses.clear()
            out.events.clear()

    # -- checkpoints ---------------------------------------------------------------------
    def snapshot(self):
        """The keyed backend's snapshot written to this harness's storage: the handles to
        restore from (a list, as a task gets one handle per former subtask)."""
        self._checkpoint_id += 1
        cid = self._checkpoint_id
        handle = self.backend.snapshot(cid).write(
            self.storage.write_file, f"chk-{cid}/snapshot-{next(_snapshot_ids)}/keyed")
        return [handle]

    def restore_into_new_harness(self, handles, key_group_range=FULL, backend=None,
                                 clock_ms=None, working_dir=None, **overrides):
        """A fresh copy of the operator (chain) as it was defined, its backend restored from
        ``handles`` (only the key groups of ``key_group_range``), opened; its clock starts
        at ``clock_ms`` (default: this harness's time)."""
        settings = dict(side_tags=self.side_tags, batch_execution=self.batch_execution,
                        auto_watermark_interval_ms=self.auto_watermark_interval_ms)
        settings.update(overrides)
        chain = cloudpickle.loads(self.definition)
        return OperatorHarness(
            chain if len(chain) > 1 else chain[0], backend=backend or self.backend_kind,
            key_group_range=key_group_range,
            clock_ms=self.clock.now_ms() if clock_ms is None else clock_ms,
            storage=self.storage, working_dir=working_dir, restore_from=handles,
            **settings)

    def close(self):
        for op in self.chain:
            op.close()

    def dispose(self):
        if self.backend is not None:
            self.backend.dispose()


class Harnesses:
    """Creates harnesses on one backend kind under ``tmp_path`` and disposes of their
    backends at the end of the test (use from a fixture)."""

    def __init__(self, kind, tmp_path):
        self.kind = kind
        self.tmp_path = tmp_path
        self.storage = FileStorage(tmp_path / "checkpoints")
        self.created = []

    def _dir(self):
        return str(self.tmp_path / f"rocks-{len(self.created)}")

    def __call__(self, operator, **kwargs):
        kwargs.setdefault("backend", self.kind)
        h = OperatorHarness(operator, storage=self.storage, working_dir=self._dir(), **kwargs)
        self.created.append(h)
        return h

    def restore(self, harness, handles, **kwargs):
        h = harness.restore_into_new_harness(handles, working_dir=self._dir(), **kwargs)
        self.created.append(h)
        return h

    def close(self):
        for h in self.created:
            h.dispose()
