"""A served graph's agent options: its ``async def`` nodes run many tasks per
edge by default; the config's ``"hayata"`` key sets them per graph and node,
and a wrong one is refused naming the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hayata_py._errors import ConfigError
from hayata_py.serve import EDGE_CONCURRENCY, agent_options
from hayata_py.serve._graphs import read_config

pytestmark = pytest.mark.timeout(60)

SUITE = Path(__file__).resolve().parents[1] / "serve_api"


def _config(tmp_path: Path, hayata: Any = None) -> Path:
    shutil.copy(SUITE / "graphs.py", tmp_path / "graphs.py")
    raw: dict[str, Any] = {"graphs": {"steps": "./graphs.py:steps", "ask": "./graphs.py:ask"}}
    if hayata is not None:
        raw["hayata"] = hayata
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps(raw))
    return path


def test_async_nodes_run_many_tasks_per_edge_by_default(tmp_path: Path) -> None:
    specs, _ = read_config(_config(tmp_path))
    options = {spec.graph_id: agent_options(spec) for spec in specs}
    # steps' middle node is an async def; ask's nodes are plain functions
    assert options == {"steps": {"edge_concurrency": {"middle": EDGE_CONCURRENCY}},
                       "ask": {}}


def test_the_config_sets_a_graphs_concurrency(tmp_path: Path) -> None:
    specs, _ = read_config(_config(tmp_path, {"steps": {
        "edge_concurrency": {"middle": 7}, "node_concurrency": {"first": 2}}}))
    steps = next(spec for spec in specs if spec.graph_id == "steps")
    assert agent_options(steps) == {"edge_concurrency": {"middle": 7},
                                    "node_concurrency": {"first": 2}}


@pytest.mark.parametrize(("hayata", "field"), [
    ({"nope": {}}, "hayata.nope"),
    ({"steps": {"max_steps": 3}}, "hayata.steps.max_steps"),
    ({"steps": {"edge_concurrency": {"middle": 0}}}, "hayata.steps.edge_concurrency"),
    ({"steps": {"edge_concurrency": 5}}, "hayata.steps.edge_concurrency"),
    ([1], "hayata"),
])
def test_a_wrong_option_is_refused_naming_it(tmp_path: Path, hayata: Any, field: str) -> None:
    with pytest.raises(ConfigError) as raised:
        read_config(_config(tmp_path, hayata))
    assert raised.value.details["field"] == field
