"""A waiting run (``Run(wait=True)``, what ``AgentRef.invoke`` sends) with a bad
option is refused by the agent's check of a run, naming the field (pure; the
invoke on real processes: ``tests/runtime/test_invoke.py``)."""

from __future__ import annotations

from typing import Any

import pytest

import hayata_py as hy
from hayata_py._actors.run_checks import validate_run
from hayata_py.messages import Run


@pytest.mark.parametrize(("change", "field"), [
    ({"wait": True}, "invocation_id"),
    ({"wait": "yes", "invocation_id": "a" * 32}, "wait"),
    ({"invocation_id": "A" * 32}, "invocation_id"),
    ({"invocation_id": "abc"}, "invocation_id"),
    ({"invocation_id": 12}, "invocation_id"),
    ({"invocation_id": "../" + "a" * 29}, "invocation_id"),
    ({"wait": True, "invocation_id": "b" * 32, "subscriber": hy.CALLER}, "subscriber"),
])
def test_a_bad_waiting_run_is_refused_naming_the_field(change: dict[str, Any], field: str
                                                       ) -> None:
    rejected = validate_run(Run(None, **change))
    assert rejected is not None and rejected.code == "invalid_option"
    assert rejected.details["field"] == field, rejected
