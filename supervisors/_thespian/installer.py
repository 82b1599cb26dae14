"""Installs the patches of :mod:`supervisors._thespian.patch_table`, each only
on the Thespian source it was written against.

For each patch, the fingerprint of the installed Thespian's source
(:func:`supervisors._thespian.fingerprint.fingerprint`) is compared with the
one the table recorded; :func:`decide` turns that into a :class:`Verdict`:

- a match: the patch is installed (a speed patch not when
  ``SUPERVISORS_PLAIN_THESPIAN=1``, the switch to measure them against);
- a speed patch that does not match is skipped: Thespian's own code runs,
  which is slower but right, and the skip is logged;
- a correctness patch that does not match refuses: :func:`install_patches`
  raises :class:`supervisors._errors.ThespianMismatch`, naming the patch and
  the Thespian version, before anything is installed; ``supervisors`` without
  it would be wrong, not slow;
- a patch that requires a skipped one is skipped with it.

The installed Thespian's version is not compared at import: reading it costs
milliseconds, the source is what a patch depends on, and ``pyproject.toml``
pins the version the table was written for (checked by
``tests/test_thespian_patch_table.py``). It is read for the messages only.

:func:`install_patches` runs once per process, when ``supervisors._thespian``
is imported; the admin and every actor process are forked from that process
and inherit the patched Thespian. Each skipped patch is logged then, once
(structlog: ``thespian_patch_skipped``; a warning when Thespian's source
differs, info under the switch).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from supervisors import _log
from supervisors._errors import ThespianMismatch
from supervisors._thespian.fingerprint import fingerprint, remember_original
from supervisors._thespian.patch_table import PATCHES, THESPIAN_VERSION, Patch, PatchKind

__all__ = [
    "PLAIN_THESPIAN_ENV",
    "Decision",
    "Verdict",
    "apply_table",
    "decide",
    "found_fingerprint",
    "in_force",
    "install_patches",
    "thespian_version",
]

PLAIN_THESPIAN_ENV = "SUPERVISORS_PLAIN_THESPIAN"
"""Set to ``1`` (before ``supervisors`` is imported) to keep Thespian's own
code wherever a speed patch would replace it: a switch to measure the speed
patches against, not a setting. The correctness patches are installed all
the same."""


class Verdict(Enum):
    INSTALL = "install"
    SKIP_PLAIN = "plain_thespian"
    """A speed patch under ``SUPERVISORS_PLAIN_THESPIAN=1``."""
    SKIP_CHANGED = "thespian_source_changed"
    """A speed patch whose Thespian source differs from the one it was written against."""
    SKIP_REQUIRED = "required_patch_skipped"
    """A patch that works only with another one, which is skipped."""
    REFUSE = "refuse"
    """A correctness patch whose Thespian source differs."""


@dataclass(frozen=True)
class Decision:
    patch: Patch
    verdict: Verdict
    found: str
    """The fingerprint of the installed Thespian's source."""


def decide(patches: Sequence[Patch], found: Mapping[str, str], plain: bool
           ) -> tuple[Decision, ...]:
    """What to do with each of ``patches``, given the fingerprints ``found``
    (by patch name) and the ``plain`` switch (see the module's text)."""
    verdicts: dict[str, Verdict] = {}
    for patch in patches:
        speed = patch.kind is PatchKind.SPEED
        if found[patch.name] != patch.fingerprint:
            verdicts[patch.name] = Verdict.SKIP_CHANGED if speed else Verdict.REFUSE
        elif speed and plain:
            verdicts[patch.name] = Verdict.SKIP_PLAIN
        else:
            verdicts[patch.name] = Verdict.INSTALL
    changed = True
    while changed:  # a skip spreads to every patch that requires it, however far
        changed = False
        for patch in patches:
            if verdicts[patch.name] is Verdict.INSTALL and any(
                    verdicts.get(name) is not Verdict.INSTALL for name in patch.requires):
                verdicts[patch.name] = Verdict.SKIP_REQUIRED
                changed = True
    return tuple(Decision(p, verdicts[p.name], found[p.name]) for p in patches)


def found_fingerprint(patch: Patch) -> str:
    """The fingerprint of the installed Thespian's source that ``patch`` was
    written against (Thespian's own, even with the patch in force)."""
    return fingerprint(patch.written_against)


def thespian_version() -> str:
    from importlib import metadata

    return metadata.version("thespian")


def in_force(patch: Patch) -> bool:
    """Every attribute ``patch`` replaces holds its replacement in this process."""
    return all(r.place.get() is r.new for r in patch.replaces)


def _install(patch: Patch) -> None:
    for replacement in patch.replaces:
        if replacement.place.get() is not replacement.new:
            remember_original(replacement.place)
            replacement.place.set(replacement.new)


def _refusal(refused: Sequence[Decision], version: str) -> ThespianMismatch:
    first = refused[0]
    names = ", ".join(d.patch.name for d in refused)
    return ThespianMismatch(
        f"supervisors cannot run on Thespian {version}: its correctness patch "
        f"{first.patch.name!r} ({first.patch.does}) was written against "
        f"{', '.join(map(str, first.patch.written_against))} of Thespian {THESPIAN_VERSION} "
        f"(fingerprint {first.patch.fingerprint}), and the installed source differs "
        f"(fingerprint {first.found}). Install thespian=={THESPIAN_VERSION}, the version "
        f"supervisors is pinned to, or check the patch against the new source and record "
        f"its fingerprint in supervisors/_thespian/patch_table.py.",
        patches=names, thespian=version, written_for=THESPIAN_VERSION)


def _log_skips(skipped: Sequence[Decision], log: Any, version: str) -> None:
    for decision in skipped:
        patch = decision.patch
        fields = {"patch": patch.name, "reason": decision.verdict.value, "thespian": version,
                  "written_for": THESPIAN_VERSION}
        if decision.verdict is Verdict.SKIP_PLAIN:
            log.info("thespian_patch_skipped", **fields)
        elif decision.verdict is Verdict.SKIP_REQUIRED:
            log.warning("thespian_patch_skipped", requires=list(patch.requires), **fields)
        else:
            log.warning("thespian_patch_skipped", expected=patch.fingerprint,
                        found=decision.found, **fields)


def apply_table(patches: Sequence[Patch], *, plain: bool,
                logger: Callable[[], Any], version: Callable[[], str] = thespian_version
                ) -> tuple[Decision, ...]:
    """Decide and install ``patches`` (see the module's text); raise
    :class:`~supervisors._errors.ThespianMismatch` for a correctness patch that
    does not fit, before installing any. Each skip is logged on ``logger()``
    (called only if something was skipped)."""
    decisions = decide(patches, {p.name: found_fingerprint(p) for p in patches}, plain)
    refused = [d for d in decisions if d.verdict is Verdict.REFUSE]
    if refused:
        raise _refusal(refused, version())
    for decision in decisions:
        if decision.verdict is Verdict.INSTALL:
            _install(decision.patch)
    skipped = [d for d in decisions if d.verdict is not Verdict.INSTALL]
    if skipped:
        _log_skips(skipped, logger(), version())
    return decisions


_DECISIONS: tuple[Decision, ...] | None = None


def install_patches() -> tuple[Decision, ...]:
    """Install :data:`~supervisors._thespian.patch_table.PATCHES` in this process,
    once; the decisions taken."""
    global _DECISIONS
    if _DECISIONS is None:
        _DECISIONS = apply_table(PATCHES, plain=os.environ.get(PLAIN_THESPIAN_ENV) == "1",
                                 logger=_log.get_logger)
    return _DECISIONS
