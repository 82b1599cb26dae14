"""Node result caching: the user's :class:`CachePolicy` and the cache keys.

A node with a policy (``AgentConfig(cache={"embed": hy.CachePolicy(ttl=3600)})``)
has each completed result kept in the store under a key, for ``ttl``
seconds. A later task of that node whose key has a live entry completes from
the store without running the node (see ``docs/guide/caching.md``).

Keys are computed in the agent process, before a task is sent:

- default: a stable hash of the node id and the task's input (the input
  canonicalised: dict keys sorted at every level, tuples as lists; then
  :mod:`hayata_py._codec` msgpack; then SHA-256);
- ``key``: a module-level function (or ``"package.module:function"``) called
  as ``key(ctx: CacheKeyContext) -> str`` (or bytes); its answer is hashed
  with SHA-256 (so any length is fine). A key function that raises or
  answers anything else leaves that task uncached: it runs, and its result
  is not stored (logged ``cache_key_failed``); a cache never fails a task.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hayata_py._callables import callable_path, resolve_callable
from hayata_py._codec import encode
from hayata_py._errors import ConfigError

__all__ = ["MAX_TTL", "CacheKeyContext", "CachePolicy", "cache_key", "default_key",
           "validate_cache"]

MAX_TTL = 10 * 365 * 24 * 3600
"""The longest ``ttl`` accepted (seconds): ten years."""


@dataclass(frozen=True)
class CachePolicy:
    """How a node's completed results are cached.

    - ``ttl``: seconds a stored result stays usable (a finite number > 0, at
      most :data:`MAX_TTL`). Expired entries are ignored.
    - ``key``: None (default: a hash of the node id and the task's input), or a
      module-level function / ``"package.module:function"`` taking a
      :class:`CacheKeyContext` and returning a ``str`` or ``bytes``. Give one
      when the node's result depends on more than its input (the state, say)
      or on less (a field of the input).
    """

    ttl: float
    key: Any = None

    def __post_init__(self) -> None:
        ttl = self.ttl
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) \
                or not math.isfinite(ttl) or not 0 < ttl <= MAX_TTL:
            raise ConfigError("ttl", f"must be a finite number of seconds > 0 (at most "
                                     f"{MAX_TTL}), got {ttl!r}")


@dataclass(frozen=True)
class CacheKeyContext:
    """What a cache key function receives: the task's node, input and the
    invocation's state (a read-only snapshot) when the task is about to run."""

    node_id: str
    input: Any
    state: Mapping[str, Any]


def _canonical(value: Any) -> Any:
    """``value`` with dict keys sorted at every level, so equal inputs hash equal."""
    if isinstance(value, dict):
        return {k: _canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def default_key(node_id: str, input: Any) -> str:
    """The default key: SHA-256 (hex) of the msgpack of ``[node_id, input]``
    (input canonicalised). Raises :class:`EncodingError` for an unencodable input."""
    raw = encode([node_id, _canonical(input)], key="input")
    return hashlib.sha256(raw).hexdigest()


def cache_key(node_id: str, key_path: str | None, input: Any, state: Mapping[str, Any]
              ) -> str:
    """The stored key of a task of ``node_id`` (``key_path``: its key function,
    or None for :func:`default_key`). Raises whatever the key function raises,
    or ``TypeError`` if it returns neither ``str`` nor ``bytes``."""
    if key_path is None:
        return default_key(node_id, input)
    answer = resolve_callable(key_path)(CacheKeyContext(node_id, input, state))
    if isinstance(answer, str):
        answer = answer.encode("utf-8")
    if not isinstance(answer, bytes):
        raise TypeError(f"cache key function {key_path} returned {type(answer).__name__}, "
                        "not str or bytes")
    return hashlib.sha256(answer).hexdigest()


def validate_cache(value: Any, nodes: Mapping[str, str]) -> dict[str, CachePolicy]:
    """``AgentConfig.cache`` checked: known node ids, :class:`CachePolicy` values,
    key functions turned into import paths. Raises :class:`ConfigError`."""
    if not isinstance(value, Mapping):
        raise ConfigError("cache", f"must be a mapping of node id -> hy.CachePolicy, got "
                                   f"{type(value).__name__}")
    out: dict[str, CachePolicy] = {}
    for node_id, policy in value.items():
        if node_id not in nodes:
            raise ConfigError("cache", f"unknown node id {node_id!r} (nodes: {sorted(nodes)})")
        where = f"cache[{node_id!r}]"
        if not isinstance(policy, CachePolicy):
            raise ConfigError(where, f"must be a hy.CachePolicy, got {type(policy).__name__}")
        key = None if policy.key is None else callable_path(policy.key, f"{where}.key")
        out[node_id] = CachePolicy(float(policy.ttl), key)
    return out
