"""Checkpoint files in a dict, for backends that write and read their snapshots."""


class DictStorage:
    """``write_file(path, data) -> size`` and ``read(path)`` over ``files`` (path -> bytes),
    with ``writes`` the paths in the order written. A path is written once: a checkpoint
    never overwrites a file, so a second write fails the test."""

    def __init__(self):
        self.files = {}
        self.writes = []

    def write_file(self, path, data):
        assert path not in self.files, f"overwrote {path}"
        self.files[path] = bytes(data)
        self.writes.append(path)
        return len(data)

    def read(self, path):
        return self.files[path]

    def shared_writes(self, root):
        """The paths written under ``<root>/shared/`` (incremental uploads), in order."""
        return [p for p in self.writes if p.startswith(f"{root}/shared/")]


def flip_middle_byte(path):
    """Damage a file in place: invert the byte in its middle (a bit rot a checksum sees)."""
    import os

    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
