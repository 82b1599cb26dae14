"""Health and server information."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient

pytestmark = pytest.mark.timeout(60)


def test_ok_answers(client: SyncLangGraphClient) -> None:
    """``GET /ok`` answers 200 with ``{"ok": true}``."""
    assert client.http.get("/ok")["ok"] is True


def test_info_answers_an_object(client: SyncLangGraphClient) -> None:
    """``GET /info`` answers 200 with a JSON object (agent-chat-ui only checks the 200)."""
    info = client.http.get("/info")
    assert isinstance(info, dict)
    assert isinstance(info.get("flags", {}), dict)
