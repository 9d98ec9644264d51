"""What a job computes: the operator lifecycle, user-function interfaces, sources, sinks."""
