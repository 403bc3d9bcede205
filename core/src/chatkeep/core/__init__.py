"""chatkeep-core: the storage contract, plugin discovery, sessions, history and the agent loop.

Quick start::

    from chatkeep.core import Agent, HistoryProvider, OfflineChatClient

    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider("sqlite:///chats.db"))
    session = agent.create_session()
    print(agent.run_sync("Hello!", session).text)
"""

from .agent import Agent, AgentResponse, ChatClient, ChatResponse
from .codec import EncodeError, decode_message, encode_message, message_from_dict, message_to_dict
from .errors import (
    CapabilityMissing,
    ChatkeepError,
    CorruptRecord,
    InvalidRecord,
    InvalidSessionId,
    PluginError,
    StoreUnavailable,
    UnknownBackend,
)
from .history import (
    HistoryProvider,
    InMemoryHistoryProvider,
    decode_records,
    encode_records,
    read_messages,
)
from .hookspecs import hookimpl
from .ids import new_id
from .messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    MessageSource,
    ReasoningContent,
    Role,
    TextContent,
    UnknownContent,
    UriContent,
)
from .offline import OfflineChatClient
from .plugins import BackendInfo, backends, open_store
from .records import Record, check_session_id
from .session import AgentSession, ProviderSessionState, StateBag, register_state_type
from .store import CAPABILITIES, Backend, Store
from .urls import redact_url

__all__ = [
    "CAPABILITIES",
    "Agent",
    "AgentResponse",
    "AgentSession",
    "Backend",
    "BackendInfo",
    "CapabilityMissing",
    "ChatClient",
    "ChatResponse",
    "ChatkeepError",
    "Content",
    "CorruptRecord",
    "DataContent",
    "EncodeError",
    "FunctionCallContent",
    "FunctionResultContent",
    "HistoryProvider",
    "InMemoryHistoryProvider",
    "InvalidRecord",
    "InvalidSessionId",
    "Message",
    "MessageSource",
    "OfflineChatClient",
    "PluginError",
    "ProviderSessionState",
    "ReasoningContent",
    "Record",
    "Role",
    "StateBag",
    "Store",
    "StoreUnavailable",
    "TextContent",
    "UnknownBackend",
    "UnknownContent",
    "UriContent",
    "backends",
    "check_session_id",
    "decode_message",
    "decode_records",
    "encode_message",
    "encode_records",
    "hookimpl",
    "message_from_dict",
    "message_to_dict",
    "new_id",
    "open_store",
    "read_messages",
    "redact_url",
    "register_state_type",
]
