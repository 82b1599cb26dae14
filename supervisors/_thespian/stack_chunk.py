"""Each actor process's run loop on a data-stack chunk of its own.

CPython (3.11 and later) keeps the frames of a thread's Python calls in
chunks of 16 KiB. A call that does not fit in the current chunk maps a new
one, and returning from the first frame of a chunk unmaps it at once. An
actor process is forked deep inside its parent's handler and inherits that
stack, so its run loop starts wherever its parent left it. When a chunk's end
falls between the depth where the loop waits and the depth its handlers
reach, every message pays an ``mmap``, a ``munmap`` and the page faults of a
fresh chunk. That was measured at about 195 pairs per seq3 invocation in the
agent's process, about a tenth of its CPU. In a micro-benchmark, a call that
crosses a chunk's end costs 9 us instead of 1.

:func:`on_own_chunk` calls a function through a frame too big for any
ordinary chunk. CPython then maps one chunk of 64 KiB for it, and the called
function and everything it calls get the ~30 KiB left in that chunk: a loop
that never returns keeps its chunk for as long as the process lives. The
frame is about 34 KiB of local slots, set to NULL when the call begins (that
much more memory per process).

The ``stack_chunk`` patch replaces ``MultiProcManager.run`` (Thespian's
``ActorManager.run``, each actor process's loop, run in its forked process)
with :func:`run_on_own_chunk`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from thespian.system.multiprocCommon import MultiProcManager

__all__ = ["PAD_SLOTS", "on_own_chunk", "run_on_own_chunk"]

T = TypeVar("T")

PAD_SLOTS = 4200
"""Local slots of the padding frame: with CPython's overhead of 1,000 slots
per new chunk, 4,200 (8 bytes each) needs more than 32 KiB, so the chunk is
64 KiB and leaves the called function about 3,800 slots (3.11's
``MINIMUM_OVERHEAD`` and chunk doubling; a later version only changes how
much is left)."""


def _make_pad(slots: int) -> Callable[..., Any]:
    names = " = ".join(f"_s{i}" for i in range(slots))
    source = ("def _pad(fn, args, kwargs):\n"
              "    if fn is None:  # never: it only makes the names local slots\n"
              f"        {names} = None\n"
              "    return fn(*args, **kwargs)\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<supervisors._thespian.stack_chunk>", "exec"), namespace)
    pad: Callable[..., Any] = namespace["_pad"]
    return pad


_pad = _make_pad(PAD_SLOTS)


def on_own_chunk(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, called from a frame that starts a chunk of its
    own (see the module's text)."""
    result: T = _pad(fn, args, kwargs)
    return result


_THESPIAN_RUN = MultiProcManager.run
"""Thespian's own actor loop, as imported (the ``stack_chunk`` patch replaces it)."""


def run_on_own_chunk(self: Any) -> None:
    """``MultiProcManager.run``: Thespian's, through :func:`on_own_chunk`."""
    on_own_chunk(_THESPIAN_RUN, self)
