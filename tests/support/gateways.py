"""A :class:`CheckpointGateway` that records what the checkpoint coordinator sends."""

from flowray.runtime.checkpoint.gateway import CheckpointGateway


class RecordingGateway(CheckpointGateway):
    """Records every trigger, completion and abort the coordinator sends.

    ``fail_trigger_for``: subtasks whose trigger raises (the task is unreachable).
    ``backends``: subtask -> keyed-state backend that is told of completed and aborted
    checkpoints, as the task passes the notifications on.
    """

    def __init__(self):
        self.triggers = []   # (key, id, timestamp, is_savepoint)
        self.completes = []  # (key, id)
        self.aborts = []     # (key, id, reason)
        self.fail_trigger_for = set()
        self.backends = {}

    def trigger(self, subtask, checkpoint_id, timestamp_ms, is_savepoint, location=None):
        if subtask in self.fail_trigger_for:
            raise ConnectionError("task unreachable")
        self.triggers.append((subtask.key, checkpoint_id, timestamp_ms, is_savepoint))

    def notify_complete(self, subtask, checkpoint_id):
        self.completes.append((subtask.key, checkpoint_id))
        backend = self.backends.get(subtask)
        if backend is not None:
            backend.notify_checkpoint_complete(checkpoint_id)

    def notify_aborted(self, subtask, checkpoint_id, reason):
        self.aborts.append((subtask.key, checkpoint_id, reason))
        backend = self.backends.get(subtask)
        if backend is not None:
            backend.notify_checkpoint_aborted(checkpoint_id)

    def triggered(self, checkpoint_id):
        return sorted(k for k, c, _, _ in self.triggers if c == checkpoint_id)

    def completed(self, checkpoint_id):
        return sorted(k for k, c in self.completes if c == checkpoint_id)

    def aborted(self, checkpoint_id):
        return sorted((k, r) for k, c, r in self.aborts if c == checkpoint_id)
