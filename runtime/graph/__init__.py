"""From the user's program to tasks: transformations -> StreamGraph -> JobGraph ->
ExecutionGraph (internal).

* :mod:`~flowray.runtime.graph.transformations`: what a ``DataStream`` call records (lazy).
* :mod:`~flowray.runtime.graph.stream_graph`: one node per operator, edges with partitioners.
* :mod:`~flowray.runtime.graph.job_graph`: operators chained into tasks.
* :mod:`~flowray.runtime.graph.execution_graph`: tasks expanded by parallelism into
  subtasks, channels, result partitions and deployment descriptors.
"""
