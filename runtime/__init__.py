"""How a job runs: graphs, channels, tasks, the job master and the Ray shell.

Internal: nothing here is public API and names may move between releases. Programs use
``flowray``, ``flowray.common``, ``flowray.datastream`` (and its connectors),
``flowray.spark`` and ``flowray.testing``; see docs/internals/architecture.md for the map.
"""
