"""MAF ``Message`` <-> chatkeep :class:`~chatkeep.core.Message`, losslessly.

Both sides share one dict shape (MAF's ``Message.to_dict()``), so a conversion is that dict
read by chatkeep's codec (``tagged=False``: MAF's values as they are, NaN included), which
keeps every field it does not model (see the core README's codec section). Two things
differ on purpose:

- **Ids.** A stored message's ``message_id`` is its chatkeep record id, always a fresh
  :func:`chatkeep.core.new_id` (a framework's ids are not unique: one id on two messages
  would be one record). The id MAF gave the message, if any, is kept in the stored
  message as the top-level field ``framework_message_id`` and handed back to MAF on load;
  a message MAF gave no id to comes back with its chatkeep id.
- **What MAF itself never persists** is not stored either: ``raw_representation`` (the
  provider SDK's objects) and an exception's text (MAF's ``to_dict()`` replaces it with a
  fixed marker because it may be sensitive; its own stores do the same).
"""

from __future__ import annotations

import copy
from typing import Any

from agent_framework import Content as MafContent
from agent_framework import Message as MafMessage

from chatkeep.core import Message, Record, encode_records, message_from_dict, new_id
from chatkeep.core.codec import content_to_dict

__all__ = ["FRAMEWORK_MESSAGE_ID", "from_maf", "to_maf", "to_record"]

#: The top-level field of a stored message that keeps the id MAF gave it.
FRAMEWORK_MESSAGE_ID = "framework_message_id"


def from_maf(message: MafMessage, message_id: str) -> Message:
    """The chatkeep message for MAF ``message``, stored under ``message_id``.

    Raises :class:`~chatkeep.core.InvalidMessage` if MAF's dict is not a message chatkeep
    can read (a content of a known type with a field of the wrong type).
    """
    converted = message_from_dict(message.to_dict(), tagged=False)
    framework_id = converted.message_id
    converted.message_id = message_id
    if framework_id is not None:
        converted.extra[FRAMEWORK_MESSAGE_ID] = framework_id
    return converted


def to_record(message: MafMessage, *, stored_at: str | None = None) -> Record:
    """A record (fresh chatkeep id) holding MAF ``message``, with ``stored_at`` (an ISO 8601
    time, see :mod:`chatkeep.core.metadata`) under the reserved ``additional_properties``
    key ``"chatkeep.stored_at"`` (taken out again on reading: ``to_maf`` of the record's
    message equals ``message``). Raises :class:`~chatkeep.core.EncodeError` for a value
    that cannot be stored losslessly."""
    (record,) = encode_records([from_maf(message, new_id())], stored_at=stored_at)
    return record


def to_maf(message: Message, *, assign_id: bool = True) -> MafMessage:
    """The MAF message a stored chatkeep ``message`` holds.

    Its ``message_id`` is the one MAF gave it, else (``assign_id``) its chatkeep id; with
    ``assign_id=False`` a message MAF gave no id comes back without one, as MAF's own
    stores keep it (what MAF's de-duplication compares). Top-level fields MAF's
    ``Message`` has no place for (another writer's ``extra``) are not handed to it: MAF's
    ``Message.from_dict()`` would refuse the whole message.
    """
    framework_id = message.extra.get(FRAMEWORK_MESSAGE_ID)
    if framework_id is not None:
        message_id = framework_id
    else:
        message_id = message.message_id if assign_id else None
    # The message is built directly (MAF's generic Message.from_dict costs more than all
    # of this); each content still goes through MAF's own Content.from_dict.
    return MafMessage(
        message.role,
        [MafContent.from_dict(content_to_dict(item, tagged=False)) for item in message.contents],
        author_name=message.author_name,
        message_id=message_id,
        additional_properties=_copy_properties(message.additional_properties),
    )


def _copy_properties(properties: dict[str, Any]) -> dict[str, Any] | None:
    return copy.deepcopy(properties) if properties else None
