"""Registers the ``s3`` backend with chatkeep (entry point ``s3`` in group ``chatkeep``).

The store class is named as a ``"module:attribute"`` string, so listing backends does not
import boto3.
"""

from __future__ import annotations

from chatkeep.core import hookimpl
from chatkeep.core.hookspecs import RegisterBackend

__all__ = ["chatkeep_register_backends"]


@hookimpl
def chatkeep_register_backends(register: RegisterBackend) -> None:
    """Register ``s3`` for ``s3://bucket/prefix?...`` URLs."""
    register(
        "s3",
        "chatkeep.s3.store:S3Store",
        schemes=["s3"],
        capabilities=["delete", "list_sessions", "close", "shared", "durable"],
        description="Amazon S3 and S3-compatible object stores (boto3); one object per append",
    )
