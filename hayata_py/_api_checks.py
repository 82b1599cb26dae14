"""The checks of :class:`~hayata_py._api.AgentSystem`'s arguments, made before
anything starts: each bad one is a :class:`ConfigError` naming it.

Pure (no process, no store opened); the asyncio API
(:class:`~hayata_py._async.AsyncAgentSystem`) runs them at construction, and
``hayata system start --store`` checks its URL with :func:`check_store_url`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Mapping
from typing import Any

from hayata_py._config import Liveness, valid_capabilities
from hayata_py._errors import ConfigError


def check_options(*, base: str = "multiprocTCPBase", admin_port: int | None = None,
                  name: str | None = None, capabilities: Mapping[str, Any] | None = None,
                  bind: str = "127.0.0.1", liveness: Liveness | None = None,
                  data_dir: Any = None, store_url: Any = None,
                  **_others: Any) -> Liveness:
    """Refuse bad :class:`AgentSystem` arguments before anything starts
    (:class:`ConfigError` naming the argument); returns the liveness to use."""
    if base != "multiprocTCPBase":
        raise ConfigError("base", f"{base!r} is not supported; use 'multiprocTCPBase' "
                                  "(other bases cannot detect killed actors)")
    if admin_port is not None and (isinstance(admin_port, bool)
                                   or not isinstance(admin_port, int)
                                   or not 0 < admin_port < 65536):
        raise ConfigError("admin_port", f"must be a TCP port number, got {admin_port!r}")
    liveness = liveness if liveness is not None else Liveness()
    if not isinstance(liveness, Liveness):
        raise ConfigError("liveness", f"must be hy.Liveness, got {type(liveness).__name__}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError("name", f"must be a non-empty string, got {name!r}")
    if capabilities is not None:
        valid_capabilities(capabilities)
    if not isinstance(bind, str) or not _is_ipv4(bind):
        raise ConfigError("bind", "must be an IPv4 address of this host (default "
                                  f"127.0.0.1; 0.0.0.0 for every interface), got {bind!r}")
    if data_dir is not None and not isinstance(data_dir, (str, os.PathLike)):
        raise ConfigError("data_dir", f"must be a path, got {type(data_dir).__name__}")
    if store_url is not None:
        check_store_url(store_url)
    return liveness


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def check_store_url(url: Any) -> str:
    """A PostgreSQL or SQLite SQLAlchemy URL, or ``ConfigError("store_url")`` (the
    message shows the URL with its password hidden, or not at all if it cannot
    be parsed and may hold one)."""
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError

    parsed: URL | None = None
    if isinstance(url, str):
        with contextlib.suppress(ArgumentError):
            parsed = make_url(url)
    if parsed is not None and parsed.get_backend_name() in ("postgresql", "sqlite"):
        return str(url)
    shown = parsed.render_as_string(hide_password=True) if parsed is not None else (
        "<not shown: it may hold a password>" if isinstance(url, str) and "@" in url else url)
    raise ConfigError("store_url", "must be a PostgreSQL or SQLite URL, e.g. "
                      "postgresql+psycopg://hayata@10.0.0.1/hayata (default: the data "
                      f"dir's SQLite file); got {shown!r}")
