"""chatkeep-core: the storage contract, plugin discovery, sessions, history, log views
(fork, undo, compaction), reducers and the agent loop.

Quick start::

    from chatkeep.core import Agent, HistoryProvider, OfflineChatClient

    agent = Agent(OfflineChatClient(), history_provider=HistoryProvider("sqlite:///chats.db"))
    session = agent.create_session()
    print(agent.run_sync("Hello!", session).text)
"""

from ._loop import LoopThread
from .agent import Agent, AgentResponse, AgentResponseStream, ConflictPolicy
from .chat import ChatClient, ChatResponse, ChatResponseUpdate, StreamingChatClient
from .codec import decode_message, encode_message, message_from_dict, message_to_dict
from .context import Context, ContextProvider
from .errors import (
    AppendConflict,
    CapabilityMissing,
    ChatkeepError,
    CorruptRecord,
    EditOutOfRange,
    EncodeError,
    HistoryConflict,
    InvalidExport,
    InvalidMessage,
    InvalidOption,
    InvalidRecord,
    InvalidSessionId,
    MessageNotFound,
    PluginError,
    ReadOnlyStore,
    RecordConflict,
    SessionExists,
    SessionMismatch,
    SessionNotFound,
    StoreClosed,
    StoreNotFound,
    StoreUnavailable,
    ToolError,
    ToolLoopLimit,
    UnknownBackend,
    VerificationFailed,
    ViewError,
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
from .metadata import (
    SessionInfo,
    adescribe_session,
    alist_session_infos,
    describe_session,
    list_session_infos,
)
from .offline import OfflineChatClient
from .plugins import BackendInfo, backends, open_store
from .records import Record, check_session_id
from .reducers import (
    CharacterTokenizer,
    Pipeline,
    Reducer,
    ReducerTrigger,
    SlidingWindowReducer,
    SummarizationReducer,
    TokenBudgetReducer,
    Tokenizer,
    ToolCallCollapseReducer,
    TruncationReducer,
)
from .search import SearchHit, SearchProgress, asearch, search
from .session import (
    AgentSession,
    ProviderSessionState,
    StateBag,
    StateSerializer,
    register_state_type,
)
from .store import CAPABILITIES, Backend, Store
from .tools import Tool, tool
from .transfer import (
    FORMAT_VERSION,
    TransferProgress,
    TransferStats,
    export_jsonl,
    import_jsonl,
    migrate,
    verify,
)
from .urls import redact_url
from .views import (
    Checkpoint,
    acompact,
    adelete_session,
    afork,
    alist_forks,
    aread_view,
    aundo,
    compact,
    delete_session,
    fork,
    list_forks,
    read_view,
    undo,
)

__all__ = [
    "CAPABILITIES",
    "FORMAT_VERSION",
    "Agent",
    "AgentResponse",
    "AgentResponseStream",
    "AgentSession",
    "AppendConflict",
    "Backend",
    "BackendInfo",
    "CapabilityMissing",
    "CharacterTokenizer",
    "ChatClient",
    "ChatResponse",
    "ChatResponseUpdate",
    "ChatkeepError",
    "Checkpoint",
    "ConflictPolicy",
    "Content",
    "Context",
    "ContextProvider",
    "CorruptRecord",
    "DataContent",
    "EditOutOfRange",
    "EncodeError",
    "FunctionCallContent",
    "FunctionResultContent",
    "HistoryConflict",
    "HistoryProvider",
    "InMemoryHistoryProvider",
    "InvalidExport",
    "InvalidMessage",
    "InvalidOption",
    "InvalidRecord",
    "InvalidSessionId",
    "LoopThread",
    "Message",
    "MessageNotFound",
    "MessageSource",
    "OfflineChatClient",
    "Pipeline",
    "PluginError",
    "ProviderSessionState",
    "ReadOnlyStore",
    "ReasoningContent",
    "Record",
    "RecordConflict",
    "Reducer",
    "ReducerTrigger",
    "Role",
    "SearchHit",
    "SearchProgress",
    "SessionExists",
    "SessionInfo",
    "SessionMismatch",
    "SessionNotFound",
    "SlidingWindowReducer",
    "StateBag",
    "StateSerializer",
    "Store",
    "StoreClosed",
    "StoreNotFound",
    "StoreUnavailable",
    "StreamingChatClient",
    "SummarizationReducer",
    "TextContent",
    "TokenBudgetReducer",
    "Tokenizer",
    "Tool",
    "ToolCallCollapseReducer",
    "ToolError",
    "ToolLoopLimit",
    "TransferProgress",
    "TransferStats",
    "TruncationReducer",
    "UnknownBackend",
    "UnknownContent",
    "UriContent",
    "VerificationFailed",
    "ViewError",
    "acompact",
    "adelete_session",
    "adescribe_session",
    "afork",
    "alist_forks",
    "alist_session_infos",
    "aread_view",
    "asearch",
    "aundo",
    "backends",
    "check_session_id",
    "compact",
    "decode_message",
    "decode_records",
    "delete_session",
    "describe_session",
    "encode_message",
    "encode_records",
    "export_jsonl",
    "fork",
    "hookimpl",
    "import_jsonl",
    "list_forks",
    "list_session_infos",
    "message_from_dict",
    "message_to_dict",
    "migrate",
    "new_id",
    "open_store",
    "read_messages",
    "read_view",
    "redact_url",
    "register_state_type",
    "search",
    "tool",
    "undo",
    "verify",
]

#: Names that moved to ``chatkeep.vendors`` and are still found here (with a warning).
_MOVED_TO_VENDORS = frozenset(
    {
        "MissingCredentials",
        "MissingVendorSetting",
        "UnknownVendor",
        "UnsupportedProtocol",
        "Vendor",
        "get_vendor",
        "vendors",
    }
)


def __getattr__(name: str) -> object:
    # The vendor presets left the storage core; code written before still finds them.
    if name in _MOVED_TO_VENDORS:
        import importlib
        import warnings

        warnings.warn(
            f"chatkeep.core.{name} moved to chatkeep.vendors.{name}; import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module("chatkeep.vendors"), name)
    raise AttributeError(f"module 'chatkeep.core' has no attribute {name!r}")
