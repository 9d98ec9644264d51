"""What a failure while restoring a checkpoint means: RestoreFailurePolicy, pure."""

import pytest
from flowray.runtime.jobmaster.restore_failures import (
    DAMAGED_STATE_ERRORS,
    RestoreAction,
    RestoreDecision,
    RestoreFailurePolicy,
)
from flowray.runtime.messages import TaskFailure


def restore_failure(cid, cause_type="CorruptedStateError", message="file x is damaged"):
    """``sum[0]`` failed with ``cause_type: message`` while restoring checkpoint ``cid``
    (None: it failed later, not while restoring)."""
    return TaskFailure("sum[0]", None, cause_type, message, f"Traceback...\n{message}",
                       False, restoring_checkpoint=cid)


def decide(policy, failure, retained=(5, 7), own=True, commits=False):
    return policy.decide(failure, list(retained), own=own, commits_on_complete=commits)


# ---------------------------------------------------------------------------------------
# damaged or missing checkpoint files
# ---------------------------------------------------------------------------------------

def test_a_damaged_own_checkpoint_falls_back_to_the_previous_retained_one():
    decision = decide(RestoreFailurePolicy(), restore_failure(7), retained=[3, 5, 7])
    assert decision.action is RestoreAction.FALL_BACK
    assert decision.checkpoint_id == 7
    # names the damaged checkpoint, the cause and the newest older one
    assert "checkpoint 7 cannot be restored" in decision.message
    assert "CorruptedStateError: file x is damaged" in decision.message
    assert decision.message.endswith("falling back to checkpoint 5")


def test_a_damaged_checkpoint_falls_back_only_to_an_older_one():
    # a retained checkpoint newer than the damaged one (cannot normally happen) is no
    # fallback target
    decision = decide(RestoreFailurePolicy(), restore_failure(5), retained=[2, 5, 7])
    assert decision.action is RestoreAction.FALL_BACK
    assert decision.message.endswith("falling back to checkpoint 2")


def test_a_damaged_checkpoint_of_a_job_that_commits_fails_the_job():
    decision = decide(RestoreFailurePolicy(), restore_failure(7), commits=True)
    assert decision.action is RestoreAction.FAIL_JOB and decision.checkpoint_id == 7
    assert "checkpoint 7 cannot be restored (CorruptedStateError: file x is damaged)" \
        in decision.message
    assert "checkpoint 5 would commit records twice" in decision.message


def test_a_damaged_checkpoint_with_no_older_retained_one_fails_the_job():
    for retained in ([7], []):
        decision = decide(RestoreFailurePolicy(), restore_failure(7), retained=retained)
        assert decision.action is RestoreAction.FAIL_JOB and decision.checkpoint_id == 7
        assert "no older retained checkpoint" in decision.message
        assert "execution.checkpointing.num-retained" in decision.message
        assert "CorruptedStateError: file x is damaged" in decision.message


def test_no_older_checkpoint_is_reported_before_the_commits():
    decision = decide(RestoreFailurePolicy(), restore_failure(7), retained=[7], commits=True)
    assert decision.action is RestoreAction.FAIL_JOB
    assert "no older retained" in decision.message


@pytest.mark.parametrize("commits", [False, True])
def test_a_damaged_savepoint_the_job_started_from_fails_the_job(commits):
    decision = decide(RestoreFailurePolicy(), restore_failure(41), retained=[],
                      own=False, commits=commits)
    assert decision.action is RestoreAction.FAIL_JOB and decision.checkpoint_id == 41
    assert "savepoint" in decision.message
    assert "CorruptedStateError: file x is damaged" in decision.message


def test_a_damaged_savepoint_fails_even_with_older_checkpoints_retained():
    decision = decide(RestoreFailurePolicy(), restore_failure(7), retained=[5, 7], own=False)
    assert decision.action is RestoreAction.FAIL_JOB


