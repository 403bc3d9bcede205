"""Every error the core defines is in the hierarchy errors.py describes."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import chatkeep.core
from chatkeep.core import ChatkeepError, errors


def core_modules() -> list[str]:
    names = ["chatkeep.core"]
    for info in pkgutil.walk_packages(chatkeep.core.__path__, "chatkeep.core."):
        names.append(info.name)
    return names


def test_every_exception_class_of_the_core_derives_from_chatkeep_error() -> None:
    defined = {}
    for name in core_modules():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("chatkeep.core")
                and not attribute.startswith("_")
            ):
                defined[f"{value.__module__}.{value.__qualname__}"] = value
    assert "chatkeep.core.errors.EncodeError" in defined  # the walk sees the errors
    outside = sorted(name for name, cls in defined.items() if not issubclass(cls, ChatkeepError))
    assert outside == []


def test_errors_are_defined_in_errors_py_and_listed_there() -> None:
    for name in ("EncodeError", "ToolError"):
        cls = getattr(chatkeep.core, name)
        assert cls.__module__ == "chatkeep.core.errors", name
        assert name in errors.__all__
    from chatkeep.core.codec import EncodeError
    from chatkeep.core.tools import ToolError

    assert EncodeError is errors.EncodeError and ToolError is errors.ToolError


def test_read_only_and_missing_store_errors_are_core_types_that_pickle() -> None:
    import pickle

    from chatkeep import core
    from chatkeep.core import backend

    for name in ("ReadOnlyStore", "StoreNotFound"):
        assert getattr(core, name) is getattr(backend, name) is getattr(errors, name)
    read_only = errors.ReadOnlyStore("postgres", "append")
    assert isinstance(read_only, errors.CapabilityMissing)
    assert (read_only.backend, read_only.capability, read_only.operation) == (
        "postgres",
        "append",
        "append",
    )
    assert "read-only" in str(read_only) and "append" in str(read_only)
    missing = errors.StoreNotFound("store 'x' does not exist")
    assert isinstance(missing, errors.StoreUnavailable)
    for error in (read_only, missing):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
    assert pickle.loads(pickle.dumps(read_only)).operation == "append"
