"""What :func:`chatkeep.core.search.search` matches: the query syntax, the text of a
message, and how the two meet (no I/O here).

The query syntax, kept small::

    oslo invoice          both words (each matches the start of a word: "invoice" finds
                          "invoices"), anywhere in one message
    "oslo invoice"        the exact phrase: these words, whole, one after the other
    -draft                no word of the message starts with "draft"
    -"first draft"        the message does not hold that phrase

Matching ignores case and accents (``Ålesund`` finds ``alesund`` and the other way
round) and punctuation: text is cut into words at every character that is not a letter
or a digit (``get_weather`` is the two words ``get`` and ``weather``).

A message's searchable text (:func:`message_text`) is what a user sees of it: its text,
each tool call's name and arguments, each tool result. A backend that keeps a full-text
index is handed :func:`index_words` of each record (the words, folded, space-separated)
and never parses a record itself.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .errors import InvalidOption
from .messages import FunctionCallContent, FunctionResultContent, Message, TextContent
from .views._control import CHECKPOINT, FORK, SPLICE, Control, parse_entry

__all__ = [
    "FORK_WORD",
    "MAX_INDEX_WORD",
    "MAX_INDEX_WORDS_BYTES",
    "MAX_QUERY_LENGTH",
    "SNIPPET_LENGTH",
    "UNINDEXED_WORD",
    "FoldedText",
    "Query",
    "fold",
    "index_terms",
    "index_words",
    "message_text",
    "parse_query",
    "record_words",
    "words",
]

#: The longest query accepted, in characters.
MAX_QUERY_LENGTH = 1000
#: About how many characters of a message a hit's snippet shows.
SNIPPET_LENGTH = 120
#: The word the core hands a full-text index for a record that starts a fork: a session
#: holding one reads messages from another session's log, so an indexed search always
#: looks at it (see :data:`chatkeep.core.store.FULLTEXT`). It holds an underscore, which
#: no word cut from text does.
FORK_WORD = "chatkeep_fork"
#: The longest word, in characters, the core hands a full-text index (or asks one for):
#: a longer word is cut to its first ``MAX_INDEX_WORD`` characters, on both sides. A
#: query word matches the start of a message word, so a cut query word still matches the
#: cut message word; the index only picks candidate sessions, which are then matched in
#: full. Four bytes a character at most: well under PostgreSQL's 2047-byte lexeme.
MAX_INDEX_WORD = 200
#: The most a record's index words take, in UTF-8 bytes, space-separated: a record with
#: more is handed :data:`UNINDEXED_WORD` alone instead (far below the 1 MB a PostgreSQL
#: ``tsvector`` holds, so an append never fails because of the index).
MAX_INDEX_WORDS_BYTES = 256 * 1024
#: The word the core hands a full-text index, instead of a record's words, for a record
#: whose words exceed :data:`MAX_INDEX_WORDS_BYTES`: like :data:`FORK_WORD`, every indexed
#: search looks at a session holding one (and matches it as the scan does), so such a
#: record is still found.
UNINDEXED_WORD = "chatkeep_unindexed"

# A word: a run of letters and digits (after folding). Underscore is punctuation here.
_WORD = re.compile(r"[^\W_]+")
# A query term: an optional "-", then a "phrase" (closing quote optional) or a bare token.
# What cuts ASCII text into the same words as _WORD: every ASCII character that is not a
# letter or a digit becomes a space.
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
_TERM = re.compile(r'(-?)(?:"([^"]*)"?|(\S+))')


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """One character as matching sees it: decomposed, accents dropped, case folded."""
    decomposed = unicodedata.normalize("NFKD", char)
    kept = "".join(c for c in decomposed if not unicodedata.combining(c))
    return kept.casefold()


def fold(text: str) -> str:
    """``text`` with case and accents folded away (what words are compared in)."""
    if text.isascii():
        return text.lower()
    return "".join(_fold_char(c) for c in text)


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order."""
    return _cut(fold(text))


def _cut(folded: str) -> list[str]:
    """The words of an already folded text, in order."""
    if folded.isascii():  # the common case, at a third of the regular expression's cost
        return folded.translate(_ASCII_SEPARATORS).split()
    return _WORD.findall(folded)


