"""The web UI's files, shipped in the package (no CDN: machines may have no internet):
``runtime/rest/web/*`` served at ``/<name>``, ``/`` being ``index.html``."""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Dict, Tuple

__all__ = ["web_ui_files", "WEB_DIR"]

WEB_DIR = Path(__file__).with_name("web")
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css",
          ".svg": "image/svg+xml", ".json": "application/json"}


def web_ui_files() -> Dict[str, Tuple[str, bytes]]:
    out: Dict[str, Tuple[str, bytes]] = {}
    if WEB_DIR.is_dir():
        for f in sorted(WEB_DIR.iterdir()):
            if f.is_file():
                ctype = _TYPES.get(f.suffix) or mimetypes.guess_type(f.name)[0] or \
                    "application/octet-stream"
                out["/" + f.name] = (ctype, f.read_bytes())
    return out
