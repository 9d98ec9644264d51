"""The job master's decisions (internal), all pure: the scheduler's state machine
(:mod:`~flowray.runtime.jobmaster.scheduler`), the failure handler that returns tasks to
restart and a back-off (:mod:`~flowray.runtime.jobmaster.failure_handler`), failover regions
and strategies (:mod:`~flowray.runtime.jobmaster.failover`), restart strategies
(:mod:`~flowray.runtime.jobmaster.restart_strategy`) and blocking-partition bookkeeping
(:mod:`~flowray.runtime.jobmaster.partition_tracker`).
"""
