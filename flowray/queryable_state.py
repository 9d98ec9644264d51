"""Queryable state, as Flink's client: read one key of a keyed state that a running job
made queryable (``StateDescriptor.set_queryable(name)``, or
``KeyedStream.as_queryable_state(name)``), from any process of the job's Ray cluster.

Beyond Flink: ``read_committed=True`` reads the value as of the latest completed
checkpoint, which a failover never rolls back (Flink reads only the live value).

Example (needs a running job)::

    from flowray.queryable_state import QueryableStateClient, with_retries
    client = QueryableStateClient()
    state = with_retries(lambda: client.get_kv_state(
        "clicks", "count-per-user", "alice", ValueStateDescriptor("count"),
        read_committed=True))
    state.value(), state.checkpoint_id
"""

from flowray.runtime.execution.job_directory import JobNotFoundError
from flowray.runtime.execution.kv_state_client import (
    QueriedState,
    QueryableStateClient,
    UnknownKvStateLocation,
    UnknownQueryableStateError,
    with_retries,
)

__all__ = ["QueryableStateClient", "QueriedState", "UnknownKvStateLocation",
           "UnknownQueryableStateError", "JobNotFoundError", "with_retries"]
