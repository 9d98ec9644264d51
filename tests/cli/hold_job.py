"""The program the CLI tests run (``flowray run [-d] ... hold_job.py WORKDIR NAME``): numbers
in three parts with a ``HOLD()`` after the first two, a stateless map and an exactly-once
sink; every record is also printed (in a detached job: into the tasks' own stdout).

Its settings come from the command line (-p, -s, -D); the program sets only what every
run shares: checkpoints every 200 ms into WORKDIR/checkpoints, no restarts. The fault
ledger (which HOLD()s fired) is WORKDIR/ledger, the committed output WORKDIR/out.
"""

import sys

from flowray import StreamExecutionEnvironment
from flowray.common import WatermarkStrategy
from flowray.testing import HOLD, TestingSource, TransactionalTestingSink

PART = 300


def items():
    out = []
    for part in range(3):
        out.extend(range(part * PART, (part + 1) * PART))
        if part < 2:
            out.append(HOLD())
    return out


def hold_indices():
    return [i for i, x in enumerate(items()) if not isinstance(x, int)]


def main(workdir: str, name: str) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    conf = env.get_configuration()
    conf.set_string("execution.checkpointing.dir", f"{workdir}/checkpoints")
    conf.set_string("restart-strategy.type", "none")
    env.enable_checkpointing(200)
    source = TestingSource(items(), ledger_dir=f"{workdir}/ledger")
    numbers = (env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
               .uid("numbers")
               .map(lambda x: ("n", x)).uid("tag"))
    numbers.sink_to(TransactionalTestingSink(f"{workdir}/out")).uid("sink")
    (numbers.filter(lambda r: r[1] % 100 == 0).uid("every-100th")
        .map(lambda r: f"{name}:{r[1]}").uid("line")
        .print().uid("print"))
    env.execute(name)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
