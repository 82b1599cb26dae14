"""Every change ``supervisors`` makes to Thespian, in one package.

Importing any module of this package installs the patches of
:mod:`~supervisors._thespian.patch_table` (one table: what each replaces,
with what, against which of Thespian's source it was written, and whether
correctness or only speed depends on it) in this process and so in every
process forked from it: the admin and every actor.

Every patch is checked against the fingerprint of Thespian's source before it
is installed (:mod:`~supervisors._thespian.installer`), and what happens when
it does not match depends on what relies on it:

- a **correctness** patch (the loopback bind, every child exit reported, the
  admin's launcher reaped, an exiting actor's last sends drained) refuses:
  importing ``supervisors`` raises
  :class:`supervisors._errors.ThespianMismatch`, naming the patch and the
  Thespian version. Without the patch, ``supervisors`` would be wrong (an
  actor port open to the network, a parent that never hears of a child's
  death, a leaked process per start), not slow, so it must not start;
- a **speed** patch (the transport's selector, loop and frame reads, lazy
  debug text, address pickles, each actor loop's frame-stack chunk, a
  handler's sends pushed out while it runs) is
  skipped: Thespian's own code runs, slower but right, and the skip is logged
  once, at import (structlog ``thespian_patch_skipped``).

Thespian is pinned (``pyproject.toml``) to the version the fingerprints were
taken on; a test fails when the pin, the installed Thespian and the table
disagree.

One module per concern:

- ``patch_table``: the table; ``fingerprint``: the source a patch was written
  against and its hash; ``installer``: the decision and the installation;
- ``bind_address``: loopback bind and advertised address; ``child_exits``: no
  lost child exit, no zombie launcher; ``exit_drain``: an exiting actor's
  last sends go out; ``system_config``: the system base,
  convention timings, admin port and Thespian's logging (settings, not
  patches);
- ``poll_selector``, ``transport_loop``, ``frame_read``: the transport's loop;
  ``push_transmits``: a handler's sends to one target go out while it runs;
  ``lazy_identify``: debug text; ``address_pickle``: address pickles;
  ``stack_chunk``: each actor loop's frame-stack chunk.
"""

from supervisors._thespian.bind_address import advertise_loopback_by_default
from supervisors._thespian.installer import install_patches

advertise_loopback_by_default()
install_patches()
