"""Referring to user functions by import path, so they survive process boundaries.

Nodes and decision policies run in other processes, and again after a
restart, so they are kept as ``"package.module:function"`` strings. A
function object is accepted only if that string leads back to the very same
object: lambdas, closures, nested functions and bound methods are refused
with the reason.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from hayata_py._errors import ConfigError

_WHY = (
    "it cannot cross a process boundary or be found again after a restart; "
    "use a module-level function or a 'package.module:function' string"
)


def callable_path(value: Any, field: str) -> str:
    """Return the import path of ``value`` (a function or a path string).

    Raises :class:`ConfigError` naming ``field`` when it is not a
    module-level function that can be imported again by name.
    """
    if isinstance(value, str):
        path = value.strip()
        module_name, sep, attr = path.partition(":")
        if not sep or not module_name or not attr:
            raise ConfigError(field, f"{value!r} is not 'package.module:function'")
        if module_name.startswith("."):
            raise ConfigError(field, f"{value!r} names a relative module; give the absolute "
                                     "one, e.g. 'package.module:function'")
        _import(path, field)
        return path
    if not callable(value):
        raise ConfigError(field, f"expected a function or 'package.module:function', "
                                 f"got {type(value).__name__}")
    name: str | None = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    module: str | None = getattr(value, "__module__", None)
    if inspect.ismethod(value):
        raise ConfigError(field, f"bound method {name} is refused: {_WHY}")
    if name == "<lambda>":
        raise ConfigError(field, f"a lambda is refused: {_WHY}")
    if name is None or module is None:
        raise ConfigError(field, f"{value!r} has no module-level name: {_WHY}")
    if "<locals>" in name or getattr(value, "__closure__", None):
        raise ConfigError(field, f"{name} is a nested function or closure: {_WHY}")
    if not inspect.isfunction(value) and not inspect.isbuiltin(value):
        raise ConfigError(field, f"{name} is not a plain function: {_WHY}")
    path = f"{module}:{name}"
    if _import(path, field) is not value:
        raise ConfigError(field, f"{path} does not lead back to this function: {_WHY}")
    return path


def exception_path(value: Any, field: str) -> str:
    """The ``module:Class`` path of an exception class (a class, or a path to one)."""
    if isinstance(value, str):
        path = value.strip()
        cls: Any = _import(path, field) if ":" in path and not path.startswith(".") else None
        if cls is None:
            raise ConfigError(field, f"{value!r} is not 'package.module:Class'")
    else:
        cls = value
        path = f"{getattr(cls, '__module__', '')}:{getattr(cls, '__qualname__', '')}"
        if "<locals>" in path or _import(path, field) is not cls:
            raise ConfigError(field, f"{path} does not lead back to this class: {_WHY}")
    if not isinstance(cls, type) or not issubclass(cls, BaseException):
        raise ConfigError(field, f"{value!r} is not an exception class")
    return path


def _import(path: str, field: str) -> Callable[..., Any]:
    try:
        return resolve_callable(path)
    except ImportError as exc:
        raise ConfigError(field, f"cannot import {path!r}: {exc}") from exc
    except AttributeError as exc:
        raise ConfigError(field, f"{path!r} not found: {exc}") from exc
    except Exception as exc:
        raise ConfigError(field, f"importing {path!r} raised {type(exc).__name__}: {exc}"
                          ) from exc


@lru_cache(maxsize=256)
def resolve_callable(path: str) -> Callable[..., Any]:
    """Import ``"package.module:qualified.name"`` (cached per process)."""
    module_name, _, attr = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise AttributeError(f"{path} is not callable")
    return obj  # type: ignore[no-any-return]


def import_problem(path: str) -> str | None:
    """Why ``path`` does not import as a function in this process (the reason,
    worded to follow the path in a message), or None if it does."""
    try:
        _import(path, "path")
    except ConfigError as exc:
        return str(exc).removeprefix("path: ")
    return None
