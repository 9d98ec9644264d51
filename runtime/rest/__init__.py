"""The REST API, shaped like Flink's: a pure router (:mod:`.router`), the JSON Flink's web UI
and scripts read, built from a snapshot of a job (:mod:`.snapshot`, :mod:`.views`), and the
HTTP server the job master runs (:mod:`.server`)."""
