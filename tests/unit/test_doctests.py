"""Every docstring example in the pure modules runs (no Ray)."""

import doctest
import importlib

import pytest

MODULES = [
    "flowray", "flowray.state.key_groups", "flowray.state.descriptors", "flowray.state.heap",
    "flowray.runtime.config", "flowray.runtime.clock", "flowray.runtime.channels",
    "flowray.runtime.watermarks", "flowray.runtime.barriers", "flowray.runtime.scheduler", "flowray.runtime.api",
    "flowray.operators.functions", "flowray.common.types", "flowray.operators.keyed", "flowray.operators.sources",
    "flowray.runtime.restart",
    "flowray.runtime.blocking",
    "flowray.operators.testing", "flowray.operators.file_source",
    "flowray.state.operator_state",
    "flowray.operators.file_sink", "flowray.common.serialization",
    "flowray.datastream.connectors.file_system",
    "flowray.runtime.checkpoint_coordinator", "flowray.runtime.checkpoint_storage", "flowray.runtime.checkpoints",
    "flowray.runtime.checkpoint_stats", "flowray.runtime.checkpoint_config", "flowray.state.snapshot", "flowray.state.backends",
    "flowray.operators.testing_sinks", "flowray.operators.two_phase_commit",
    "flowray.runtime.failover", "flowray.runtime.testing",
    "flowray.state.rocksdb",
    "flowray.runtime.shared_registry", "flowray.runtime.shared_state",
    "flowray.runtime.spark_session", "flowray.operators.block_source",
    "flowray.operators.parquet_sink", "flowray.datastream.connectors.spark",
    "flowray.operators.testing_functions",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