class FoldedText:
    """A text folded for matching, with each folded character's origin in the original,
    so a match found in the folded words can be marked in the text a user reads."""

    __slots__ = ("_origins", "_spans", "folded", "original", "words")

    def __init__(self, original: str) -> None:
        self.original = original
        if original.isascii():
            self.folded = original.lower()
            self._origins: list[int] | None = None
        else:
            pieces: list[str] = []
            origins: list[int] = []
            for index, char in enumerate(original):
                folded = _fold_char(char)
                pieces.append(folded)
                origins.extend([index] * len(folded))
            self.folded = "".join(pieces)
            self._origins = origins
        #: The folded words, in order (what a query is matched against).
        self.words: list[str] = _cut(self.folded)
        self._spans: list[tuple[str, int, int]] | None = None

    @property
    def spans(self) -> list[tuple[str, int, int]]:
        """The words as ``(word, start, end)``, start and end in :attr:`folded`: found
        only when a match is marked (most texts tested never are)."""
        if self._spans is None:
            folded = self.folded
            if folded.isascii():
                # The words are the runs between separators: each one's start is the
                # first place it occurs after the previous word's end.
                spaced = folded.translate(_ASCII_SEPARATORS)
                spans: list[tuple[str, int, int]] = []
                end = 0
                for word in self.words:
                    start = spaced.find(word, end)
                    end = start + len(word)
                    spans.append((word, start, end))
                self._spans = spans
            else:
                self._spans = [(m.group(), m.start(), m.end()) for m in _WORD.finditer(folded)]
        return self._spans

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of :attr:`original` that folded ``[start:end]`` came from."""
        if self._origins is None:
            return start, end
        return self._origins[start], self._origins[end - 1] + 1


@dataclass(frozen=True)
class Query:
    """A parsed query: the ``words`` (prefixes) and ``phrases`` (word sequences) a message
    must all hold, and the ``excluded`` words and phrases it must hold none of."""

    words: tuple[str, ...]
    phrases: tuple[tuple[str, ...], ...]
    excluded_words: tuple[str, ...]
    excluded_phrases: tuple[tuple[str, ...], ...]

    @property
    def required(self) -> tuple[str, ...]:
        """Every word a match must hold (as a prefix of one of its words): the query's
        words and its phrases' words. What an index is asked for."""
        seen = dict.fromkeys(self.words)
        for phrase in self.phrases:
            seen.update(dict.fromkeys(phrase))
        return tuple(seen)

    def match(self, text: FoldedText) -> list[tuple[int, int]] | None:
        """The folded spans of ``text`` that match (for marking), or ``None`` when ``text``
        does not match the query."""
        tokens = text.words
        marks: list[tuple[int, int]] = []
        for word in self.excluded_words:
            if any(token.startswith(word) for token in tokens):
                return None
        for phrase in self.excluded_phrases:
            if _phrase_at(tokens, phrase):
                return None
        for word in self.words:
            found = [i for i, token in enumerate(tokens) if token.startswith(word)]
            if not found:
                return None
            marks.extend((i, i) for i in found)
        for phrase in self.phrases:
            starts = _phrase_at(tokens, phrase)
            if not starts:
                return None
            marks.extend((i, i + len(phrase) - 1) for i in starts)
        spans = text.spans  # only now: the text matched
        return sorted({(spans[first][1], spans[last][2]) for first, last in marks})


def _phrase_at(tokens: Sequence[str], phrase: Sequence[str]) -> list[int]:
    """Where ``phrase`` (whole words, in order) starts in ``tokens``."""
    size = len(phrase)
    first = phrase[0]
    return [
        i
        for i, token in enumerate(tokens)
        if token == first and list(tokens[i : i + size]) == list(phrase)
    ]


