"""Who may talk to a server: the API key rule, the ``x-api-key`` check and CORS.

- A server listens on loopback unless told otherwise; any other address needs
  an API key (:data:`API_KEY_ENV`), and without one it does not start
  (:func:`check_exposure`, before anything is bound or started).
- With a key (also allowed on loopback) every request but ``GET /ok`` carries
  it in ``x-api-key``, the header ``langgraph-sdk`` sends from ``api_key=``:
  missing is a 403, wrong a 401, as LangGraph's deployments answer; keys are
  compared in constant time (:class:`ApiKeyCheck`).
- CORS is off unless origins are configured (``--cors-origin`` or
  ``"http": {"cors": {"allow_origins": [...]}}`` in the config, as LangGraph
  names it); then Starlette's CORSMiddleware answers, exposing
  ``Content-Location`` and ``Location`` (:func:`cors_middleware`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Iterable

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from hayata_py._errors import ConfigError
from hayata_py.serve._graphs import read_json

__all__ = ["API_KEY_ENV", "API_KEY_HEADER", "ApiKeyCheck", "api_key_from_env",
           "check_exposure", "config_cors_origins", "cors_middleware"]

API_KEY_ENV = "HAYATA_API_KEY"
"""The environment variable holding the server's API key."""

API_KEY_HEADER = "x-api-key"
"""The request header carrying the key (what ``langgraph-sdk`` sends)."""

EXPOSED = ["Content-Location", "Location", "X-Pagination-Total", "X-Pagination-Next"]
"""Answer headers a browser client may read (the run's address, pagination)."""


def api_key_from_env(environ: dict[str, str] | None = None) -> str | None:
    """The API key of :data:`API_KEY_ENV` (an empty value is none)."""
    value = (os.environ if environ is None else environ).get(API_KEY_ENV, "")
    return value or None


def check_exposure(host: str, api_key: str | None) -> None:
    """Refuse (``ConfigError`` on ``host``) an address that is not loopback
    without an API key, or a host that is not an IP address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError("host", f"must be an IP address of this host, got {host!r}") from None
    if not address.is_loopback and not api_key:
        raise ConfigError("host", f"{host} is not loopback: clients elsewhere could reach "
                          f"the server, so it needs an API key; set {API_KEY_ENV} (clients "
                          f"send it as the {API_KEY_HEADER} header) or serve on 127.0.0.1")


def config_cors_origins(file: str | os.PathLike[str]) -> list[str]:
    """``http.cors.allow_origins`` of a ``langgraph.json`` (none if absent)."""
    _path, raw = read_json(file)
    http = raw.get("http") if isinstance(raw, dict) else None
    cors = http.get("cors") if isinstance(http, dict) else None
    if cors is None:
        return []
    origins = cors.get("allow_origins") if isinstance(cors, dict) else None
    if not isinstance(origins, list) or not all(isinstance(o, str) for o in origins):
        raise ConfigError("http.cors.allow_origins", "must be a list of origins "
                          "(\"https://app.example\")")
    return list(origins)


def cors_middleware(origins: Iterable[str]) -> list[Middleware]:
    """Starlette's CORSMiddleware for ``origins``, or nothing when there are none."""
    allowed = sorted(set(origins))
    if not allowed:
        return []
    return [Middleware(CORSMiddleware, allow_origins=allowed, allow_methods=["*"],
                       allow_headers=["*"], expose_headers=EXPOSED, max_age=600)]


class ApiKeyCheck:
    """ASGI middleware: every HTTP request but ``GET /ok`` carries ``key`` in
    :data:`API_KEY_HEADER`. Pure ASGI, so streamed answers pass untouched."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"] == "GET" and scope["path"] == "/ok"):
            await self.app(scope, receive, send)
            return
        given = [v for k, v in scope["headers"] if k == API_KEY_HEADER.encode()]
        if not given:
            refusal = JSONResponse({"detail": f"Missing authentication header: "
                                    f"{API_KEY_HEADER}"}, status_code=403)
        elif not hmac.compare_digest(given[0], self.key):
            refusal = JSONResponse({"detail": f"Invalid API key in the {API_KEY_HEADER} "
                                    "header"}, status_code=401)
        else:
            await self.app(scope, receive, send)
            return
        await refusal(scope, receive, send)
