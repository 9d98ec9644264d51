"""The RocksDB keyed-state backend (rocksdict): state on local disk, not on the Python heap.

Layout (docs/design.md, "Key groups and state"): one column family per state name (``"state/<name>"``); a
RocksDB key is the key group as 2 big-endian bytes followed by the key's stable byte
encoding (:func:`encode_key`), so the keys of one key group -- and of any key-group range --
are a contiguous key range (iteration by key group and rescaling are range scans). Values
are stored by :mod:`flowray.state.value_codec` (msgpack for plain scalars and flat tuples of
them, else a pickle, cloudpickle fallback): a value state holds its value, a list state one list, a map state
one dict per key (each ``put`` rewrites the key's whole map), a reducing state the reduced
value, an aggregating state the accumulator. Reads return copies: mutating an object
obtained from a state does not change the state (unlike the heap backend; write it back
with ``update``/``put``). ``KeyedReduceOperator`` reads and writes one input batch at a
time through :meth:`~flowray.state.rocksdb.backend.RocksDBKeyedStateBackend.value_accessor`
and its write-behind cache (:mod:`flowray.state.rocksdb.value_accessor`).

Keys are compared by their encoding: ``1``, ``1.0`` and ``True`` are three different keys
here although they are one key in the heap backend (``-0.0`` is stored as ``0.0``). Keys of
types other than ``None``/``bool``/``int``/``float``/``str``/``bytes``/plain tuples of these
are pickled and must pickle deterministically (equal keys, equal bytes).

Checkpoints are full snapshots: the synchronous part creates a RocksDB checkpoint (hard
links to the SST files, after a memtable flush) under ``working_dir``; the asynchronous part
opens it read-only, streams it in key order -- key group by key group, every state's
entries of a group before the next group -- into the portable keyed-state format
(``flowray-keyed-v2``, :mod:`flowray.state.full_snapshot`: parts of about
``snapshot_part_bytes`` and an index of each key group's offsets; never the whole database
in memory), and deletes it. :meth:`RocksDBKeyedStateBackend.restore` reads that format and
the heap backend's ``flowray-heap-v1`` (which RocksDB wrote before v2) part by part, only the
parts holding its key groups, so state moves freely between the heap and the RocksDB
backend.

With ``incremental=True`` checkpoints are incremental (Flink's incremental RocksDB
checkpoints, docs/design.md): the synchronous part flushes and creates the RocksDB
checkpoint ``working_dir/snapshots/chk-<id>`` (hard links); the asynchronous part
(:class:`RocksDBIncrementalSnapshotWriter`) uploads each ``.sst`` file that the last
*confirmed* checkpoint did not upload to a unique path ``<job root>/shared/<vertex>-<i>-<sst>-
<uuid8>`` and only references the others; every other file (``MANIFEST-*``, ``CURRENT``,
``OPTIONS-*``, ...) is private and uploaded each time under ``<path>.private/<name>``. It
returns an :class:`~flowray.state.snapshot.IncrementalKeyedStateHandle` and deletes the
local checkpoint directory. A checkpoint becomes the confirmed base only through
:meth:`RocksDBKeyedStateBackend.notify_checkpoint_complete`, which the task must call when
the JobMaster reports the checkpoint complete; files of unconfirmed checkpoints are uploaded
again under new unique names. Incremental handles can only be restored by this backend.

>>> import tempfile
>>> from flowray.state.rocksdb.backend import RocksDBKeyedStateBackend
>>> from flowray.state.rocksdb.layout import decode_key, encode_key
>>> from flowray.state.descriptors import ValueStateDescriptor
>>> from flowray.state.key_groups import KeyGroupRange
>>> backend = RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, tempfile.mkdtemp())
>>> total = backend.get_partitioned_state(ValueStateDescriptor("total"))
>>> backend.set_current_key("a"); total.update(3)
>>> backend.set_current_key("b"); total.value() is None
True
>>> backend.set_current_key("a"); total.value()
3
>>> sorted(backend.get_keys("total"))
['a']
>>> backend.dispose()
>>> decode_key(encode_key(("user", 7, None, b"x", 2.5)))
('user', 7, None, b'x', 2.5)
"""
