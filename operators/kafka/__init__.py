"""Kafka connector internals: offsets (``offsets``), the split-based source (``source``),
the exactly-once write-ahead-log sink (``sink``) and what they share (``client``). The
public API is ``flowray.datastream.connectors.kafka``."""
