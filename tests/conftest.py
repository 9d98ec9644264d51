import os

# keep Ray's unix socket paths short and its output quiet
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
