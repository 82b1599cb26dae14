"""Ages for ``prune``: ``"7d"``, ``"12h"``, ``"30m"``, ``"90s"``, ``"2w"`` or a
number of seconds, checked at the boundary (``ConfigError`` naming the field)."""

from __future__ import annotations

import math
import re
from typing import Any

from hayata_py._errors import ConfigError

__all__ = ["parse_age"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*")


def parse_age(value: Any, field: str = "older_than") -> float:
    """Seconds of ``value``: a number >= 0, or digits with a unit s/m/h/d/w."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isfinite(value) and value >= 0:
            return float(value)
    elif isinstance(value, str):
        match = _AGE.fullmatch(value)
        if match:
            return float(match.group(1)) * _UNITS[match.group(2) or "s"]
    raise ConfigError(field, f"must be an age such as '7d', '12h', '30m', '90s', '2w' or a "
                      f"number of seconds >= 0, got {value!r}")
