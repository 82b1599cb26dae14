"""Child specs and supervisor flags: frozen, validated at construction.

Modelled on OTP's ``supervisor`` specification: a supervisor has a restart
``Strategy`` with an ``intensity``/``period`` limit, and an ordered list of
``ChildSpec``; children start left to right and stop right to left.
"""

from __future__ import annotations

import enum
import importlib
import math
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from supervisors._actor import SupervisedActor
from supervisors._errors import InvalidSpec


class Strategy(enum.Enum):
    """What a supervisor restarts when one child terminates abnormally (or a
    permanent one terminates at all)."""

    ONE_FOR_ONE = "one_for_one"
    """Only the terminated child is restarted."""
    ONE_FOR_ALL = "one_for_all"
    """All other children are stopped (right to left), then all are started (left to right)."""
    REST_FOR_ONE = "rest_for_one"
    """The terminated child and the children started after it are restarted."""
    SIMPLE_ONE_FOR_ONE = "simple_one_for_one"
    """One template spec; children are added dynamically with ``start_child(args)``."""


class Restart(enum.Enum):
    """When a terminated child is restarted."""

    PERMANENT = "permanent"
    """Always restarted."""
    TRANSIENT = "transient"
    """Restarted only after an abnormal exit (crash, kill)."""
    TEMPORARY = "temporary"
    """Never restarted; removed from the child list when it terminates."""


class Kind(enum.Enum):
    """Whether a child is a worker or a supervisor (affects the default shutdown)."""

    WORKER = "worker"
    SUPERVISOR = "supervisor"


class Shutdown(enum.Enum):
    """Non-numeric shutdown modes; a number means "seconds to stop cleanly, then kill"."""

    BRUTAL_KILL = "brutal_kill"
    """SIGKILL at once, no clean stop."""
    INFINITY = "infinity"
    """Wait as long as the child needs (the default for supervisor children)."""


class AutoShutdown(enum.Enum):
    """When a supervisor shuts itself down because significant children
    exited (OTP 24's ``auto_shutdown``). The shutdown is a *normal* exit: its
    own supervisor does not restart it unless it is permanent there."""

    NEVER = "never"
    """Never (the default); no child may then be significant."""
    ANY_SIGNIFICANT = "any_significant"
    """As soon as any significant child has exited and is not restarted."""
    ALL_SIGNIFICANT = "all_significant"
    """Once every significant child has exited and none is to be restarted."""


BRUTAL_KILL = Shutdown.BRUTAL_KILL
INFINITY = Shutdown.INFINITY

DEFAULT_WORKER_SHUTDOWN = 5.0


@dataclass(frozen=True)
class Sibling:
    """A start argument that the supervisor replaces with the *current* address
    of the sibling child ``id`` (started earlier in the same supervisor).

    Addresses change when a child restarts; with ``rest_for_one`` a child that
    holds a sibling's address is restarted after that sibling, so it always
    receives the fresh one.
    """

    id: str


@dataclass(frozen=True)
class Start:
    """How to start a child: an actor class (object or ``"pkg.module.Class"``)
    and the arguments passed to its ``on_start`` hook.

    Arguments cross a process boundary, so they must pickle.

    ``requirements`` places the child: it runs only in an actor system whose
    capabilities include every key with an equal value (the local system if it
    matches, otherwise another system of the convention). Empty: anywhere,
    i.e. locally.
    """

    actor: type | str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    requirements: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(self.kwargs))
        if not isinstance(self.requirements, Mapping) or not all(
                isinstance(k, str) and k for k in self.requirements):
            raise InvalidSpec("start.requirements", "must be a mapping of capability name "
                              f"(non-empty str) to value, got {self.requirements!r}")
        object.__setattr__(self, "requirements", dict(self.requirements))
        resolve_actor_class(self.actor, field_name="start.actor")
        _check_picklable((self.args, self.kwargs), "start.args")
        _check_picklable(self.requirements, "start.requirements")

    @property
    def actor_path(self) -> str:
        """The import path Thespian uses to create the actor."""
        if isinstance(self.actor, str):
            return self.actor
        return f"{self.actor.__module__}.{self.actor.__qualname__}"

    def with_extra_args(self, extra: tuple[Any, ...]) -> Start:
        if not extra:
            return self  # no new Start: it would import and pickle everything again
        return Start(self.actor, self.args + tuple(extra), self.kwargs, self.requirements)


