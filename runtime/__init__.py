"""How a job runs: graphs, channels, tasks, the job master and the Ray shell."""
