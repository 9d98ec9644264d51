"""``flowray.datastream.formats``: record formats for connectors, as
``pyflink.datastream.formats`` (``json``, ``csv``, ``avro``)."""
