"""chatkeep-openai's errors are public (chatkeep.openai.errors) and ChatkeepErrors."""

from __future__ import annotations

from chatkeep.core import ChatkeepError
from chatkeep.openai import ConversationNotFound, ResponseFailed, errors


def test_the_clients_errors_are_chatkeep_errors_in_a_public_module() -> None:
    for error in (ConversationNotFound, ResponseFailed):
        assert issubclass(error, ChatkeepError)
        assert error.__module__ == "chatkeep.openai.errors"
        assert getattr(errors, error.__name__) is error
    missing = ConversationNotFound("resp_1", "ResponsesClient")
    assert "resp_1" in str(missing) and missing.conversation_id == "resp_1"
