"""How node processes find the graph: an import path, resolved once per process."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from langgraph.graph.state import CompiledStateGraph, StateGraph

from hayata_py._errors import ConfigError

_COMPILED: dict[tuple[str, tuple[str, ...] | str, tuple[str, ...] | str], CompiledStateGraph[
    Any, Any, Any, Any]] = {}


def graph_path(graph: Any) -> str:
    """The ``"package.module:name"`` path of ``graph`` (a path, a builder or a
    compiled graph), checked to import to a graph. A builder or compiled graph
    given as an object must be bound to a name at module level of an
    importable module: every node process imports it by that path."""
    if isinstance(graph, str):
        path = graph
        _check_path(path)
        return path
    if not isinstance(graph, (StateGraph, CompiledStateGraph)):
        raise ConfigError("graph", f"expected a langgraph StateGraph, a compiled graph or "
                          f"a 'package.module:name' path, got {type(graph).__name__}")
    # The modules a builder is most likely bound in first: scanning every
    # loaded module's namespace takes a reference to each of its values, which
    # copies the pages under them from the processes this one forked (about
    # 30 MB of a caller's memory once LangGraph and LangChain are loaded).
    likely = _likely_modules(graph)
    for names in (likely, [name for name in list(sys.modules) if name not in likely]):
        found = _bound_in(graph, names)
        if found is not None:
            return found
    raise ConfigError("graph", "the graph object is not bound to a name at module level of "
                      "an importable module, so the node processes cannot import it: define "
                      "the StateGraph builder at module level of a module (not __main__, not "
                      "inside a function) and pass it, or pass its path "
                      "'package.module:name'")


def _bound_in(graph: Any, module_names: list[str]) -> str | None:
    """The first ``module:name`` among ``module_names`` that binds ``graph``
    at module level and imports back to it."""
    for name in module_names:
        module = sys.modules.get(name)
        if module is None or name in ("__main__", "__mp_main__"):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if value is graph:
                path = f"{name}:{attr}"
                try:
                    _check_path(path)
                except ConfigError:
                    continue
                return path
    return None


def _likely_modules(graph: Any) -> list[str]:
    """The modules of the code that called ``compile`` and of the graph's
    state schemas and node functions, in that order, each once."""
    builder = graph.builder if isinstance(graph, CompiledStateGraph) else graph
    found: list[str] = []

    def add(name: Any) -> None:
        if isinstance(name, str) and name not in found:
            found.append(name)

    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and len(found) < 4:
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and not name.startswith(("hayata_py", "asyncio")):
            add(name)
        frame = frame.f_back
    for schema in (builder.state_schema, builder.input_schema, builder.output_schema):
        add(getattr(schema, "__module__", None))
    for spec in builder.nodes.values():
        runnable = spec.runnable
        add(getattr(getattr(runnable, "func", None) or getattr(runnable, "afunc", None),
                    "__module__", None))
    return found


def _check_path(path: str) -> None:
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ConfigError("graph", f"{path!r} is not 'package.module:name'")
    try:
        obj = _import(module, attr)
    except Exception as exc:
        raise ConfigError("graph", f"{path!r} does not import: {type(exc).__name__}: "
                          f"{exc}; node processes import the graph by this path") from exc
    if not isinstance(obj, (StateGraph, CompiledStateGraph)):
        raise ConfigError("graph", f"{path!r} is a {type(obj).__name__}, not a langgraph "
                          "StateGraph or compiled graph")


def _import(module: str, attr: str) -> Any:
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def builder_of(path: str) -> StateGraph[Any, Any, Any, Any]:
    """The builder at ``path`` (a compiled graph's own builder)."""
    module, _, attr = path.partition(":")
    obj = _import(module, attr)
    if isinstance(obj, CompiledStateGraph):
        builder: StateGraph[Any, Any, Any, Any] = obj.builder
        return builder
    if isinstance(obj, StateGraph):
        return obj
    raise ConfigError("graph", f"{path!r} is not a langgraph StateGraph")


def compiled(path: str, interrupt_before: tuple[str, ...] | str = (),
             interrupt_after: tuple[str, ...] | str = ()
             ) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The graph at ``path`` compiled without a checkpointer (the driver lends
    it one), once per process and set of breakpoints."""
    key = (path, interrupt_before, interrupt_after)
    graph = _COMPILED.get(key)
    if graph is None:
        module, _, attr = path.partition(":")
        obj = _import(module, attr)
        name = obj.get_name() if isinstance(obj, CompiledStateGraph) else None
        builder = builder_of(path)
        graph = builder.compile(
            interrupt_before=_breakpoints(interrupt_before),
            interrupt_after=_breakpoints(interrupt_after), name=name)
        _COMPILED[key] = graph
    return graph


def _breakpoints(value: tuple[str, ...] | str) -> Any:
    if value == "*":
        return "*"
    return list(value) or None


def resolve(path: str) -> Any:
    """The object at ``path``: a builder or a compiled graph."""
    module, _, attr = path.partition(":")
    return _import(module, attr)
