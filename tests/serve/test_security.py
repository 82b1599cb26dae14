"""Who may talk to ``hayata serve``: the API key rule and check, and CORS,
against a real server subprocess (tests/serve/launch.py) with ``langgraph-sdk``
and httpx.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client

from hayata_py._errors import ConfigError
from hayata_py.cli.serve import API_KEY_ENV as CLI_API_KEY_ENV
from hayata_py.serve import API_KEY_ENV
from hayata_py.serve._security import check_exposure, cors_middleware
from tests.serve.launch import Served, hayata_serve, serve_command, serve_env, suite_workdir
from tests.serve_api.reference import free_port, stop_group
from tests.serve_api.support import STEPS

pytestmark = pytest.mark.timeout(120)

KEY = "s3cret-key-of-the-test"
FLAG_ORIGIN = "http://flag.example"
"""An origin allowed by ``--cors-origin``."""
CONFIG_ORIGIN = "http://config.example"
"""An origin allowed by the config's ``http.cors.allow_origins``."""
OTHER_ORIGIN = "http://elsewhere.example"


@pytest.fixture(scope="module")
def keyed() -> Iterator[Served]:
    """A loopback server with an API key and two allowed origins."""
    with hayata_serve(args=("--cors-origin", FLAG_ORIGIN), env=serve_env(**{API_KEY_ENV: KEY}),
                      config={"http": {"cors": {"allow_origins": [CONFIG_ORIGIN]}}}
                      ) as server:
        yield server


def test_a_host_beyond_loopback_without_a_key_is_refused_before_anything_starts() -> None:
    """``--host 0.0.0.0`` and no key: exit 2, the variable named, no data dir, no port."""
    with suite_workdir() as workdir:
        data_dir, port = workdir / "data", free_port()
        process = subprocess.Popen(
            serve_command(workdir, data_dir, port, "--host", "0.0.0.0"), cwd=workdir,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=serve_env(),
            start_new_session=True)
        try:
            _, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                stop_group(process)
        assert process.returncode == 2, err.decode()
        assert API_KEY_ENV in err.decode()
        assert not data_dir.exists()
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/ok", timeout=2.0)


def test_the_exposure_rule() -> None:
    """Loopback needs no key; any other address does; a name is not an address."""
    check_exposure("127.0.0.1", None)
    check_exposure("::1", None)
    check_exposure("0.0.0.0", KEY)
    for host, key in (("0.0.0.0", None), ("192.168.1.7", ""), ("localhost", KEY)):
        with pytest.raises(ConfigError) as refused:
            check_exposure(host, key)
        assert refused.value.details["field"] == "host"
    assert cors_middleware([]) == []
    assert CLI_API_KEY_ENV == API_KEY_ENV  # the CLI names it without the serve extra


def test_the_sdk_with_the_key_is_served(keyed: Served) -> None:
    """``api_key=`` (sent as ``x-api-key``): runs, streams and reads all work."""
    with get_sync_client(url=keyed.url, api_key=KEY, timeout=30.0) as client:
        thread = client.threads.create()["thread_id"]
        done: Any = client.runs.wait(thread, STEPS, input={"label": "s"})
        assert done["steps"] == ["s:first", "s:middle", "s:last"]
        parts = list(client.runs.stream(thread, STEPS, input={"label": "t"},
                                        stream_mode="values"))
        assert parts[0].event == "metadata"
        assert parts[-1].data["steps"][-1] == "t:last"
        assert client.threads.get(thread)["status"] == "idle"


def _threads(url: str) -> int:
    answer = httpx.post(f"{url}/threads/search", json={"limit": 1000},
                        headers={"x-api-key": KEY}, timeout=30)
    answer.raise_for_status()
    return len(answer.json())


