"""Alembic migrations of the task store schema (applied by ``open_store``)."""
