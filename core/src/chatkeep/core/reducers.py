"""Reducers: shorter histories for the model, never a shorter transcript.

A reducer turns a list of messages into a shorter one. The :class:`HistoryProvider` applies
it either *before retrieval* (the view sent to the model is reduced; nothing is stored) or
*after messages are added* (the reduced view is saved as a compaction checkpoint in the log,
so later loads read only the view; the transcript stays whole for raw reads).

Every built-in reducer keeps system messages and never separates a function call from its
results: messages are cut in *groups* (a message with function calls plus the messages
holding their results), and a result whose call was cut off is dropped with it.

::

    provider = HistoryProvider(store, reducer=SlidingWindowReducer(50))  # reads ~50 records
    provider = HistoryProvider(
        store,
        reducer=Pipeline(ToolCallCollapseReducer(), SummarizationReducer(client, keep_last=20)),
        reducer_trigger=ReducerTrigger.AFTER_MESSAGE_ADDED,
    )
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from .chat import ChatClient, get_response
from .codec import content_to_dict
from .messages import (
    Content,
    DataContent,
    FunctionCallContent,
    FunctionResultContent,
    Message,
    ReasoningContent,
    TextContent,
    UnknownContent,
    UriContent,
)

__all__ = [
    "SUMMARY_KEY",
    "CharacterTokenizer",
    "Pipeline",
    "Reducer",
    "ReducerTrigger",
    "SlidingWindowReducer",
    "SummarizationReducer",
    "TokenBudgetReducer",
    "Tokenizer",
    "ToolCallCollapseReducer",
    "TruncationReducer",
    "apply_reducer",
    "drop_orphan_results",
    "group_messages",
    "max_window",
    "message_tokens",
]

#: ``additional_properties`` key marking a summary written by :class:`SummarizationReducer`.
SUMMARY_KEY = "chatkeep_summary"


class ReducerTrigger(str, Enum):
    """When a :class:`~chatkeep.core.history.HistoryProvider` applies its reducer."""

    #: Reduce the loaded history before the model sees it; nothing is stored.
    BEFORE_RETRIEVAL = "before_retrieval"
    #: After a turn is stored, reduce the view and save it as a checkpoint when it changed.
    AFTER_MESSAGE_ADDED = "after_message_added"

    def __str__(self) -> str:
        return self.value


@runtime_checkable
class Reducer(Protocol):
    """Anything callable as ``reducer(messages) -> messages`` (sync or async).

    A reducer may also have ``max_window: int | None``: a promise that its result only
    depends on the newest ``max_window`` messages (plus system messages), so the provider
    reads only that many records.
    """

    def __call__(self, messages: list[Message], /) -> list[Message] | Awaitable[list[Message]]: ...


async def apply_reducer(
    reducer: Reducer | Callable[..., Any], messages: list[Message]
) -> list[Message]:
    """Call ``reducer`` on a copy of ``messages`` and await it if needed."""
    result = reducer(list(messages))
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, list):
        result = list(result)
    return result


def max_window(reducer: object) -> int | None:
    """The reducer's ``max_window`` (see :class:`Reducer`), or ``None``."""
    window = getattr(reducer, "max_window", None)
    if type(window) is int and window > 0:
        return window
    return None


