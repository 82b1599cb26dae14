"""The fast write path: each hot write's happy path as fenced driver
statements in one short transaction, without SQLAlchemy's execution layer.

:mod:`.statements` holds the statements and the one builder of each write's
statements; :mod:`.transaction` the one transaction that runs them, shared by
the store's engine (:meth:`~hayata_py.store._sql.engine.EngineHolder.write_all`)
and the edge's :class:`~hayata_py.store._fast.writer.TaskWriter`
(:mod:`.writer`: a task's records on one plain driver connection, no engine);
:mod:`.writequeue` and :mod:`.walsync` how SQLite's writers take turns and
reach the disk. A fast write that changes nothing wrote nothing: its caller
then takes the general path (:mod:`hayata_py.store._sql`), which re-checks
everything and raises the precise error.
"""