def parse_query(query: str) -> Query:
    """Parse ``query`` (see the module docstring). Raises
    :class:`~chatkeep.core.errors.InvalidOption` for a query that is not a ``str``, is
    longer than :data:`MAX_QUERY_LENGTH`, or has nothing to look for (no word or phrase
    that is not excluded)."""
    if type(query) is not str:
        raise InvalidOption(f"a search query must be a str, not {type(query).__name__}")
    if len(query) > MAX_QUERY_LENGTH:
        raise InvalidOption(f"a search query has at most {MAX_QUERY_LENGTH} characters")
    found: list[str] = []
    phrases: list[tuple[str, ...]] = []
    excluded: list[str] = []
    excluded_phrases: list[tuple[str, ...]] = []
    for match in _TERM.finditer(query):
        negative, quoted, bare = match.groups()
        if quoted is not None:
            phrase = tuple(words(quoted))  # one word in quotes: that word, whole
            if phrase:
                (excluded_phrases if negative else phrases).append(phrase)
            continue
        terms = words(bare)
        if negative:
            if len(terms) > 1:  # -get_weather: the phrase the token spells
                excluded_phrases.append(tuple(terms))
            else:
                excluded.extend(terms)
        elif len(terms) > 1:  # an-invoice, get_weather: words that stand together
            phrases.append(tuple(terms))
        else:
            found.extend(terms)
    if not found and not phrases:
        raise InvalidOption(
            f"the search query {query!r} has no word to look for "
            '(give words, a "phrase", and -words to exclude)'
        )
    return Query(
        tuple(dict.fromkeys(found)),
        tuple(dict.fromkeys(phrases)),
        tuple(dict.fromkeys(excluded)),
        tuple(dict.fromkeys(excluded_phrases)),
    )


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def message_text(message: Message) -> str:
    """What a search sees of ``message``: its text, then each tool call's name and
    arguments and each tool result (its exception too), one per line."""
    parts: list[str] = []
    for content in message.contents:
        if isinstance(content, TextContent):
            parts.append(content.text)
        elif isinstance(content, FunctionCallContent):
            parts.append(f"{content.name}({_value_text(content.arguments)})")
        elif isinstance(content, FunctionResultContent):
            parts.append(_value_text(content.result))
            if content.exception:
                parts.append(content.exception)
    return "\n".join(part for part in parts if part)


def index_terms(query_words: Iterable[str]) -> list[str]:
    """The words an index is asked for: ``query_words`` cut to :data:`MAX_INDEX_WORD`
    characters, as the index keeps them."""
    return list(dict.fromkeys(word[:MAX_INDEX_WORD] for word in query_words))


def index_words(messages: Iterable[Message], *, fork: bool = False) -> str:
    """What a full-text index is handed for one record: the folded words of
    ``messages`` (a message record's one message, or the messages a checkpoint or edit
    record holds), each cut to :data:`MAX_INDEX_WORD` characters, each once,
    space-separated; with ``fork``, also :data:`FORK_WORD`. When they would take more
    than :data:`MAX_INDEX_WORDS_BYTES`: :data:`UNINDEXED_WORD` (and the fork word)."""
    seen: dict[str, None] = {}
    for message in messages:
        seen.update(dict.fromkeys(words(message_text(message))))
    joined = " ".join(seen)
    if len(joined) > MAX_INDEX_WORD and max(map(len, seen)) > MAX_INDEX_WORD:
        # Rare: cut only when a word is that long (the per-word slice costs an append).
        joined = " ".join(dict.fromkeys(word[:MAX_INDEX_WORD] for word in seen))
    if len(joined) * 4 > MAX_INDEX_WORDS_BYTES and len(joined.encode()) > MAX_INDEX_WORDS_BYTES:
        joined = UNINDEXED_WORD
    if fork:
        joined = f"{joined} {FORK_WORD}" if joined else FORK_WORD
    return joined


def record_words(data: bytes) -> str:
    """What the index keeps of one record: the folded words of the message it holds (or
    of the messages a checkpoint or edit holds), the fork word for a record that starts a
    fork, ``""`` for anything else (a damaged record included: the view reports it)."""
    try:
        entry = parse_entry(data)
    except ValueError:
        return ""
    if isinstance(entry, Message):
        return index_words([entry])
    if isinstance(entry, Control):
        if entry.kind in (CHECKPOINT, SPLICE):
            return index_words(entry["messages"])
        if entry.kind == FORK:
            return index_words([], fork=True)
    return ""
