"""Inside one subtask (internal): the task loop (:mod:`~flowray.runtime.task.stream_task`),
what it needs from its host (:mod:`~flowray.runtime.task.environment`), barrier alignment
(:mod:`~flowray.runtime.task.barrier_handler`), watermark alignment
(:mod:`~flowray.runtime.task.watermark_valve`) and the subtask's side of a checkpoint
(:mod:`~flowray.runtime.task.subtask_checkpoints`).
"""
