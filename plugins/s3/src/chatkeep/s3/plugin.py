"""Registers the ``s3`` backend with chatkeep (entry point ``s3`` in group ``chatkeep``).

This module is the one place the backend's capabilities are declared. It imports no
driver: the store class is named as a ``"module:attribute"`` string, so listing backends
never imports boto3.
"""

from __future__ import annotations

from chatkeep.core.backend import (
    CLOSE,
    CONDITIONAL,
    DELETE,
    DURABLE,
    LIST_SESSIONS,
    NAMESPACE,
    SHARED,
    RegisterBackend,
    hookimpl,
)

__all__ = ["CAPABILITIES", "chatkeep_register_backends"]

#: What the S3 store offers beyond ``append`` and ``read``.
CAPABILITIES: frozenset[str] = frozenset(
    {DELETE, LIST_SESSIONS, CLOSE, SHARED, DURABLE, CONDITIONAL, NAMESPACE}
)


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``s3`` for ``s3://bucket/prefix?...`` URLs."""
    register(
        "s3",
        "chatkeep.s3.store:S3Store",
        schemes=["s3"],
        capabilities=sorted(CAPABILITIES),
        description="Amazon S3 and S3-compatible object stores (boto3); one object per append",
    )
