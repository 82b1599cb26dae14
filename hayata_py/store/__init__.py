"""Durable task store for crash recovery (see :class:`TaskStore`)."""

from hayata_py.store._classify import (
    ExecutionClassification,
    TaskClass,
    classify_execution,
    classify_task,
)
from hayata_py.store._records import ActiveExecution, InvocationRecord, TaskRecord, task_id_for

__all__ = [
    "ActiveExecution",
    "ExecutionClassification",
    "InvocationRecord",
    "TaskClass",
    "TaskRecord",
    "classify_execution",
    "classify_task",
    "task_id_for",
]
