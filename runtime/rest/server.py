"""The REST API's HTTP server: aiohttp (it comes with Ray) on a thread and event loop of its
own, serving a :class:`~.router.Router` and the web UI's files. It binds the first free port
of ``rest.port``; bound off loopback, write routes need the token."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import secrets
import socket
import threading
from typing import Any, List, Optional

from flowray.runtime.rest.router import RestResponse, Router

__all__ = ["RestServer", "is_loopback", "RestBindError"]

log = logging.getLogger("flowray.rest")


class RestBindError(OSError):
    """No port of ``rest.port`` could be bound."""


def is_loopback(address: str) -> bool:
    if address in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


class RestServer:
    """Serves ``router`` on ``bind_address`` at the first free port of ``ports``.

    ``token``: what write routes need off loopback (``Authorization: Bearer <token>``);
    ``None`` there generates one (:attr:`token`). ``static``: path -> (content type, bytes)
    of the web UI's files."""

    def __init__(self, router: Router, bind_address: str, ports: List[int],
                 token: Optional[str] = None, advertised_address: Optional[str] = None,
                 static: Optional[dict] = None) -> None:
        self.router = router
        self.bind_address = bind_address
        self.ports = ports
        self.loopback = is_loopback(bind_address)
        self.token = token or (None if self.loopback else secrets.token_urlsafe(24))
        self.advertised_address = advertised_address
        self.static = static or {}
        self.port: Optional[int] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._runner: Any = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._error: Optional[BaseException] = None

    @property
    def url(self) -> str:
        host = self.advertised_address or self.bind_address
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostbyname(socket.gethostname())
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def start(self) -> "RestServer":
        """Starts serving; returns once bound. Raises :class:`OSError` when no port of
        ``ports`` can be bound."""
        return self.start_in_background().wait_started(30.0)

    def start_in_background(self) -> "RestServer":
        """Starts serving in a thread of its own without waiting for it to bind (aiohttp's
        import and the bind stay off the caller's path); :meth:`wait_started` waits."""
        self._thread = threading.Thread(target=self._run, name="flowray-rest", daemon=True)
        self._thread.start()
        return self

    def wait_started(self, timeout_s: float) -> "RestServer":
        """Waits until bound; raises what binding raised (:class:`OSError`), or
        :class:`TimeoutError` if not bound within ``timeout_s``."""
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the REST API did not start within {timeout_s:g} s")
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start())
        except BaseException as e:  # noqa: BLE001 - reported to start()
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    async def _start(self) -> None:
        from aiohttp import web
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        last: Optional[OSError] = None
        for port in self.ports:
            site = web.TCPSite(self._runner, self.bind_address, port, reuse_address=False)
            try:
                await site.start()
            except OSError as e:
                last = e
                continue
            self.port = site._server.sockets[0].getsockname()[1]  # (port 0: the one given)
            return
        await self._runner.cleanup()
        raise RestBindError(f"the REST API could not bind {self.bind_address} on any port "
                            f"of rest.port ({self.ports[0]}..{self.ports[-1]}): {last}")

    def _authorized(self, request: Any) -> bool:
        if self.loopback or self.token is None:
            return True
        given = request.headers.get("Authorization", "")
        if given.startswith("Bearer "):
            given = given[len("Bearer "):]
        else:
            given = request.query.get("token", "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web
        path = request.path
        if request.method == "GET" and (path in self.static or path == "/"):
            ctype, data = self.static.get(path if path != "/" else "/index.html",
                                          (None, None))
            if data is not None:
                return web.Response(body=data, content_type=ctype,
                                    headers={"Cache-Control": "no-cache"})
        if self.router.is_write(request.method, path) and not self._authorized(request):
            res = RestResponse(401, {"errors": ["this write endpoint needs the job's REST "
                                                "token (Authorization: Bearer <token>)"]})
        else:
            body = await request.read() if request.can_read_body else None
            loop = asyncio.get_running_loop()
            # handlers take the job master's lock: not on the event loop's thread
            res = await loop.run_in_executor(
                None, self.router.dispatch, request.method, path, dict(request.query), body)
        return web.Response(text=res.json(), status=res.status,
                            content_type="application/json", headers=res.headers)

    def close(self) -> None:
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
