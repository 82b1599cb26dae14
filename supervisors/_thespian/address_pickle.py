"""Actor addresses pickled with plain integers for their socket kinds.

Every frame Thespian sends carries the sender's address, and many messages
carry more (a task names the agent its outcome goes to). An address
(``IPActorAddress``) holds its socket family and type as ``socket``'s enum
members (``AddressFamily.AF_INET``, ``SocketKind.SOCK_STREAM``), and pickle
writes an enum member as a call of its class: half of the ~9 us an address
took to pickle and of the ~7 us it took to load, on every message, twice for
a task (measured: ``docs/guide/performance.md``).

:func:`address_state` (``IPActorAddress.__getstate__``) writes those fields
as the integers they equal; :func:`address_restore` (``__setstate__``)
turns them back into the same enum members, so a loaded address is what it
was before. A process without this patch loads the integers as they are:
``IntEnum`` members equal, and hash as, their integers, so the address
compares, hashes and connects the same there too. The two are the
``address_pickle`` patch of :mod:`supervisors._thespian.patch_table`.
"""

from __future__ import annotations

import socket
from typing import Any

__all__ = ["address_restore", "address_state"]

_KINDS: dict[str, dict[int, Any]] = {
    "af": {int(member): member for member in socket.AddressFamily},
    "socktype": {int(member): member for member in socket.SocketKind},
}


def address_state(self: Any) -> dict[str, Any]:
    """``IPActorAddress.__getstate__``: its attributes without the cached text
    (as Thespian's), the socket kinds as plain integers."""
    state = dict(self.__dict__)
    state.pop("_str_form", None)  # rebuilt where it is needed, as Thespian does
    for key in ("af", "socktype", "proto"):
        value = state.get(key)
        if isinstance(value, int) and type(value) is not int:
            state[key] = int(value)
    return state


def address_restore(self: Any, state: dict[str, Any]) -> None:
    """``IPActorAddress.__setstate__``: the attributes, with the socket kinds
    as ``socket``'s enum members again (from either form of state)."""
    for key, members in _KINDS.items():
        value = state.get(key)
        if type(value) is int:
            state[key] = members.get(value, value)
    self.__dict__.update(state)
