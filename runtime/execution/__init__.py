"""Running a prepared job (internal): the executor contract
(:mod:`~flowray.runtime.execution.executor`), the local executor (threads, no Ray), the Ray
executor with its actors as thin shells (:mod:`~flowray.runtime.execution.ray_executor`), the
driver-side client (:mod:`~flowray.runtime.execution.client`), cluster connection and the
pickling checks run before deployment.
"""
