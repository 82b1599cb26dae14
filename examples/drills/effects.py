"""The side-effect file of the drill, test and chaos nodes: what really ran.

A node appends one line per event, its fields and then its process id, and
fsyncs it before going on, so a line survives a kill -9 the moment after.
"""

from __future__ import annotations

import os

import hayata_py as hy


def append_effect(ctx: hy.NodeContext, *fields: object) -> None:
    """Append ``<fields...> <pid>`` to the file named by ``ctx.input["effects"]``."""
    with open(ctx.input["effects"], "a") as f:
        f.write(" ".join(map(str, (*fields, os.getpid()))) + "\n")
        f.flush()
        os.fsync(f.fileno())
