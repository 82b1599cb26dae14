"""The graphs a server serves: read from ``langgraph.json`` unchanged, each one
an assistant whose id LangGraph computes (``uuid5`` of the graph id)."""

from __future__ import annotations

import json
import os
import sys
import typing
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hayata_py._errors import ConfigError

__all__ = ["NAMESPACE_GRAPH", "GraphSpec", "assistant_id", "importable", "read_config",
           "read_json"]

NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
"""LangGraph's namespace for the id of the assistant made from a graph."""

IGNORED = ("dependencies", "env", "python_version", "pip_config_file", "dockerfile_lines",
           "checkpointer", "auth", "ui")


def assistant_id(graph_id: str) -> str:
    """The assistant id LangGraph's server gives the assistant of ``graph_id``."""
    return str(uuid.uuid5(NAMESPACE_GRAPH, graph_id))


@dataclass(frozen=True)
class GraphSpec:
    graph_id: str
    path: str
    """``"module:name"``, importable by every node process."""
    options: dict[str, Any] = field(default_factory=dict)
    """The graph's agent options from the config's ``"hayata"`` key
    (``edge_concurrency``, ``node_concurrency``: node name -> count)."""

    @property
    def assistant_id(self) -> str:
        return assistant_id(self.graph_id)


def read_json(file: str | os.PathLike[str]) -> tuple[Path, Any]:
    """The config file's absolute path and its JSON; ConfigError("config") if
    it cannot be read."""
    path = Path(file).resolve()
    try:
        return path, json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError("config", f"cannot read {path}: {exc}") from exc


def read_config(file: str | os.PathLike[str]) -> tuple[list[GraphSpec], list[str]]:
    """The graphs of a ``langgraph.json`` and notes on keys it ignores. A graph
    given by file (``"./src/agent.py:graph"``) is imported as a module of its
    directory, which joins ``sys.path`` and ``PYTHONPATH`` (node processes
    import it too)."""
    path, raw = read_json(file)
    graphs = raw.get("graphs") if isinstance(raw, dict) else None
    if not isinstance(graphs, dict) or not graphs:
        raise ConfigError("config", f"{path} has no \"graphs\" object naming graphs")
    specs: list[GraphSpec] = []
    for graph_id, target in graphs.items():
        if not isinstance(target, str) or ":" not in target:
            raise ConfigError(f"graphs.{graph_id}", "must be \"./path.py:name\" or "
                              f"\"package.module:name\", got {target!r}")
        where, _, name = target.rpartition(":")
        if where.endswith(".py") or "/" in where:
            file_path = (path.parent / where).resolve()
            if not file_path.is_file():
                raise ConfigError(f"graphs.{graph_id}", f"{file_path} does not exist")
            importable(file_path.parent)
            module = file_path.stem
        else:
            importable(path.parent)
            module = where
        specs.append(GraphSpec(graph_id, f"{module}:{name}",
                               _options(raw.get("hayata"), graph_id)))
    unknown = sorted(set(raw.get("hayata") or {}) - set(graphs)) \
        if isinstance(raw.get("hayata"), dict) else []
    if unknown:
        raise ConfigError(f"hayata.{unknown[0]}", f"names no graph of {path.name} "
                          f"(its graphs: {sorted(graphs)})")
    notes = [f"{key!r} in {path.name} is ignored by hayata serve"
             for key in IGNORED if isinstance(raw, dict) and key in raw]
    store = raw.get("store") if isinstance(raw, dict) else None
    if isinstance(store, dict):
        notes += [f"'store.{key}' in {path.name} is ignored by hayata serve"
                  for key in store if key != "index"]
    http = raw.get("http") if isinstance(raw, dict) else None
    if isinstance(http, dict):
        cors = http.get("cors")
        notes += [f"'http.{key}' in {path.name} is ignored by hayata serve"
                  for key in http if key != "cors"]
        notes += [f"'http.cors.{key}' in {path.name} is ignored by hayata serve"
                  for key in (cors if isinstance(cors, dict) else {}) if key != "allow_origins"]
    return specs, notes


OPTIONS = ("edge_concurrency", "node_concurrency")
"""The agent options a graph may set under the config's ``"hayata"`` key."""


def _options(hayata: Any, graph_id: str) -> dict[str, Any]:
    """``hayata.<graph_id>`` of the config: ``{"edge_concurrency": {node: n},
    "node_concurrency": {node: n}}``, each optional; ConfigError naming the key."""
    if hayata is None:
        return {}
    if not isinstance(hayata, dict):
        raise ConfigError("hayata", "must be an object: graph id -> its options "
                          f"({', '.join(OPTIONS)}), got {hayata!r:.80}")
    given = hayata.get(graph_id) or {}
    if not isinstance(given, dict):
        raise ConfigError(f"hayata.{graph_id}", f"must be an object with {', '.join(OPTIONS)}"
                          f", got {given!r:.80}")
    options: dict[str, Any] = {}
    for key, value in given.items():
        if key not in OPTIONS:
            raise ConfigError(f"hayata.{graph_id}.{key}", f"is not a served graph's option; "
                              f"use one of {list(OPTIONS)}")
        if not isinstance(value, dict) or not all(
                isinstance(n, str) and isinstance(c, int) and not isinstance(c, bool)
                and c >= 1 for n, c in value.items()):
            raise ConfigError(f"hayata.{graph_id}.{key}", "must map node names to counts "
                              f">= 1, got {value!r:.80}")
        options[key] = dict(value)
    return options


def importable(directory: Path) -> None:
    """Make the modules of ``directory`` importable here and in every process
    started from here (``sys.path`` and ``PYTHONPATH``)."""
    text = str(directory)
    if text not in sys.path:
        sys.path.insert(0, text)
    current = os.environ.get("PYTHONPATH", "")
    if text not in current.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (text, current) if p)


def _json_schema(schema: Any, title: str) -> dict[str, Any] | None:
    """A JSON schema of a state/input class, field by field (pydantic refuses a
    ``typing.TypedDict`` on Python < 3.12 as a whole, not its fields' types)."""
    from pydantic import BaseModel, TypeAdapter

    if schema is None:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    try:
        hints = typing.get_type_hints(schema)
    except Exception:  # noqa: BLE001 - not a class with annotations: no schema
        return None
    properties: dict[str, Any] = {}
    for name, hint in hints.items():
        try:
            field = TypeAdapter(hint).json_schema()
        except Exception:  # noqa: BLE001 - a type pydantic cannot describe: any value
            field = {}
        properties[name] = {**field, "title": name.replace("_", " ").title()}
    return {"properties": properties, "title": title, "type": "object"}


def schemas(spec: GraphSpec) -> dict[str, Any]:
    """``GET /assistants/{id}/schemas`` of the graph."""
    from hayata_py.langgraph._graphref import builder_of

    builder = builder_of(spec.path)
    state = getattr(builder, "state_schema", None)
    input_schema = getattr(builder, "input_schema", None)
    output_schema = getattr(builder, "output_schema", None)
    return {"graph_id": spec.graph_id,
            "input_schema": None if input_schema is state else _json_schema(
                input_schema, f"{spec.graph_id}_input"),
            "output_schema": None if output_schema is state else _json_schema(
                output_schema, f"{spec.graph_id}_output"),
            "state_schema": _json_schema(state, f"{spec.graph_id}_state"),
            "config_schema": {}, "context_schema": None}