def resolve_actor_class(actor: type | str, *, field_name: str) -> type:
    """Import and check an actor class; raise :class:`InvalidSpec` naming ``field_name``."""
    if isinstance(actor, str):
        module_name, _, attr = actor.rpartition(".")
        if not module_name or not attr:
            raise InvalidSpec(field_name, f"{actor!r} is not 'package.module.ClassName'")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise InvalidSpec(field_name, f"cannot import module {module_name!r}: {exc}") from exc
        cls = getattr(module, attr, None)
        if cls is None:
            raise InvalidSpec(field_name, f"module {module_name!r} has no attribute {attr!r}")
    else:
        cls = actor
    if not isinstance(cls, type) or not issubclass(cls, SupervisedActor):
        raise InvalidSpec(
            field_name,
            f"{actor!r} is not a subclass of supervisors.SupervisedActor "
            "(a supervised child must speak the start/stop protocol)",
        )
    if "<locals>" in cls.__qualname__:
        raise InvalidSpec(
            field_name,
            f"{cls.__qualname__} is defined inside a function; the actor process "
            "must be able to import it by name",
        )
    return cls


def _check_picklable(value: Any, field_name: str) -> None:
    try:
        pickle.dumps(value)
    except Exception as exc:
        raise InvalidSpec(
            field_name,
            f"must be picklable to reach the child's process ({type(exc).__name__}: {exc})",
        ) from exc


def _normalise_start(start: Any) -> Start:
    if isinstance(start, Start):
        return start
    if isinstance(start, (type, str)):
        return Start(start)
    if isinstance(start, tuple) and start and isinstance(start[0], (type, str)):
        return Start(start[0], tuple(start[1:]))
    raise InvalidSpec(
        "start", f"expected Start, an actor class, a 'pkg.module.Class' string or "
        f"(class, *args), got {start!r}"
    )


@dataclass(frozen=True)
class ChildSpec:
    """One supervised child.

    - ``id``: unique within its supervisor (a non-empty string).
    - ``start``: :class:`Start`, an actor class, ``"pkg.module.Class"`` or ``(cls, *args)``.
    - ``restart``: :class:`Restart` (default permanent).
    - ``shutdown``: seconds to stop cleanly before being killed, ``BRUTAL_KILL``
      or ``INFINITY``; default 5 s for workers, ``INFINITY`` for supervisors.
    - ``kind``: :class:`Kind` (default worker).
    - ``significant``: its exit (when it is not restarted) may shut the
      supervisor down, as its ``auto_shutdown`` flag says (default False).
      A permanent child cannot be significant (it is always restarted).
    """

    id: str
    start: Start
    restart: Restart = Restart.PERMANENT
    shutdown: float | Shutdown | None = None
    kind: Kind = Kind.WORKER
    significant: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidSpec("id", f"must be a non-empty string, got {self.id!r}")
        object.__setattr__(self, "start", _normalise_start(self.start))
        object.__setattr__(self, "restart", _enum(Restart, self.restart, "restart"))
        object.__setattr__(self, "kind", _enum(Kind, self.kind, "kind"))
        shutdown = self.shutdown
        if shutdown is None:
            shutdown = INFINITY if self.kind is Kind.SUPERVISOR else DEFAULT_WORKER_SHUTDOWN
        elif isinstance(shutdown, str):
            shutdown = _enum(Shutdown, shutdown, "shutdown")
        elif isinstance(shutdown, bool) or not isinstance(shutdown, (int, float, Shutdown)):
            raise InvalidSpec(
                "shutdown", f"must be seconds, BRUTAL_KILL or INFINITY, got {shutdown!r}"
            )
        elif not isinstance(shutdown, Shutdown):
            if not math.isfinite(shutdown) or shutdown <= 0:
                raise InvalidSpec("shutdown", f"timeout must be a positive number, got {shutdown}")
            shutdown = float(shutdown)
        object.__setattr__(self, "shutdown", shutdown)
        if not isinstance(self.significant, bool):
            raise InvalidSpec("significant", f"must be True or False, got {self.significant!r}")
        if self.significant and self.restart is Restart.PERMANENT:
            raise InvalidSpec(
                "significant", f"child {self.id!r} is permanent and so always restarted: "
                "only a transient or temporary child can be significant", child_id=self.id)


