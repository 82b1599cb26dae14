"""The public surface of both packages is pinned: changing it is a decision."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import hayata_py
import supervisors


def isort_style(names: list[str]) -> list[str]:
    """Constants first, then the rest in code-point order (ruff's RUF022 order)."""
    return sorted(names, key=lambda n: (not n.isupper(), n))


def test_hayata_exports() -> None:
    assert hayata_py.__all__ == isort_style(hayata_py.__all__)
    assert set(hayata_py.__all__) == {
        "CALLER", "AgentAlreadyStarted", "AgentConfig", "AgentEvent", "AgentNotFound",
        "AgentRef", "AgentResult", "AgentStatus", "AgentSystem", "AsyncAgentRef",
        "AsyncAgentSystem", "CacheKeyContext", "CachePolicy", "CircuitBreaker",
        "ConfigError",
        "CorruptRecord", "EncodingError", "ErrorInfo", "Finish", "GetResult", "GetStatus",
        "HayataError", "InvalidPartialResult", "InvocationBusy", "Liveness", "Map", "Next",
        "NodeContext", "Pause", "PolicyContext", "ReadOnlyStorage", "RecoveryRejected",
        "ResultReply", "RetryPolicy",
        "Run", "RunAccepted",
        "RunRejected", "SchemaTooNew", "StaleExecution", "StaleWriter", "StoreError",
        "ThreadInfo", "Unfinished", "WaitResult",
    }
    for name in hayata_py.__all__:
        assert getattr(hayata_py, name) is not None


def test_supervisors_exports() -> None:
    assert supervisors.__all__ == isort_style(supervisors.__all__)
    assert set(supervisors.__all__) == {
        "BRUTAL_KILL", "INFINITY", "AutoShutdown", "ChildCounts", "ChildEvent", "ChildEventKind",
        "ChildInfo",
        "ChildSpec", "CountChildren", "DeleteChild", "ExitKind", "GetPid", "InvalidSpec", "Kind",
        "Reply", "Restart",
        "RestartChild", "Shutdown", "ShutdownSupervisor", "Sibling", "Start", "StartChild",
        "StartFailed", "StopNormally", "Strategy", "SupervisedActor", "Supervisor",
        "SupervisorError", "SupervisorFlags", "SupervisorRef", "System", "TerminateChild",
        "WhichChildren", "add_restart", "host_id", "kill_child_process", "process_alive",
        "wait_gone",
    }


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every import statement in the file at ``path``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_hayata_uses_only_the_public_api_of_supervisors() -> None:
    """No module of hayata_py imports a private module of supervisors or
    reaches into a private attribute of one of its classes."""
    offenders = [f"{path.name}:{line} {name}"
                 for path in sorted(Path(hayata_py.__file__).parent.rglob("*.py"))
                 for line, name in imports(path) if name.startswith("supervisors.")]
    assert offenders == []


def test_the_invocation_core_is_pure() -> None:
    """``hayata_py._invocation`` imports only the standard library and the pure leaf
    modules (never the actors, Thespian, supervisors or the database code), so it
    can be driven and tested without a process."""
    import sys

    root = Path(hayata_py.__file__).parent
    leaves = {"hayata_py._errors", "hayata_py._policy", "hayata_py._codec",
              "hayata_py.store._records", "hayata_py.store._classify", "hayata_py._circuit"}
    files = sorted((root / "_invocation").glob("*.py"))
    files += [root / "_errors.py", root / "_policy.py", root / "_codec.py",
              root / "store" / "_records.py", root / "store" / "_classify.py",
              root / "_circuit.py",
              root / "_rules" / "circuits.py"]
    def allowed(name: str) -> bool:
        top = name.split(".")[0]
        return (name.startswith("hayata_py._invocation") or name in leaves
                or top in sys.stdlib_module_names or top in ("__future__", "msgpack"))

    offenders = [f"{path.name}:{line} {name}" for path in files
                 for line, name in imports(path) if not allowed(name)]
    assert offenders == []


def test_the_rules_are_pure() -> None:
    """``hayata_py._rules`` (the edge pool, outbox, deadlines, circuits, recovery
    and pause rules) imports only the standard library, the invocation core, the
    plain-data modules and the pure leaves the core may import: never Thespian,
    supervisors, the actors or the database code."""
    import sys

    root = Path(hayata_py.__file__).parent
    leaves = {"hayata_py._errors", "hayata_py._policy", "hayata_py._codec",
              "hayata_py.store._records", "hayata_py.store._classify", "hayata_py._circuit",
              "hayata_py._config", "hayata_py._cache", "hayata_py._callables",
              "hayata_py.messages", "hayata_py._actor_messages"}
    files = sorted((root / "_rules").glob("*.py"))
    files += [root / f"{name.split('.', 1)[1].replace('.', '/')}.py" for name in sorted(leaves)]
    assert len(files) > len(leaves) + 5

    def allowed(name: str) -> bool:
        top = name.split(".")[0]
        return (name.startswith(("hayata_py._invocation", "hayata_py._rules"))
                or name in leaves
                or top in sys.stdlib_module_names or top in ("__future__", "msgpack"))

    def modules(path: Path) -> Iterator[tuple[int, str]]:
        """Like :func:`imports`, ``from hayata_py import x`` read as ``hayata_py.x``."""
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "hayata_py":
                for alias in node.names:
                    yield node.lineno, f"hayata_py.{alias.name}"
        yield from ((line, name) for line, name in imports(path) if name != "hayata_py")

    offenders = [f"{path.name}:{line} {name}" for path in files
                 for line, name in modules(path) if not allowed(name)]
    assert offenders == []


# Import circles that exist and are being broken elsewhere; each entry must name a
# circle that still exists (the test fails otherwise), so the list cannot go stale.
ALLOWED_CIRCLES: list[frozenset[str]] = []
"""Circles tolerated for now (none): an entry must name a circle that exists."""


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted name -> file of every module of ``packages`` (directories under ``root``)."""
    names = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}, between the modules
    of ``packages`` only. Every import counts, wherever it stands (in a function, under
    ``if TYPE_CHECKING:``); ``from pkg import name`` is an import of ``pkg.name`` when
    that is a module, else of ``pkg``."""
    modules = module_names(root, packages)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges = graph[module] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [known(alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                           else known(base) for alias in node.names]
            for target in targets:
                if target is not None and target != module:
                    edges.setdefault(target, node.lineno)
    return graph


def import_circles(graph: dict[str, dict[str, int]]) -> dict[frozenset[str], str]:
    """Every import circle (the modules of a strongly connected part of ``graph``),
    named by one cycle through its first module, with the line of each import."""
    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += graph[name]
        return seen

    reach = {module: reachable(module) for module in graph}
    circles = {}
    for module in sorted(graph):
        members = frozenset({module} | {m for m in reach[module] if module in reach[m]})
        if len(members) > 1 and members not in circles:
            circles[members] = _cycle_through(graph, module, members)
    return circles


def _cycle_through(graph: dict[str, dict[str, int]], start: str, members: frozenset[str]
                   ) -> str:
    """The shortest cycle from ``start`` back to it inside ``members``, e.g.
    ``a:12 -> b:30 -> a`` (``a:12``: module a imports the next at line 12)."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        name = queue.pop(0)
        for target in sorted(graph[name]):
            if target == start:
                steps = paths[name]
                after = [*steps[1:], start]
                hops = [f"{a}:{graph[a][b]}" for a, b in zip(steps, after, strict=True)]
                rest = sorted(members - set(steps))
                return " -> ".join([*hops, start]) + (
                    f" (with {', '.join(rest)})" if rest else "")
            if target in members and target not in paths:
                paths[target] = [*paths[name], target]
                queue.append(target)
    raise AssertionError(f"{start} is on no cycle")


def test_no_import_circles() -> None:
    """Imports inside ``hayata_py`` and ``supervisors`` run one way: no module
    imports, even for type checking or inside a function, a module that imports
    it back (directly or through others). See docs/design.md."""
    root = Path(hayata_py.__file__).parent.parent
    found = import_circles(import_graph(root, ("hayata_py", "supervisors")))
    new = [name for members, name in found.items() if members not in ALLOWED_CIRCLES]
    gone = [sorted(members) for members in ALLOWED_CIRCLES if members not in found]
    assert new == [], "import circles:\n" + "\n".join(new)
    assert gone == [], f"allow-listed circles that no longer exist (remove them): {gone}"


def test_the_circle_finder_sees_every_import_form(tmp_path: Path) -> None:
    """Relative imports, ``from pkg import module``, imports under ``if TYPE_CHECKING:``
    and inside functions all count; a one-way import is no circle."""
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n",
        "pkg/c.py": "def f():\n    from . import d\n",
        "pkg/d.py": "import pkg.c\nimport pkg.e\n",
        "pkg/e.py": "import json\nfrom pkg.sub.f import name\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/f.py": "from .. import e\n",
        "pkg/g.py": "import pkg.a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.b"] == {"pkg.a": 3}
    assert graph["pkg.e"] == {"pkg.sub.f": 2}
    assert import_circles(graph) == {
        frozenset({"pkg.a", "pkg.b"}): "pkg.a:1 -> pkg.b:3 -> pkg.a",
        frozenset({"pkg.c", "pkg.d"}): "pkg.c:2 -> pkg.d:1 -> pkg.c",
        frozenset({"pkg.e", "pkg.sub.f"}): "pkg.e:2 -> pkg.sub.f:1 -> pkg.e",
    }
