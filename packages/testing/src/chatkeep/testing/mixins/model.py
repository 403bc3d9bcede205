"""A Hypothesis state machine that checks a store against a dict of Python lists."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

from chatkeep.core import Record, Store

from ..hypothesis_examples import example_count
from ._base import ConformanceBase

__all__ = ["MODEL_SETTINGS", "LogModel", "ModelTests"]

#: Modest on purpose: every step is a round trip on a network backend. No example database
#: (nothing to keep between runs of a suite pointed at changing stores), one bug reported
#: and shrunk at a time, and no "explain" phase, so a failing backend fails quickly.
MODEL_SETTINGS = settings(
    max_examples=example_count(30),
    stateful_step_count=20,
    deadline=None,
    database=None,
    report_multiple_bugs=False,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
    suppress_health_check=[HealthCheck.too_slow],
)

_SESSIONS = 3
_session = st.integers(0, _SESSIONS - 1)
_bound = st.integers(-12, 12)


class LogModel(RuleBasedStateMachine):
    """Appends, retries and reads against a store and a list model side by side."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        run = uuid.uuid4().hex
        self.sessions = [f"ck-model-{run}-{n}" for n in range(_SESSIONS)]
        self.model: dict[str, list[Record]] = {session: [] for session in self.sessions}
        self.appended: list[tuple[str, list[Record]]] = []
        self.next_id = 0

    @rule(which=_session, payloads=st.lists(st.binary(max_size=8), min_size=1, max_size=4))
    def append(self, which: int, payloads: list[bytes]) -> None:
        session = self.sessions[which]
        batch = [Record(f"m{self.next_id + n}", data) for n, data in enumerate(payloads)]
        self.next_id += len(batch)
        self.store.append(session, batch)
        self.model[session].extend(batch)
        self.appended.append((session, batch))

    @precondition(lambda self: bool(self.appended))
    @rule(data=st.data())
    def retry_a_stored_batch(self, data: st.DataObject) -> None:
        # Any batch that already landed, not only the last one: record ids are unique per
        # session, so the retry must change nothing.
        index = data.draw(st.integers(0, len(self.appended) - 1), label="batch")
        session, batch = self.appended[index]
        self.store.append(session, batch)

    @rule(which=_session, start=_bound, stop=st.none() | _bound)
    def read_slice(self, which: int, start: int, stop: int | None) -> None:
        session = self.sessions[which]
        assert self.store.read(session, start, stop) == self.model[session][start:stop]

    @rule(which=_session, count=st.integers(1, 12))
    def read_tail(self, which: int, count: int) -> None:
        session = self.sessions[which]
        assert self.store.read(session, -count) == self.model[session][-count:]

    @rule(which=_session)
    def read_all(self, which: int) -> None:
        session = self.sessions[which]
        assert self.store.read(session) == self.model[session]


class ModelTests(ConformanceBase):
    """Random sequences of appends, retries and reads agree with a list model."""

    def test_reads_match_a_list_model(self, chatkeep_store: Store) -> None:
        class LogModelOfThisStore(LogModel):
            def __init__(self) -> None:
                super().__init__(chatkeep_store)

        run_state_machine_as_test(LogModelOfThisStore, settings=MODEL_SETTINGS)
