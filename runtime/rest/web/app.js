// the web UI (issue 30): filled in by the next step
