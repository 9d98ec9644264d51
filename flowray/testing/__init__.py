"""``flowray.testing``: test utilities shipped with flowray.

* :mod:`~flowray.testing.sources`: ``TestingSource``, a bounded, replayable source whose
  items may hold fault markers (``FAIL()``, ``KILL()``, ``PAUSE(seconds)``) that fire once
  per fault ledger, even across recovery.
* :mod:`~flowray.testing.sinks`: ``TransactionalTestingSink``, committed vs pending output.
* :mod:`~flowray.testing.functions`: user functions that fail, die or count on purpose.
* :mod:`~flowray.testing.faults`: ``FaultInjector`` kills task actors of a job on Ray.
* :mod:`~flowray.testing.jobmaster`: ``TestingTopology`` and ``RecordingDeployer`` for
  driving the job master's pure classes by hand.
"""

from flowray.testing.faults import FaultInjector, wait_until
from flowray.testing.functions import (
    CountRecords,
    DieOnceOnOpen,
    FailOnce,
    HangOnce,
    RecordOpens,
)
from flowray.testing.jobmaster import RecordingDeployer, TestingTopology
from flowray.testing.sinks import TransactionalTestingSink
from flowray.testing.sources import (
    FAIL,
    KILL,
    PAUSE,
    HOLD,
    HoldMarker,
    FailMarker,
    KillMarker,
    Marker,
    PauseMarker,
    SimulatedCrash,
    TestingFailure,
    TestingSource,
    TestingSourceReader,
    WAIT_UNTIL,
    WaitMarker,
)

__all__ = ["RecordOpens", "CountRecords", "FailOnce", "DieOnceOnOpen", "HangOnce",
           "TransactionalTestingSink", "FaultInjector", "wait_until", "TestingSource",
           "TestingSourceReader", "TestingFailure", "SimulatedCrash", "Marker", "FailMarker",
           "KillMarker", "PauseMarker", "HoldMarker", "WaitMarker", "HOLD", "FAIL", "KILL", "PAUSE",
           "WAIT_UNTIL", "TestingTopology",
           "RecordingDeployer"]
