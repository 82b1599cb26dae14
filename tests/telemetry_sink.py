"""Telemetry handlers used by the tests: they run in actor processes and write
JSON lines to the file named by ``$HAYATA_TEST_TELEMETRY``."""

from __future__ import annotations

import json
import os
from typing import Any


def record(event: tuple[str, ...], measurements: dict[str, Any], metadata: dict[str, Any],
           config: Any) -> None:
    with open(os.environ["HAYATA_TEST_TELEMETRY"], "a") as f:
        f.write(json.dumps({"event": list(event), "measurements": measurements,
                            "metadata": metadata, "pid": os.getpid()}) + "\n")


def explode(event: tuple[str, ...], measurements: dict[str, Any], metadata: dict[str, Any],
            config: Any) -> None:
    raise RuntimeError("handler bug")
