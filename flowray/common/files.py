"""Local file helpers every layer shares: a file-name-safe rendering of any text, fsync of a
folder, and an atomic write (temporary file, fsync, rename, fsync of the folder), so a
reader sees either the old file or the whole new one, also after a crash.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> atomic_write(os.path.join(folder, "a"), b"one")
>>> open(os.path.join(folder, "a"), "rb").read(), sorted(os.listdir(folder))
(b'one', ['a'])
>>> safe_file_name("e3/0->1"), safe_file_name("A.b%"), safe_file_name("..")
('e3%2F0-%3E1', '%41%2Eb%25', '%2E%2E')
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from typing import Optional

__all__ = ["safe_file_name", "fsync_dir", "atomic_write", "user_temp_dir", "UnsafeTempDirError",
           "unwritable_folder_reason", "file_in_the_way"]

_MAX_NAME = 200  # file names stay well under the usual 255-byte limit
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def safe_file_name(text: str, allow_empty: bool = False) -> str:
    """A file name for ``text``: ``[a-z0-9_-]`` kept, every other byte of its UTF-8
    (capitals, dots, slashes, ``%``) as ``%XX``. Injective, also on case-insensitive file
    systems; names longer than 200 characters are cut and end in ``~`` + a SHA-256 prefix.
    ``allow_empty``: ``""`` becomes ``"%"`` (no other text does) instead of an error."""
    if allow_empty and text == "":
        return "%"
    if not isinstance(text, str) or not text:
        raise ValueError(f"a file name needs a non-empty string, got {text!r}")
    out = []
    for ch in text:
        if ch in _PLAIN:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    name = "".join(out)
    if len(name) > _MAX_NAME:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]
        name = f"{name[:120]}~{digest}"
    return name


def fsync_dir(path: str) -> None:
    """Make a folder's entries (a rename, a new file) durable; a no-op where the file
    system cannot fsync a folder."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a directory
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` through ``path + ".tmp"`` and a rename."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


class UnsafeTempDirError(RuntimeError):
    """A per-user temp folder exists but belongs to another user or is not a folder."""


def user_temp_dir(name: str, base: Optional[str] = None) -> str:
    """``<base>/flowray-<uid>/<name>`` (base: the system temp folder), created readable by
    this user only (0700). Another user's folder of that name, or a symlink in its place,
    is refused with :class:`UnsafeTempDirError` instead of being used: files in it (state,
    partitions, sockets) must not be readable or replaceable by anyone else.

    >>> import tempfile
    >>> path = user_temp_dir("doc", tempfile.mkdtemp())
    >>> oct(os.stat(path).st_mode & 0o777), oct(os.stat(os.path.dirname(path)).st_mode & 0o777)
    ('0o700', '0o700')
    """
    root = os.path.join(base or tempfile.gettempdir(), f"flowray-{os.getuid()}")
    for folder in (root, os.path.join(root, name)):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise UnsafeTempDirError(
                f"{folder} is not a folder of user {os.getuid()} (owner {st.st_uid}); "
                "remove it or point flowray at another temp folder (TMPDIR)")
        if st.st_mode & 0o077:
            os.chmod(folder, 0o700)
    return os.path.join(root, name)


def file_in_the_way(folder: str) -> Optional[str]:
    """The first of ``folder`` (a plain path or ``file://``) and its parents that exists
    and is not a folder (``None``: the folder can be there)."""
    current = os.path.abspath(folder[len("file://"):] if folder.startswith("file://")
                              else folder)
    while True:
        if os.path.exists(current):
            return None if os.path.isdir(current) else current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def unwritable_folder_reason(path: str) -> Optional[str]:
    """Create the folder ``path`` (a plain path or ``file://``) if needed and write and
    remove a probe file in it: ``None`` if that worked, else why not (a file in the way,
    no permission, a read-only file system)."""
    folder = path[len("file://"):] if path.startswith("file://") else path
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".flowray-write-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
        return None
    except OSError as e:
        blocker = file_in_the_way(folder)
        if blocker is not None:
            return f"{blocker!r} is a file, not a folder"
        return f"cannot write there ({e.strerror or type(e).__name__})"
