"""The table of Thespian patches (``supervisors/_thespian/patch_table.py``)
and its installer: the pin, the installed Thespian and the fingerprints
agree; every patch is in force; a speed patch that does not fit is skipped and
logged once; a correctness patch that does not fit refuses, naming itself and
the Thespian version. That actor processes run every patch, and the plain
switch in a fresh process: ``tests/supervisors/test_thespian_patches_in_processes.py``."""

from __future__ import annotations

import re
import sys
import tomllib
import types
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import supervisors
from supervisors._errors import SupervisorError, ThespianMismatch
from supervisors._thespian import fingerprint as F
from supervisors._thespian import installer as I
from supervisors._thespian.patch_table import (
    PATCHES,
    THESPIAN_VERSION,
    Patch,
    PatchKind,
    Replacement,
)

pytestmark = pytest.mark.timeout(60)

ROOT = Path(supervisors.__file__).parent.parent


def _pinned_thespian() -> str:
    """The version ``pyproject.toml`` pins Thespian to (``thespian==X``)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = [re.fullmatch(r"thespian\s*==\s*([\w.]+)", dep.strip())
            for dep in project["project"]["dependencies"] if dep.startswith("thespian")]
    assert len(pins) == 1 and pins[0] is not None, "Thespian must be pinned with =="
    return pins[0].group(1)


def test_the_pin_the_installed_thespian_and_the_table_agree() -> None:
    # A new Thespian: read each patch's Thespian source against its replacement,
    # record the new fingerprints and THESPIAN_VERSION, then move the pin.
    assert _pinned_thespian() == THESPIAN_VERSION
    assert metadata.version("thespian") == THESPIAN_VERSION


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_each_fingerprint_is_the_installed_thespians(patch: Patch) -> None:
    assert I.found_fingerprint(patch) == patch.fingerprint


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_each_patch_is_in_force_and_was_installed(patch: Patch) -> None:
    assert I.in_force(patch)
    decided = {d.patch.name: d.verdict for d in I.install_patches()}
    assert decided[patch.name] is I.Verdict.INSTALL


def test_the_table_is_well_formed() -> None:
    names = [p.name for p in PATCHES]
    assert len(set(names)) == len(names)
    places = [r.place for p in PATCHES for r in p.replaces]
    assert len(set(places)) == len(places), "two patches replace one attribute"
    for index, patch in enumerate(PATCHES):
        assert patch.replaces and patch.written_against and patch.does
        assert re.fullmatch(r"[0-9a-f]{12}", patch.fingerprint)
        for name in patch.requires:  # installed before it, and only between speed patches
            assert name in names[:index]
            assert patch.kind is PatchKind.SPEED
        for replacement in patch.replaces:
            assert replacement.place.module.startswith("thespian.")


def test_the_correctness_patches_are_the_ones_supervision_relies_on() -> None:
    assert {p.name for p in PATCHES if p.kind is PatchKind.CORRECTNESS} == {
        "loopback_bind", "child_exits", "launcher_reap", "exit_drain"}


def test_a_fingerprint_reads_the_source_with_its_decorators() -> None:
    from thespian.system.transport.TCPTransport import TCPTransport

    text = F.source_of(TCPTransport._check_fd)  # a staticmethod: its decorator comes first
    assert text.lstrip().startswith("@staticmethod")
    assert "def _check_fd(fd):" in text and "sel.close()" in text
    assert F.source_of(None) == "" and F.source_of(len) == ""


# -- the policy, on a table of our own ------------------------------------------------------


class Target:
    def speed(self) -> str:
        return "thespian"

    def exact(self) -> str:
        return "thespian"

    def other(self) -> str:
        return "thespian"


def _faster(self: Any) -> str:
    return "patched"


def _exacter(self: Any) -> str:
    return "patched"


@pytest.fixture
def module() -> Iterator[types.ModuleType]:
    """A stand-in for a Thespian module, with a class to patch."""
    fake = types.ModuleType("fake_thespian_module")
    fake.Target = type("Target", (), {"speed": Target.speed, "exact": Target.exact,
                                      "other": Target.other})
    sys.modules[fake.__name__] = fake
    yield fake
    del sys.modules[fake.__name__]
    for place in [p for p in F._ORIGINALS if p.module == fake.__name__]:
        del F._ORIGINALS[place]


def _patch(name: str, kind: PatchKind, attribute: str, new: Any, fits: bool,
           requires: tuple[str, ...] = ()) -> Patch:
    place = F.Place("fake_thespian_module", f"Target.{attribute}")
    found = F.fingerprint((F.Place(__name__, f"Target.{attribute}"),))
    return Patch(name=name, kind=kind, does=f"{name} does", replaces=(Replacement(place, new),),
                 written_against=(place,), fingerprint=found if fits else "000000000000",
                 requires=requires)


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))


def test_a_speed_patch_that_does_not_fit_is_skipped_and_logged_once(
        module: types.ModuleType) -> None:
    log = Log()
    table = (_patch("fits", PatchKind.SPEED, "exact", _exacter, fits=True),
             _patch("changed", PatchKind.SPEED, "speed", _faster, fits=False),
             _patch("needs_changed", PatchKind.SPEED, "other", _faster, fits=True,
                    requires=("changed",)))
    decisions = I.apply_table(table, plain=False, logger=lambda: log, version=lambda: "9.9")
    assert [d.verdict for d in decisions] == [
        I.Verdict.INSTALL, I.Verdict.SKIP_CHANGED, I.Verdict.SKIP_REQUIRED]
    assert module.Target().exact() == "patched"
    assert module.Target().speed() == "thespian"  # Thespian's own code runs
    assert module.Target().other() == "thespian"
    assert [(level, event, fields["patch"], fields["reason"]) for level, event, fields
            in log.lines] == [
        ("warning", "thespian_patch_skipped", "changed", "thespian_source_changed"),
        ("warning", "thespian_patch_skipped", "needs_changed", "required_patch_skipped")]
    assert log.lines[0][2]["thespian"] == "9.9"
    assert log.lines[0][2]["written_for"] == THESPIAN_VERSION
    assert log.lines[0][2]["expected"] == "000000000000"


def test_a_correctness_patch_that_does_not_fit_refuses_before_installing_anything(
        module: types.ModuleType) -> None:
    log = Log()
    table = (_patch("fast", PatchKind.SPEED, "speed", _faster, fits=True),
             _patch("exact", PatchKind.CORRECTNESS, "exact", _exacter, fits=False))
    with pytest.raises(ThespianMismatch) as raised:
        I.apply_table(table, plain=False, logger=lambda: log, version=lambda: "9.9")
    error = raised.value
    assert isinstance(error, SupervisorError) and isinstance(error, ImportError)
    assert error.code == "thespian_mismatch"
    assert "'exact'" in str(error) and "Thespian 9.9" in str(error)
    assert f"thespian=={THESPIAN_VERSION}" in str(error)
    assert error.details == {"patches": "exact", "thespian": "9.9",
                             "written_for": THESPIAN_VERSION}
    assert module.Target().speed() == "thespian" and module.Target().exact() == "thespian"
    assert log.lines == []


def test_the_plain_switch_skips_only_the_speed_patches(module: types.ModuleType) -> None:
    log = Log()
    table = (_patch("fast", PatchKind.SPEED, "speed", _faster, fits=True),
             _patch("exact", PatchKind.CORRECTNESS, "exact", _exacter, fits=True))
    decisions = I.apply_table(table, plain=True, logger=lambda: log, version=lambda: "9.9")
    assert [d.verdict for d in decisions] == [I.Verdict.SKIP_PLAIN, I.Verdict.INSTALL]
    assert module.Target().speed() == "thespian" and module.Target().exact() == "patched"
    assert [(level, fields["patch"]) for level, _e, fields in log.lines] == [("info", "fast")]


def test_nothing_skipped_logs_nothing_and_the_fingerprint_still_reads_thespians(
        module: types.ModuleType) -> None:
    table = (_patch("fast", PatchKind.SPEED, "speed", _faster, fits=True),)

    def no_log() -> Any:
        raise AssertionError("nothing was skipped: no logger needed")

    I.apply_table(table, plain=False, logger=no_log, version=lambda: "9.9")
    assert I.in_force(table[0])
    assert I.found_fingerprint(table[0]) == table[0].fingerprint  # the original, not _faster


def test_the_decision_table() -> None:
    def row(name: str, kind: PatchKind, requires: tuple[str, ...] = ()) -> Patch:
        return Patch(name=name, kind=kind, does="", replaces=(), written_against=(),
                     fingerprint="a", requires=requires)

    table = (row("c", PatchKind.CORRECTNESS), row("s1", PatchKind.SPEED),
             row("s2", PatchKind.SPEED, ("s1",)), row("s3", PatchKind.SPEED, ("s2",)))
    V = I.Verdict
    cases = [
        ({}, False, [V.INSTALL, V.INSTALL, V.INSTALL, V.INSTALL]),
        ({"s1": "b"}, False, [V.INSTALL, V.SKIP_CHANGED, V.SKIP_REQUIRED, V.SKIP_REQUIRED]),
        ({"s3": "b"}, False, [V.INSTALL, V.INSTALL, V.INSTALL, V.SKIP_CHANGED]),
        ({"c": "b"}, False, [V.REFUSE, V.INSTALL, V.INSTALL, V.INSTALL]),
        ({"c": "b"}, True, [V.REFUSE, V.SKIP_PLAIN, V.SKIP_PLAIN, V.SKIP_PLAIN]),
        ({}, True, [V.INSTALL, V.SKIP_PLAIN, V.SKIP_PLAIN, V.SKIP_PLAIN]),
    ]
    for changed, plain, expected in cases:
        found = {p.name: changed.get(p.name, "a") for p in table}
        assert [d.verdict for d in I.decide(table, found, plain)] == expected, (changed, plain)

