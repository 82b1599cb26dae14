"""Restart intensity: the pure decision OTP makes before every restart."""

from __future__ import annotations

from collections.abc import Sequence


def add_restart(
    restarts: Sequence[float], now: float, intensity: int, period: float
) -> tuple[tuple[float, ...], bool]:
    """Record a restart at ``now`` and say whether the limit is exceeded.

    Keeps only the restarts within the last ``period`` seconds, its edge
    included (``now - t <= period``, as OTP's ``supervisor:add_restart`` keeps
    ``R >= Now - Period``), adds ``now``, and returns ``(kept, exceeded)``
    where ``exceeded`` is true when more than ``intensity`` restarts fall
    within the period. A supervisor that sees
    ``exceeded`` stops all its children and exits abnormally.
    """
    kept = (*tuple(t for t in restarts if now - t <= period), now)
    return kept, len(kept) > intensity
