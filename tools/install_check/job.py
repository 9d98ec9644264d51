"""The job the install check runs in the fresh venv (see check.py): it fails unless flowray
comes from that venv's site-packages, the other versions are the ones installed, and a
keyed job with checkpoints on RocksDB gives the right answer on an embedded local Ray."""

import os
import sys
import tempfile
from collections import Counter

import numpy
import pandas
import pyarrow

import flowray
from flowray import Configuration, StreamExecutionEnvironment

site = os.path.join(sys.prefix, "lib")
assert os.path.abspath(flowray.__file__).startswith(site), \
    f"flowray imported from {flowray.__file__}, not from the venv ({site})"
versions = {"numpy": numpy.__version__, "pyarrow": pyarrow.__version__,
            "pandas": pandas.__version__}
assert versions == {"numpy": "2.4.0", "pyarrow": "26.0.0", "pandas": "3.1.0"}, versions

words = [f"w{i % 7}" for i in range(5000)]
with tempfile.TemporaryDirectory() as checkpoints:
    config = Configuration({"parallelism.default": "2",
                            "state.backend.type": "rocksdb",
                            "execution.checkpointing.interval": "200 ms",
                            "execution.checkpointing.dir": checkpoints})
    env = StreamExecutionEnvironment.get_execution_environment(config)
    counts = (env.from_collection(words)
              .map(lambda w: (w, 1)).uid("pair")
              .key_by(lambda t: t[0])
              .reduce(lambda a, b: (a[0], a[1] + b[1])).uid("count"))
    final = {}
    for word, count in counts.execute_and_collect("install check"):
        final[word] = max(final.get(word, 0), count)
assert final == dict(Counter(words)), final
print(f"install check: flowray {flowray.__version__} from {os.path.dirname(flowray.__file__)} "
      f"with {', '.join(f'{k} {v}' for k, v in versions.items())}: the job's counts are right")
