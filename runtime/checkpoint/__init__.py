"""Checkpoints as the job master sees them (internal): the coordinator that triggers and
collects, pending and completed checkpoints, the plan, failure reasons and the tolerable
failure count, settings, the gateway to the tasks, storage and ``_metadata``, statistics, and
the shared-state registry for incremental checkpoints.
"""