def _enum(cls: type[enum.Enum], value: Any, field_name: str) -> Any:
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.value for m in cls)
        raise InvalidSpec(
            field_name, f"unknown {field_name} type {value!r} (expected one of: {allowed})"
        ) from None


@dataclass(frozen=True)
class SupervisorFlags:
    """How a supervisor restarts: ``strategy``, and the restart limit.

    If more than ``intensity`` restarts happen within ``period`` seconds, the
    supervisor stops all its children and exits abnormally, so that its own
    supervisor applies *its* strategy (escalation). Defaults are OTP's: 1
    restart in 5 seconds.

    ``heartbeat`` / ``heartbeat_misses``: how the supervisor watches children
    placed in another actor system (a remote host's death is never reported by
    Thespian): it pings them every ``heartbeat`` seconds and takes a child that
    left ``heartbeat_misses`` pings in a row unanswered for dead (exit reason
    ``unreachable: ...``). Local children are not pinged.

    ``auto_shutdown``: :class:`AutoShutdown` (default ``NEVER``): whether the
    exit of significant children shuts the supervisor down (normally).
    """

    strategy: Strategy = Strategy.ONE_FOR_ONE
    intensity: int = 1
    period: float = 5.0
    heartbeat: float = 0.5
    heartbeat_misses: int = 3
    auto_shutdown: AutoShutdown = AutoShutdown.NEVER

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", _enum(Strategy, self.strategy, "strategy"))
        object.__setattr__(self, "auto_shutdown",
                           _enum(AutoShutdown, self.auto_shutdown, "auto_shutdown"))
        if isinstance(self.intensity, bool) or not isinstance(self.intensity, int):
            raise InvalidSpec("intensity", f"must be an int >= 0, got {self.intensity!r}")
        if self.intensity < 0:
            raise InvalidSpec("intensity", f"must be >= 0, got {self.intensity}")
        if isinstance(self.period, bool) or not isinstance(self.period, (int, float)):
            raise InvalidSpec(
                "period", f"must be a positive number of seconds, got {self.period!r}"
            )
        if not math.isfinite(self.period) or self.period <= 0:
            raise InvalidSpec("period", f"must be a positive number of seconds, got {self.period}")
        if (isinstance(self.heartbeat, bool) or not isinstance(self.heartbeat, (int, float))
                or not math.isfinite(self.heartbeat) or not 0.01 <= self.heartbeat <= 60):
            raise InvalidSpec("heartbeat", "must be seconds between 0.01 and 60, "
                              f"got {self.heartbeat!r}")
        if (isinstance(self.heartbeat_misses, bool) or not isinstance(self.heartbeat_misses, int)
                or self.heartbeat_misses < 1):
            raise InvalidSpec("heartbeat_misses", f"must be an int >= 1, got "
                              f"{self.heartbeat_misses!r}")


def validate_children(flags: SupervisorFlags, children: Any) -> tuple[ChildSpec, ...]:
    """Check a supervisor's child list against its flags; return it as a tuple."""
    if isinstance(children, (str, bytes)) or not hasattr(children, "__iter__"):
        raise InvalidSpec("children", f"must be a list of ChildSpec, got {children!r}")
    specs = tuple(children)
    for i, spec in enumerate(specs):
        if not isinstance(spec, ChildSpec):
            raise InvalidSpec(f"children[{i}]", f"must be a ChildSpec, got {spec!r}")
    seen: set[str] = set()
    for spec in specs:
        if spec.id in seen:
            raise InvalidSpec("children", f"duplicate child id {spec.id!r}", child_id=spec.id)
        seen.add(spec.id)
    for spec in specs:
        check_significant(flags, spec)
    if flags.strategy is Strategy.SIMPLE_ONE_FOR_ONE and len(specs) != 1:
        raise InvalidSpec(
            "children",
            f"a simple_one_for_one supervisor takes exactly one template spec, got {len(specs)}",
        )
    return specs


def check_significant(flags: SupervisorFlags, spec: ChildSpec) -> None:
    """Refuse a significant child under a supervisor that never shuts down
    automatically (OTP refuses the combination too)."""
    if spec.significant and flags.auto_shutdown is AutoShutdown.NEVER:
        raise InvalidSpec(
            "significant", f"child {spec.id!r} is significant but the supervisor's "
            "auto_shutdown is NEVER: set SupervisorFlags(auto_shutdown=ANY_SIGNIFICANT or "
            "ALL_SIGNIFICANT), or significant=False", child_id=spec.id)
