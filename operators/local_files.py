"""Local paths for the file connectors: plain paths and ``file://`` URIs."""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["local_path"]


def local_path(path: Any, what: str) -> str:
    """An absolute local path for ``path`` (a plain path or a ``file://`` URI); ``what``
    names the connector in errors."""
    path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ValueError(f"{what}: expected a non-empty path, got {path!r}")
    parsed = urllib.parse.urlparse(path)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"{what}: remote file URI {path!r} is not supported")
        path = urllib.request.url2pathname(parsed.path)
    elif parsed.scheme and len(parsed.scheme) > 1:  # (a one-letter scheme is a drive letter)
        raise ValueError(f"{what}: only local paths and file:// URIs are supported, "
                         f"not {path!r}")
    return os.path.abspath(os.path.expanduser(path))