def test_a_missing_file_counts_as_damaged():
    assert "FileNotFoundError" in DAMAGED_STATE_ERRORS
    missing = restore_failure(7, "FileNotFoundError",
                              "checkpoint file not found: /c/chk-7/sum-0.keyed")
    decision = decide(RestoreFailurePolicy(), missing)
    assert decision.action is RestoreAction.FALL_BACK
    assert decision.message == (
        "checkpoint 7 cannot be restored (FileNotFoundError: checkpoint file not found: "
        "/c/chk-7/sum-0.keyed); falling back to checkpoint 5")
    assert decide(RestoreFailurePolicy(), missing, commits=True).action \
        is RestoreAction.FAIL_JOB
    assert decide(RestoreFailurePolicy(), missing, own=False).action \
        is RestoreAction.FAIL_JOB


def test_damaged_checkpoints_fall_back_every_time_without_counting():
    policy = RestoreFailurePolicy(max_repeats=2)
    for _ in range(5):
        assert decide(policy, restore_failure(7)).action is RestoreAction.FALL_BACK


# ---------------------------------------------------------------------------------------
# other errors while restoring
# ---------------------------------------------------------------------------------------

def test_the_same_other_error_restarts_twice_then_fails_the_job():
    policy = RestoreFailurePolicy()
    failure = restore_failure(7, "MemoryError", "out of memory")
    for _ in range(2):
        assert decide(policy, failure) == RestoreDecision(RestoreAction.RESTART, 7)
    decision = decide(policy, failure)
    assert decision.action is RestoreAction.FAIL_JOB and decision.checkpoint_id == 7
    assert decision.message == ("restoring checkpoint 7 failed 3 times in a row with the "
                                "same error, giving up: MemoryError: out of memory")


def test_other_errors_never_fall_back():
    policy = RestoreFailurePolicy()
    failure = restore_failure(7, "ValueError", "bad value")
    assert decide(policy, failure, retained=[1, 5, 7]).action is RestoreAction.RESTART
    assert decide(policy, failure, retained=[], own=False,
                  commits=True).action is RestoreAction.RESTART


def test_max_repeats_is_configurable():
    policy = RestoreFailurePolicy(max_repeats=1)
    assert decide(policy, restore_failure(7, "ValueError", "x")).action \
        is RestoreAction.FAIL_JOB


@pytest.mark.parametrize("other", [
    restore_failure(7, "ValueError", "another message"),
    restore_failure(7, "TypeError", "out of memory"),
    restore_failure(5, "MemoryError", "out of memory"),
], ids=["message", "cause type", "checkpoint"])
def test_a_different_error_in_between_resets_the_count(other):
    policy = RestoreFailurePolicy()
    failure = restore_failure(7, "MemoryError", "out of memory")
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, other).action is RestoreAction.RESTART
    # counted afresh: two more of the first before giving up
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.FAIL_JOB


def test_a_damaged_checkpoint_in_between_resets_nothing_it_is_not_counted():
    policy = RestoreFailurePolicy()
    failure = restore_failure(7, "MemoryError", "out of memory")
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, restore_failure(7)).action is RestoreAction.FALL_BACK
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.FAIL_JOB


def test_restored_resets_the_count():
    policy = RestoreFailurePolicy()
    failure = restore_failure(7, "MemoryError", "out of memory")
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.RESTART
    policy.restored()
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.FAIL_JOB


def test_a_failure_not_while_restoring_restarts_and_counts_nothing():
    policy = RestoreFailurePolicy()
    for cause in ("CorruptedStateError", "FileNotFoundError", "ValueError"):
        later = restore_failure(None, cause)
        assert decide(policy, later, retained=[], own=False, commits=True) == \
            RestoreDecision(RestoreAction.RESTART)
    failure = restore_failure(7, "MemoryError", "out of memory")
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, restore_failure(None, "MemoryError", "out of memory")).action \
        is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.RESTART
    assert decide(policy, failure).action is RestoreAction.FAIL_JOB