# -- tokens -----------------------------------------------------------------------------------


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens in a text. Plug in a model's real tokenizer (``tiktoken`` etc.)."""

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is."""
        ...


@dataclass(frozen=True)
class CharacterTokenizer:
    """A tokenizer that needs nothing: about ``chars_per_token`` characters per token (4
    is close for English with OpenAI's tokenizers; use ~1.5 for Chinese or Japanese)."""

    chars_per_token: float = 4.0

    def count_tokens(self, text: str) -> int:
        """``ceil(len(text) / chars_per_token)``."""
        return math.ceil(len(text) / self.chars_per_token) if text else 0


_DATA_TOKENS = 256  # an image or file: a flat estimate, since its size is not its cost


def _content_text(content: object) -> str:
    if isinstance(content, TextContent):
        return content.text
    if isinstance(content, FunctionCallContent):
        arguments = content.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(content_to_dict(content).get("arguments"), ensure_ascii=False)
        return f"{content.name}({arguments or ''})"
    if isinstance(content, FunctionResultContent):
        if content.exception is not None:
            return content.exception
        return json.dumps(content_to_dict(content).get("result"), ensure_ascii=False)
    if isinstance(content, ReasoningContent):
        return content.text or ""
    if isinstance(content, UriContent):
        return content.uri
    if isinstance(content, UnknownContent):
        return json.dumps(content.raw, ensure_ascii=False)
    return ""


def message_tokens(message: Message, tokenizer: Tokenizer | None = None, overhead: int = 4) -> int:
    """The tokens ``message`` costs: its contents plus ``overhead`` for the role and framing."""
    tokenizer = tokenizer or CharacterTokenizer()
    total = overhead
    for content in message.contents:
        if isinstance(content, DataContent):
            total += _DATA_TOKENS
        else:
            total += tokenizer.count_tokens(_content_text(content))
    return total


# -- groups -----------------------------------------------------------------------------------


def _call_ids(message: Message) -> set[str]:
    return {c.call_id for c in message.contents if isinstance(c, FunctionCallContent)}


def _result_ids(message: Message) -> set[str]:
    return {c.call_id for c in message.contents if isinstance(c, FunctionResultContent)}


def group_messages(messages: Sequence[Message]) -> list[list[int]]:
    """Indices of the non-system messages in *groups* that are kept or cut together: a
    message that calls functions, with the following messages that carry their results.
    System messages belong to no group (reducers keep them)."""
    groups: list[list[int]] = []
    pending: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        results = _result_ids(message)
        if groups and pending and (results & pending or message.role == "tool"):
            groups[-1].append(index)
            pending -= results
            pending |= _call_ids(message) - results
            continue
        groups.append([index])
        pending = _call_ids(message) - results
    return groups


def drop_orphan_results(messages: Sequence[Message]) -> list[Message]:
    """``messages`` without function results whose call is not among them (a window's cut
    can leave some at its start; models reject a result without its call)."""
    calls: set[str] = set()
    out: list[Message] = []
    for message in messages:
        has_results = False
        for content in message.contents:  # one pass, no sets: most messages are text
            if isinstance(content, FunctionCallContent):
                calls.add(content.call_id)
            elif isinstance(content, FunctionResultContent):
                has_results = True
        if not has_results:
            out.append(message)
            continue
        results = _result_ids(message)
        if not results <= calls:
            kept = [
                c
                for c in message.contents
                if not (isinstance(c, FunctionResultContent) and c.call_id not in calls)
            ]
            if not kept:
                continue
            message = replace(message, contents=kept)
        out.append(message)
    return out


def _select(messages: Sequence[Message], fits: Callable[[int, list[int]], bool]) -> list[Message]:
    """System messages plus the newest groups for which ``fits(used, group)`` holds (a
    contiguous tail: it stops at the first group that does not fit). The newest group is
    always kept, even alone over the limit, since it cannot be split."""
    groups = group_messages(messages)
    keep: set[int] = {i for i, m in enumerate(messages) if m.role == "system"}
    used = 0
    for position, group in enumerate(reversed(groups)):
        if position and not fits(used, group):
            break
        keep.update(group)
        used += len(group)
    return drop_orphan_results([m for i, m in enumerate(messages) if i in keep])


def _check_positive(name: str, value: object) -> int:
    if type(value) is not int or value < 1:
        raise ValueError(f"{name} must be a positive int, not {value!r}")
    return value


class TruncationReducer:
    """Keeps system messages and the newest ``max_messages`` others, once there are more
    than ``max_messages + threshold``. A ``threshold`` makes compaction checkpoints rarer
    (with ``AFTER_MESSAGE_ADDED``): one per ``threshold`` messages instead of one per turn.
    """

    def __init__(self, max_messages: int, *, threshold: int = 0) -> None:
        self.max_messages = _check_positive("max_messages", max_messages)
        if type(threshold) is not int or threshold < 0:
            raise ValueError("threshold must be a non-negative int")
        self.threshold = threshold

    @property
    def max_window(self) -> int:
        """The provider reads at most this many messages."""
        return self.max_messages + self.threshold

    def __call__(self, messages: list[Message]) -> list[Message]:
        """The truncated history."""
        count = sum(1 for m in messages if m.role != "system")
        if count <= self.max_messages + self.threshold:
            return drop_orphan_results(messages)
        limit = self.max_messages
        return _select(messages, lambda used, group: used + len(group) <= limit)

    def __repr__(self) -> str:
        return f"TruncationReducer({self.max_messages}, threshold={self.threshold})"


class SlidingWindowReducer(TruncationReducer):
    """Keeps system messages and the newest ``window`` others, every time."""

    def __init__(self, window: int) -> None:
        super().__init__(_check_positive("window", window))

    @property
    def window(self) -> int:
        """The number of non-system messages kept."""
        return self.max_messages

    def __repr__(self) -> str:
        return f"SlidingWindowReducer({self.max_messages})"


class TokenBudgetReducer:
    """Keeps system messages and the newest messages that fit in ``max_tokens`` together.

    ``tokenizer`` defaults to :class:`CharacterTokenizer` (no network, no dependency);
    each message costs ``message_overhead`` tokens on top of its contents.
    """

    def __init__(
        self, max_tokens: int, tokenizer: Tokenizer | None = None, *, message_overhead: int = 4
    ) -> None:
        self.max_tokens = _check_positive("max_tokens", max_tokens)
        self.tokenizer: Tokenizer = tokenizer or CharacterTokenizer()
        if type(message_overhead) is not int or message_overhead < 0:
            raise ValueError("message_overhead must be a non-negative int")
        self.message_overhead = message_overhead

    @property
    def max_window(self) -> int | None:
        """No more messages than this can fit (each costs at least the overhead)."""
        if not self.message_overhead:
            return None
        return max(self.max_tokens // self.message_overhead, 1)

    def count(self, message: Message) -> int:
        """The tokens one message costs."""
        return message_tokens(message, self.tokenizer, self.message_overhead)

    def __call__(self, messages: list[Message]) -> list[Message]:
        """The newest messages within the budget."""
        costs = [self.count(m) for m in messages]
        pinned = sum(c for c, m in zip(costs, messages, strict=True) if m.role == "system")
        budget = self.max_tokens - pinned
        spent = [0]

        def fits(_used: int, group: list[int]) -> bool:
            cost = sum(costs[i] for i in group)
            if spent[0] + cost > budget:
                return False
            spent[0] += cost
            return True

        # _select keeps the newest group unconditionally; count it toward the budget.
        groups = group_messages(messages)
        if groups:
            spent[0] = sum(costs[i] for i in groups[-1])
        return _select(messages, fits)

    def __repr__(self) -> str:
        return f"TokenBudgetReducer({self.max_tokens}, {self.tokenizer!r})"


class ToolCallCollapseReducer:
    """Replaces old tool exchanges (a function call and its results) by one short
    assistant note such as ``[tool weather({"city":"Oslo"}) -> "sunny"]``; the newest
    ``keep_last`` exchanges stay intact. Notes are cut to ``max_note_chars``."""

    def __init__(self, keep_last: int = 1, *, max_note_chars: int = 200) -> None:
        if type(keep_last) is not int or keep_last < 0:
            raise ValueError("keep_last must be a non-negative int")
        self.keep_last = keep_last
        self.max_note_chars = _check_positive("max_note_chars", max_note_chars)

    def _note(self, call: FunctionCallContent, result: FunctionResultContent | None) -> str:
        arguments = _content_text(call)
        if result is None:
            outcome = "(no result)"
        elif result.exception is not None:
            outcome = f"error: {result.exception}"
        else:
            outcome = _content_text(result)
        note = f"{arguments} -> {outcome}"
        if len(note) > self.max_note_chars:
            note = note[: self.max_note_chars - 1] + "…"
        return f"[tool {note}]"

    def __call__(self, messages: list[Message]) -> list[Message]:
        """The history with old tool exchanges collapsed."""
        groups = [g for g in group_messages(messages) if _call_ids(messages[g[0]])]
        collapse = groups[: len(groups) - self.keep_last] if self.keep_last else groups
        if not collapse:
            return list(messages)
        replaced: dict[int, Message | None] = {}
        for group in collapse:
            results: dict[str, FunctionResultContent] = {}
            for index in group:
                for content in messages[index].contents:
                    if isinstance(content, FunctionResultContent):
                        results[content.call_id] = content
            head = messages[group[0]]
            contents: list[Content] = []
            notes = []
            for content in head.contents:
                if isinstance(content, FunctionCallContent):
                    notes.append(self._note(content, results.get(content.call_id)))
                elif not isinstance(content, FunctionResultContent):
                    contents.append(content)
            contents.append(TextContent("\n".join(notes)))
            replaced[group[0]] = replace(head, role="assistant", contents=contents)
            for index in group[1:]:
                # Keep what a result message says besides its results (rare).
                rest: list[Content] = [
                    c for c in messages[index].contents if not isinstance(c, FunctionResultContent)
                ]
                replaced[index] = replace(messages[index], contents=rest) if rest else None
        out: list[Message] = []
        for index, message in enumerate(messages):
            if index in replaced:
                new = replaced[index]
                if new is not None:
                    out.append(new)
            else:
                out.append(message)
        return out

    def __repr__(self) -> str:
        return f"ToolCallCollapseReducer(keep_last={self.keep_last})"


DEFAULT_SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation below for the assistant that will continue it. Keep names, "
    "facts, decisions, open questions and the results of tool calls; drop small talk. "
    "Write at most {max_words} words, in the conversation's language."
)


def _transcript(messages: Sequence[Message]) -> str:
    lines = []
    for message in messages:
        parts = [_content_text(c) for c in message.contents]
        text = " ".join(p for p in parts if p)
        if message.additional_properties.get(SUMMARY_KEY):
            lines.append(f"(summary of earlier conversation) {text}")
        else:
            lines.append(f"{message.role}: {text}")
    return "\n".join(lines)


class SummarizationReducer:
    """Once there are more than ``keep_last + threshold`` non-system messages, replaces all
    but the newest ``keep_last`` (or a few more, to keep tool exchanges whole) with one
    summary written by ``chat_client`` (any :class:`~chatkeep.core.chat.ChatClient`).

    The summary is a system message marked ``additional_properties["chatkeep_summary"]``;
    the next summarization folds it in rather than keeping it forever. Use it with
    ``ReducerTrigger.AFTER_MESSAGE_ADDED`` so each summary is written once and saved.
    """

    def __init__(
        self,
        chat_client: ChatClient,
        keep_last: int = 10,
        *,
        threshold: int = 10,
        instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
        max_words: int = 250,
    ) -> None:
        self.chat_client = chat_client
        if type(keep_last) is not int or keep_last < 0:
            raise ValueError("keep_last must be a non-negative int")
        if type(threshold) is not int or threshold < 0:
            raise ValueError("threshold must be a non-negative int")
        self.keep_last = keep_last
        self.threshold = threshold
        self.instructions = instructions
        self.max_words = _check_positive("max_words", max_words)

    def _is_pinned(self, message: Message) -> bool:
        return message.role == "system" and not message.additional_properties.get(SUMMARY_KEY)

    async def __call__(self, messages: list[Message]) -> list[Message]:
        """The history with its older part summarized (unchanged when short enough)."""
        others = [i for i, m in enumerate(messages) if not self._is_pinned(m)]
        if len(others) <= self.keep_last + self.threshold:
            return list(messages)
        # Cut at a group boundary at or before keep_last from the end.
        cut = len(messages)
        kept = 0
        for group in reversed(group_messages(messages)):
            if kept >= self.keep_last:
                break
            kept += len(group)
            cut = group[0]
        older = [m for m in messages[:cut] if not self._is_pinned(m)]
        if not older:
            return list(messages)
        prompt = [
            Message.system(self.instructions.format(max_words=self.max_words)),
            Message.user(_transcript(older)),
        ]
        response = await get_response(self.chat_client, prompt)
        summary = Message.system(
            "Summary of the earlier conversation: " + response.text.strip(),
            additional_properties={SUMMARY_KEY: True},
        )
        pinned = [m for m in messages[:cut] if self._is_pinned(m)]
        return [*pinned, summary, *messages[cut:]]

    def __repr__(self) -> str:
        return f"SummarizationReducer(keep_last={self.keep_last}, threshold={self.threshold})"


class Pipeline:
    """Applies reducers in order::

        Pipeline(ToolCallCollapseReducer(), SlidingWindowReducer(50))

    Its ``max_window`` is the first reducer's: the pipeline's result depends on no more
    messages than its first step reads.
    """

    def __init__(self, *reducers: Reducer | Callable[..., Any]) -> None:
        if not reducers:
            raise ValueError("a Pipeline needs at least one reducer")
        self.reducers = reducers

    @property
    def max_window(self) -> int | None:
        """The first reducer's ``max_window``."""
        return max_window(self.reducers[0])

    async def __call__(self, messages: list[Message]) -> list[Message]:
        """Every reducer applied in turn."""
        for reducer in self.reducers:
            messages = await apply_reducer(reducer, messages)
        return messages

    def __repr__(self) -> str:
        return f"Pipeline({', '.join(repr(r) for r in self.reducers)})"
