"""Agent configuration: the user's frozen dataclass and its validated form."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hayata_py._callables import callable_path
from hayata_py._codec import check_encodable
from hayata_py._errors import ConfigError, EncodingError


@dataclass(frozen=True)
class AgentConfig:
    """How an agent runs.

    - ``id``: the agent id (non-empty string).
    - ``nodes``: node id -> module-level function or ``"package.module:function"``.
    - ``decision_policy``: a module-level function or path; called with a
      :class:`PolicyContext`, answers :class:`Next` or :class:`Finish`.
    - ``state``: the initial state of every invocation (must be msgpack-encodable).
    - ``max_steps``: transitions allowed per invocation (> 0).
    - ``execution_timeout``: seconds one node execution may take (> 0).
    - ``idempotent_nodes``: node ids whose uncertain tasks may be re-run on recovery.
    """

    id: str
    nodes: Mapping[str, Any]
    decision_policy: Any
    state: Mapping[str, Any] = field(default_factory=dict)
    max_steps: int = 10
    execution_timeout: float = 30.0
    idempotent_nodes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AgentSpec:
    """A validated :class:`AgentConfig`: plain, picklable data with functions as paths."""

    id: str
    nodes: dict[str, str]
    policy: str
    state: dict[str, Any]
    max_steps: int
    execution_timeout: float
    idempotent_nodes: frozenset[str]
    store_url: str = ""
    """Set by the AgentSystem: where the agent and its edges record their work."""
    instance: str = ""
    """Set by the AgentSystem: the id of this system start (the store's owner name)."""


def validate_config(config: Any) -> AgentSpec:
    """Check every field of ``config``; raise :class:`ConfigError` naming the first bad one."""
    if not isinstance(config, AgentConfig):
        raise ConfigError("config", f"expected hy.AgentConfig, got {type(config).__name__}")
    if not isinstance(config.id, str) or not config.id.strip():
        raise ConfigError("id", f"must be a non-empty string, got {config.id!r}")
    if any(c in config.id for c in "/\\\x00") or config.id != config.id.strip():
        raise ConfigError("id", f"{config.id!r} may not contain '/', '\\\\', NUL or "
                                "surrounding spaces")
    if not isinstance(config.nodes, Mapping) or not config.nodes:
        raise ConfigError("nodes", "must be a non-empty mapping of node id -> function")
    nodes: dict[str, str] = {}
    for node_id, fn in config.nodes.items():
        if not isinstance(node_id, str) or not node_id:
            raise ConfigError("nodes", f"node ids must be non-empty strings, got {node_id!r}")
        nodes[node_id] = callable_path(fn, f"nodes[{node_id!r}]")
    policy = callable_path(config.decision_policy, "decision_policy")
    if isinstance(config.max_steps, bool) or not isinstance(config.max_steps, int) \
            or config.max_steps <= 0:
        raise ConfigError("max_steps", f"must be a positive int, got {config.max_steps!r}")
    timeout = config.execution_timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError("execution_timeout",
                          f"must be a positive number of seconds, got {timeout!r}")
    if not isinstance(config.state, Mapping):
        raise ConfigError("state", f"must be a dict, got {type(config.state).__name__}")
    state = dict(config.state)
    if not all(isinstance(k, str) for k in state):
        raise ConfigError("state", "keys must be strings")
    try:
        check_encodable(state, "state")
    except EncodingError as exc:
        raise ConfigError("state", f"cannot be stored durably: {exc}",
                          key=exc.details.get("key")) from exc
    idempotent = frozenset(config.idempotent_nodes)
    unknown = sorted(idempotent - set(nodes))
    if unknown:
        raise ConfigError("idempotent_nodes", f"unknown node ids {unknown}")
    return AgentSpec(config.id, nodes, policy, state, config.max_steps, float(timeout),
                     idempotent)
