"""``flowray.testing``: test utilities shipped with flowray (see :mod:`flowray.operators.testing`).

``TestingSource`` is a bounded, replayable source whose items may hold fault markers
(``FAIL()``, ``KILL()``, ``PAUSE(seconds)``) that fire once per fault ledger, even across
recovery.
"""

from flowray.operators.testing import (
    FAIL,
    KILL,
    PAUSE,
    FailMarker,
    KillMarker,
    Marker,
    PauseMarker,
    SimulatedCrash,
    TestingFailure,
    TestingSource,
    TestingSourceReader,
)

from flowray.operators.testing_functions import CountRecords, DieOnceOnOpen, FailOnce, RecordOpens
from flowray.operators.testing_sinks import TransactionalTestingSink
from flowray.runtime.testing import FaultInjector, wait_until

__all__ = ["RecordOpens", "CountRecords", "FailOnce", "DieOnceOnOpen", "TransactionalTestingSink", "FaultInjector", "wait_until", "TestingSource", "TestingSourceReader", "TestingFailure", "SimulatedCrash", "Marker",
           "FailMarker", "KillMarker", "PauseMarker", "FAIL", "KILL", "PAUSE"]
