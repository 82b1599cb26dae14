"""The general SQL path: :class:`~hayata_py.store._sql.store.SqlTaskStore`,
the whole :class:`~hayata_py.store.TaskStore` contract on SQLAlchemy (SQLite
and PostgreSQL).

One module per section of the contract, each holding that section's class
(:mod:`.invocations`, :mod:`.leases`, :mod:`.threads`, :mod:`.tasks`,
:mod:`.cache`, :mod:`.events`), joined by :mod:`.store`; :mod:`.base` holds
the state they share and the fencing check, :mod:`.engine` the engine of each
process and its retried transactions, :mod:`.schema` the tables and
:mod:`.migrate` the migrations. The hot writes try the fast write path's
statements first (:mod:`hayata_py.store._fast`).
"""
