"""``flowray.datastream.formats``: record formats for connectors, as
``pyflink.datastream.formats`` (``json``, ``csv``, ``avro``).

Each module holds a serialization schema (a record to the bytes of one message) and a
deserialization schema (the bytes of one message to a record) that read and write what
Flink's Java format of the same name reads and writes, in Python:

- :mod:`~flowray.datastream.formats.json`: ``JsonRowSerializationSchema``,
  ``JsonRowDeserializationSchema``;
- :mod:`~flowray.datastream.formats.csv`: ``CsvRowSerializationSchema``,
  ``CsvRowDeserializationSchema``, ``CsvSchema``;
- :mod:`~flowray.datastream.formats.avro`: ``AvroRowSerializationSchema``,
  ``AvroRowDeserializationSchema``, ``AvroSchema``, ``GenericRecordAvroTypeInfo``.

As in PyFlink, the package itself exports nothing; the row schemas are also importable from
``flowray.common`` (as from ``pyflink.common``). Schemas are picklable and have
``serialize_batch``/``deserialize_batch`` for connectors. PyFlink's ``orc`` and ``parquet``
modules (Java bulk file formats) are not provided.

>>> from flowray.datastream.formats.json import JsonRowSerializationSchema
>>> from flowray.common import JsonRowSerializationSchema as same
>>> same is JsonRowSerializationSchema
True
"""

__all__: list = []
