"""``flowray.datastream.state_backend``: as ``pyflink.datastream.state_backend``."""

from flowray.state.state_backend import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend"]
