"""The drill graph with ``right`` declared idempotent (drill 2, third way out).

``hayata agent start examples.drills.idempotent:config`` starts agent ``drill``
whose uncertain ``right`` tasks are run again by ``hayata recover`` instead of
stopping recovery with ``task_execution_uncertain``.
"""

from __future__ import annotations

import hayata_py as hy
from examples.drills import graph


def config() -> hy.AgentConfig:
    return graph.config(idempotent=frozenset({"right"}))
