"""The RocksDB keyed-state backend (rocksdict): state on local disk, not on the Python heap.

Layout (docs/internals/design.md, "Key groups and state"): one column family per state name (``"state/<name>"``); a
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

Checkpoints are in RocksDB's native format (Flink's checkpoints of the RocksDB backend, and
its native snapshots): the synchronous part flushes the memtables and creates the RocksDB
checkpoint ``working_dir/snapshots/chk-<id>`` (hard links to the SST files); the
asynchronous part
(:class:`~flowray.state.rocksdb.snapshot_writers.RocksDBNativeSnapshotWriter`) uploads
its files as they are, returns an
:class:`~flowray.state.snapshot.IncrementalKeyedStateHandle` and deletes the directory.

- A full checkpoint (the default) uploads every file as a private file of the checkpoint,
  ``<path>.private/<name>``: self-contained, referenced by no other checkpoint.
- With ``incremental=True`` (Flink's incremental RocksDB checkpoints, docs/internals/design.md) each
  ``.sst`` file that the last *confirmed* checkpoint did not upload goes to a unique path
  ``<job root>/shared/<vertex>-<i>-<sst>-<uuid8>`` and the others are only referenced;
  every other file (``MANIFEST-*``, ``CURRENT``, ``OPTIONS-*``, ...) is private and uploaded
  each time. A checkpoint becomes the confirmed base only through
  :meth:`RocksDBKeyedStateBackend.notify_checkpoint_complete`, which the task must call when
  the JobMaster reports the checkpoint complete; files of unconfirmed checkpoints are
  uploaded again under new unique names.

A restore of one such checkpoint of exactly the backend's key groups opens its files as the
database; otherwise (rescaling) the backend's key groups are copied out of each
(:mod:`flowray.state.rocksdb.native_snapshot`, which the heap backend reads them with too).

Savepoints are canonical: the asynchronous part opens the RocksDB checkpoint read-only and
streams it in key order -- key group by key group, every state's entries of a group before
the next group -- into the portable keyed-state format (``flowray-keyed-v3``,
:mod:`flowray.state.full_snapshot`: parts of about ``snapshot_part_bytes`` and an index of
each key group's offsets; never the whole database in memory). Both backends read every
version of that format, so state moves between the heap and the RocksDB backend through
savepoints (and checkpoints, which the heap backend also reads). State TTL's
``cleanup_full_snapshot`` drops expired entries from savepoints only: a native checkpoint
holds the files as they are (as Flink documents for incremental checkpoints).

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
