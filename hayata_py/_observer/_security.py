"""Who may read and change what through the observer: pure checks, no server.

* Every ``/api`` request carries the per-start random token (``X-Hayata-Token``
  header; a GET may pass it as ``?token=``, which is how the page's event
  stream sends it). The token is printed with the URL, like Jupyter's.
* A state-changing request (any method but GET/HEAD) must also come from the
  page itself: its ``Origin`` is the server's own origin, it is JSON (so a
  plain HTML form elsewhere cannot send it) and, when the browser says so,
  ``Sec-Fetch-Site`` is ``same-origin``. GET requests change nothing.
* The ``Host`` header must name this server (a DNS-rebinding page cannot).
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

TOKEN_HEADER = "x-hayata-token"
SAFE_METHODS = frozenset({"GET", "HEAD"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class RequestRefusal:
    """Why a request is refused: the HTTP status, a stable code and a message."""

    status: int
    code: str
    message: str


def new_token() -> str:
    """A fresh random token (192 bits)."""
    return secrets.token_urlsafe(24)


def allowed_hosts(bind: str) -> frozenset[str] | None:
    """The host names a request may address this server by; None: any (bound to
    every address, so its names are unknown)."""
    address = ipaddress.ip_address(bind)
    if address.is_unspecified:
        return None
    return LOOPBACK_NAMES | {str(address)}


def host_name(host_header: str) -> str | None:
    """The name in a ``Host`` header (``[::1]:8765`` -> ``::1``), or None if malformed."""
    try:
        return urlsplit("//" + host_header).hostname
    except ValueError:
        return None


def check(method: str, headers: Mapping[str, str], query_token: str | None, token: str,
          hosts: frozenset[str] | None) -> RequestRefusal | None:
    """None if the request may go on, else why not (``headers`` keys in lower case)."""
    host = headers.get("host", "")
    name = host_name(host)
    if name is None or (hosts is not None and name.lower() not in hosts):
        return RequestRefusal(400, "bad_host", f"this observer does not serve host {host!r}; "
                       "use the URL `hayata observe` printed")
    given = headers.get(TOKEN_HEADER)
    if given is None and method in SAFE_METHODS:
        given = query_token
    if not given:
        return RequestRefusal(403, "token_missing", "this request needs the observer's token: open "
                       "the URL `hayata observe` printed (it ends in ?token=...)")
    if not secrets.compare_digest(given.encode(), token.encode()):
        return RequestRefusal(403, "token_invalid", "wrong token: each start of `hayata observe` "
                       "prints a new one with its URL")
    if method in SAFE_METHODS:
        return None
    origin = headers.get("origin")
    if origin is None:
        return RequestRefusal(403, "origin_missing", "a state-changing request must come from the "
                       f"observer page (send Origin: http://{host})")
    if origin != f"http://{host}" or headers.get("sec-fetch-site", "same-origin") \
            != "same-origin":
        return RequestRefusal(403, "cross_origin",
                              f"requests from {origin} may not change anything "
                              "here; use the observer page itself")
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return RequestRefusal(415, "not_json", "send the action as JSON "
                       "(Content-Type: application/json)")
    return None
