"""Routes Flink-shaped REST paths to handlers, without HTTP: ``dispatch`` takes a method, a
path, the query and the body, and gives a status and a JSON value. A path that is not
there is a 404, a known path with another method a 405, a request whose parameters or body
do not parse a 400, a write without the token off loopback a 401; every error is Flink's
``{"errors": [...]}``, never a traceback.

>>> r = Router()
>>> r.add("GET", "/jobs/:jobid", lambda req: {"jid": req.params["jobid"]})
>>> r.dispatch("GET", "/jobs/abc", {}).body
{'jid': 'abc'}
>>> r.dispatch("POST", "/jobs/abc", {}).status
405
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

__all__ = ["Router", "RestRequest", "RestResponse", "RestError"]

log = logging.getLogger("flowray.rest")


class RestError(Exception):
    """A request the API answers with ``status`` and ``message`` (4xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RestRequest:
    method: str
    path: str
    params: Dict[str, str]  # the path's :parameters
    query: Mapping[str, str]
    body: Any = None  # parsed JSON, or None

    def query_int(self, name: str, default: int) -> int:
        raw = self.query.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise RestError(400, f"query parameter {name!r} must be an integer, got "
                                 f"{raw!r}") from None


@dataclass(frozen=True)
class RestResponse:
    status: int
    body: Any
    headers: Dict[str, str] = field(default_factory=dict)

    def json(self) -> str:
        return json.dumps(self.body, separators=(",", ":"))


Handler = Callable[[RestRequest], Any]


class Router:
    """``add(method, "/jobs/:jobid/...", handler)``; a handler returns the JSON value (or a
    :class:`RestResponse`) or raises :class:`RestError`."""

    def __init__(self) -> None:
        self._routes: List[Tuple[str, List[str], Handler, bool]] = []

    def add(self, method: str, pattern: str, handler: Handler, write: bool = False) -> None:
        """``write``: the route changes something (it needs the token off loopback)."""
        self._routes.append((method.upper(), _parts(pattern), handler, write))

    def patterns(self, method: str) -> List[str]:
        """The path patterns routed for ``method``, in the order they were added."""
        return ["/" + "/".join(r[1]) for r in self._routes if r[0] == method.upper()]

    def is_write(self, method: str, path: str) -> bool:
        found = self._match(method.upper(), _parts(path))
        return found is not None and found[0][3]

    def _match(self, method: str, parts: List[str]
               ) -> Optional[Tuple[Tuple[str, List[str], Handler, bool], Dict[str, str]]]:
        for route in self._routes:
            if route[0] != method:
                continue
            params = _bind(route[1], parts)
            if params is not None:
                return route, params
        return None

    def dispatch(self, method: str, path: str, query: Mapping[str, str],
                 body: Optional[bytes] = None) -> RestResponse:
        method = method.upper()
        parts = _parts(path)
        found = self._match(method, parts)
        if found is None:
            allowed = sorted({r[0] for r in self._routes if _bind(r[1], parts) is not None})
            if allowed:
                return RestResponse(405, {"errors": [f"{method} is not allowed on {path}; "
                                                     f"use {', '.join(allowed)}"]},
                                    {"Allow": ", ".join(allowed)})
            return RestResponse(404, {"errors": [f"Not found: {path}"]})
        route, params = found
        try:
            parsed = json.loads(body) if body else None
        except (ValueError, UnicodeDecodeError) as e:
            return RestResponse(400, {"errors": [f"the request body is not JSON: {e}"]})
        try:
            result = route[2](RestRequest(method, path, params, dict(query), parsed))
        except RestError as e:
            return RestResponse(e.status, {"errors": [e.message]})
        except Exception as e:  # an answer, never a traceback
            log.warning("flowray: REST %s %s failed", method, path, exc_info=True)
            return RestResponse(500, {"errors": [f"Internal server error: "
                                                 f"{type(e).__name__}: {e}"]})
        if isinstance(result, RestResponse):
            return result
        return RestResponse(200, result)


def _parts(path: str) -> List[str]:
    return [p for p in path.split("?", 1)[0].strip("/").split("/") if p]


def _bind(pattern: List[str], parts: List[str]) -> Optional[Dict[str, str]]:
    if len(pattern) != len(parts):
        return None
    params: Dict[str, str] = {}
    for p, v in zip(pattern, parts):
        if p.startswith(":"):
            params[p[1:]] = v
        elif p != v:
            return None
    return params
