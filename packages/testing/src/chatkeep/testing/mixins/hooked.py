"""Promises checked through the optional test hooks of :mod:`chatkeep.testing.hooks`.

Each mixin runs only where the backend provides its hook; elsewhere its row of the report
says ``not provided``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from chatkeep.core import CorruptRecord, Message, Record, Store, encode_records, new_id, read_view

from ..checks import new_session_id
from ..hooks import DAMAGE_KINDS, DURABILITY_LEVELS
from ._base import NOT_PROVIDED, ConformanceBase

__all__ = ["DamageTests", "DurabilityClaimTests", "ErasureTests"]

_MESSAGES = 6
_DAMAGED = 3


class DamageTests(ConformanceBase):
    """``chatkeep_damage``: damage is reported (``CorruptRecord`` with session and
    position), contained (earlier records read fine, the session stays appendable) and
    never silent (no shortened history)."""

    @pytest.mark.parametrize("kind", DAMAGE_KINDS)
    def test_damage_is_reported_and_contained(self, chatkeep_store: Store, kind: str) -> None:
        session = new_session_id("damage")
        messages = [
            (Message.user if n % 2 == 0 else Message.assistant)(f"m{n}", message_id=new_id())
            for n in range(_MESSAGES)
        ]
        stored = encode_records(messages)
        for record in stored:  # one record per append: one unit of storage on any layout
            chatkeep_store.append(session, [record])
        backend: Any = chatkeep_store.backend
        try:
            backend.chatkeep_damage(session, _DAMAGED, kind)
        except NotImplementedError:
            pytest.skip(NOT_PROVIDED + f"chatkeep_damage(kind={kind!r})")
        with pytest.raises(CorruptRecord) as error:
            read_view(chatkeep_store, session)
        assert error.value.session_id == session
        assert error.value.position == _DAMAGED, (
            f"{kind}: CorruptRecord names position {error.value.position}, not {_DAMAGED}"
        )
        assert chatkeep_store.read(session, 0, _DAMAGED) == stored[:_DAMAGED], (
            "the records before the damage no longer read back"
        )
        extra = encode_records([Message.user("after the damage", message_id=new_id())])
        chatkeep_store.append(session, extra)
        assert chatkeep_store.read(session, -1) == extra, "the damaged session is not appendable"
        with pytest.raises(CorruptRecord):
            read_view(chatkeep_store, session)


class ErasureTests(ConformanceBase):
    """``chatkeep_storage_contains``: after ``delete`` the bytes of the session's records
    are gone from the storage itself, not only from reads."""

    def test_delete_erases_the_bytes(self, chatkeep_store: Store) -> None:
        session, neighbour = new_session_id("erase"), new_session_id("erase-kept")
        marker = os.urandom(16).hex().encode()
        kept = os.urandom(16).hex().encode()
        chatkeep_store.append(session, [Record(f"m{n}", b"secret:" + marker) for n in range(3)])
        chatkeep_store.append(neighbour, [Record("k", b"kept:" + kept)])
        backend: Any = chatkeep_store.backend
        assert backend.chatkeep_storage_contains(marker), (
            "chatkeep_storage_contains does not find data that was just written"
        )
        chatkeep_store.delete(session)
        assert chatkeep_store.read(session) == []
        assert not backend.chatkeep_storage_contains(marker), (
            "delete hid the records, but their bytes are still in the storage"
        )
        assert backend.chatkeep_storage_contains(kept), "delete erased another session's bytes"


class DurabilityClaimTests(ConformanceBase):
    """``chatkeep_durability``: a store that declares ``durable`` survives power loss with
    its default settings (DESIGN section 10: the safe setting is the default)."""

    def test_durable_stores_default_to_surviving_power_loss(self, chatkeep_store: Store) -> None:
        backend: Any = chatkeep_store.backend
        claim = backend.chatkeep_durability()
        assert claim in DURABILITY_LEVELS, f"chatkeep_durability() returned {claim!r}"
        if chatkeep_store.supports("durable"):
            assert claim == "power", (
                f"the store declares durable, but with its default settings an acknowledged "
                f"append survives only: {claim!r}, not power loss"
            )
