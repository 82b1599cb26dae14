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
        "AsyncAgentSystem", "ConfigError",
        "CorruptRecord", "EncodingError", "ErrorInfo", "Finish", "GetResult", "GetStatus",
        "HayataError", "InvalidPartialResult", "InvocationBusy", "Liveness", "Map", "Next",
        "NodeContext", "Pause", "PolicyContext", "ReadOnlyStorage", "RecoveryRejected",
        "ResultReply", "RetryPolicy",
        "Run", "RunAccepted",
        "RunRejected", "SchemaTooNew", "StaleExecution", "StaleWriter", "StoreError",
        "WaitResult",
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
        "WhichChildren", "add_restart", "host_id", "kill_child_process", "wait_gone",
    }


def test_supervisors_does_not_import_hayata() -> None:
    import subprocess
    import sys

    code = "import sys, supervisors; assert 'hayata_py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


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
              "hayata_py.store._records"}
    files = sorted((root / "_invocation").glob("*.py"))
    files += [root / "_errors.py", root / "_policy.py", root / "_codec.py",
              root / "store" / "_records.py"]
    def allowed(name: str) -> bool:
        top = name.split(".")[0]
        return (name.startswith("hayata_py._invocation") or name in leaves
                or top in sys.stdlib_module_names or top in ("__future__", "msgpack"))

    offenders = [f"{path.name}:{line} {name}" for path in files
                 for line, name in imports(path) if not allowed(name)]
    assert offenders == []