def test_no_key_or_a_wrong_key_is_refused_and_nothing_written(keyed: Served) -> None:
    """Missing: 403; wrong: 401; each naming the header; only ``GET /ok`` is open."""
    before = _threads(keyed.url)
    missing = httpx.post(f"{keyed.url}/threads", json={}, timeout=30)
    assert missing.status_code == 403
    assert "x-api-key" in missing.json()["detail"]
    wrong = httpx.post(f"{keyed.url}/threads", json={}, headers={"x-api-key": KEY + "x"},
                       timeout=30)
    assert wrong.status_code == 401
    assert "x-api-key" in wrong.json()["detail"]
    thread = "00000000-0000-0000-0000-000000000001"
    for path in ("/info", "/threads/search", f"/hayata/threads/{thread}/abandon",
                 f"/hayata/threads/{thread}/tasks/{thread}/resolve"):
        assert httpx.request("GET" if path == "/info" else "POST", f"{keyed.url}{path}",
                             json={}, timeout=30).status_code == 403
    with get_sync_client(url=keyed.url, api_key="wrong", timeout=30.0) as client, \
            pytest.raises(httpx.HTTPStatusError) as refused:
        client.threads.create()
    assert refused.value.response.status_code == 401
    assert _threads(keyed.url) == before
    assert httpx.get(f"{keyed.url}/ok", timeout=30).status_code == 200


def _preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(f"{url}/threads", timeout=30, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-api-key"})


def test_cors_for_the_configured_origins_only(keyed: Served) -> None:
    """A preflight (no key needed) from either configured origin is allowed;
    answers expose ``Content-Location`` and ``Location``; another origin gets no
    allowing CORS header, on the preflight or the request."""
    for origin in (FLAG_ORIGIN, CONFIG_ORIGIN):
        allowed = _preflight(keyed.url, origin)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == origin
        assert "POST" in allowed.headers["access-control-allow-methods"]
        assert "x-api-key" in allowed.headers["access-control-allow-headers"].lower()
    headers = {"Origin": FLAG_ORIGIN, "x-api-key": KEY}
    thread = httpx.post(f"{keyed.url}/threads", json={}, headers=headers,
                        timeout=30).json()["thread_id"]
    run = httpx.post(f"{keyed.url}/threads/{thread}/runs/wait", json={
        "assistant_id": STEPS, "input": {"label": "c"}}, headers=headers, timeout=30)
    assert run.status_code == 200
    assert run.headers["access-control-allow-origin"] == FLAG_ORIGIN
    exposed = {h.strip().lower() for h in
               run.headers["access-control-expose-headers"].split(",")}
    assert {"content-location", "location"} <= exposed
    assert run.headers["content-location"].startswith(f"/threads/{thread}/runs/")
    refused = httpx.post(f"{keyed.url}/threads", json={}, headers={"Origin": FLAG_ORIGIN},
                         timeout=30)
    assert refused.status_code == 403
    assert refused.headers["access-control-allow-origin"] == FLAG_ORIGIN
    other = _preflight(keyed.url, OTHER_ORIGIN)
    assert "access-control-allow-origin" not in other.headers
    assert "access-control-expose-headers" not in other.headers
    plain = httpx.post(f"{keyed.url}/threads", json={},
                       headers={"Origin": OTHER_ORIGIN, "x-api-key": KEY}, timeout=30)
    assert plain.status_code == 200
    # (Starlette names the exposed headers to any origin; without an allowed
    # origin a browser withholds the answer all the same)
    assert "access-control-allow-origin" not in plain.headers


def test_without_origins_there_is_no_cors(tmp_path: Path) -> None:
    """The default server (tests/serve/launch.py, no origins): no CORS header at all."""
    with hayata_serve(log=tmp_path / "serve.log") as plain:
        preflight = _preflight(plain.url, FLAG_ORIGIN)
        assert not [h for h in preflight.headers if h.startswith("access-control-")]
        with contextlib.closing(httpx.Client(timeout=30)) as http:
            answer = http.post(f"{plain.url}/threads", json={},
                               headers={"Origin": FLAG_ORIGIN})
        assert answer.status_code == 200
        assert not [h for h in answer.headers if h.startswith("access-control-")]
