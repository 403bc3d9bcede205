"""The capability report :func:`chatkeep.testing.run_conformance` returns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .requirements import CAPABILITY_ORDER, CORE, HOOK_GROUPS, REQUIREMENTS
from .rules import Rule, rule_for

__all__ = [
    "FAIL",
    "INCOMPLETE",
    "NOT_DECLARED",
    "NOT_PROVIDED",
    "PASS",
    "UNTESTED",
    "CapabilityResult",
    "ConformanceReport",
    "TestOutcome",
]

PASS = "pass"  # noqa: S105 (a status, not a password)
FAIL = "fail"
NOT_DECLARED = "not declared"
NOT_PROVIDED = "not provided"
INCOMPLETE = "incomplete"
UNTESTED = "untested"

Level = Literal["full", "partial", "failed", "interrupted"]

# Skip reasons that are the store's own choice, not a gap in what was tested.
_NOT_DECLARED_REASON = "not declared by the store under test: "
_NOT_PROVIDED_REASON = "not provided by the backend under test: "


@dataclass(frozen=True)
class TestOutcome:
    """The result of one test of the suite."""

    __test__ = False  # not a pytest test class, despite the name

    name: str  # "SliceTests.test_slices_match_python"
    group: str  # the report row: "core" or a capability
    outcome: Literal["passed", "failed", "skipped"]
    message: str = ""  # the failure or skip reason, one line

    @property
    def skipped_by_choice(self) -> bool:
        """Skipped because the store does not declare a capability or its backend does not
        provide a test hook (as opposed to a test that could not run)."""
        return self.outcome == "skipped" and self.message.startswith(
            (_NOT_DECLARED_REASON, _NOT_PROVIDED_REASON)
        )


@dataclass(frozen=True)
class CapabilityResult:
    """One row of the report: a capability (or ``core``, a core feature, a test hook) and
    how its tests went."""

    name: str
    status: str  # PASS, FAIL, NOT_DECLARED, NOT_PROVIDED, INCOMPLETE or UNTESTED
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def is_core(self) -> bool:
        """Whether every store must pass the row (the required hooks, or a group like
        ``lifecycle`` the core builds on them)."""
        return _is_core_group(self.name)


def _is_core_group(group: str) -> bool:
    if group == CORE:
        return True
    return any(
        req.group == group and not req.capabilities and not req.hooks
        for req in REQUIREMENTS.values()
    )


def _hooks_of(group: str) -> frozenset[str]:
    return frozenset(
        hook for req in REQUIREMENTS.values() if req.group == group for hook in req.hooks
    )


def _capabilities_of(group: str) -> frozenset[str]:
    return frozenset(
        name for req in REQUIREMENTS.values() if req.group == group for name in req.capabilities
    )


def _group_order(declared: frozenset[str], seen: Iterable[str]) -> list[str]:
    order = [CORE, *CAPABILITY_ORDER]
    for requirement in REQUIREMENTS.values():
        if requirement.group not in order and requirement.group not in HOOK_GROUPS:
            order.append(requirement.group)
    order.extend(group for group in HOOK_GROUPS if group not in order)
    order.extend(sorted((set(seen) | declared) - set(order)))
    return order


@dataclass(frozen=True)
class ConformanceReport:
    """How a store did on the conformance suite, per capability.

    ``level`` is ``"full"`` only when the whole suite ran and the core hooks and every
    capability the store declares pass; ``"partial"`` when the core passes but a declared
    capability fails, or the run was narrowed (``-k``, ``-x``, a subset) or left a declared
    row incomplete; ``"failed"`` when the core fails or the suite could not run; and
    ``"interrupted"`` when the run was stopped. ``ok`` is ``level == "full"``; ``notes``
    says why a run is not. Rows of test hooks a backend does not provide say ``not
    provided`` and do not change the level. Print :meth:`format`, or serialize
    :meth:`as_dict` to JSON.
    """

    url: str  # redacted
    backend: str | None
    declared: frozenset[str]
    outcomes: tuple[TestOutcome, ...] = ()
    exit_code: int = 0
    error: str | None = None  # why the suite could not run at all
    output: str | None = field(default=None, repr=False)  # pytest's output when captured
    provided_hooks: frozenset[str] = frozenset()
    #: tests of the suite that were not run: deselected, or left when the run stopped
    not_run: tuple[str, ...] = ()
    interrupted: bool = False

    # -- derived views -------------------------------------------------------------------

    @property
    def narrowed(self) -> bool:
        """Whether part of the suite did not run (``-k``, ``-x``, a subset of tests)."""
        return bool(self.not_run)

    @property
    def capabilities(self) -> tuple[CapabilityResult, ...]:
        """One :class:`CapabilityResult` per row: ``core``, then each capability."""
        rows = []
        not_run_groups = {group for group in (_group_of(name) for name in self.not_run)}
        for group in _group_order(self.declared, (o.group for o in self.outcomes)):
            mine = [o for o in self.outcomes if o.group == group]
            passed = sum(o.outcome == "passed" for o in mine)
            failed = sum(o.outcome == "failed" for o in mine)
            skipped = sum(o.outcome == "skipped" for o in mine)
            hooks = _hooks_of(group)
            capability_row = not _is_core_group(group) and not hooks
            if failed or (self.error is not None and _is_core_group(group)):
                status = FAIL
            elif capability_row and group not in self.declared:
                status = NOT_DECLARED
            elif hooks and not _capabilities_of(group) <= self.declared:
                status = NOT_DECLARED  # the hook checks a capability the store lacks
            elif hooks and not hooks <= self.provided_hooks:
                status = NOT_PROVIDED
            elif hooks and not passed and all(o.skipped_by_choice for o in mine):
                status = NOT_PROVIDED if mine else UNTESTED
            elif not passed:
                status = UNTESTED
            elif group in not_run_groups or any(
                o.outcome == "skipped" and not o.skipped_by_choice for o in mine
            ):
                status = INCOMPLETE
            else:
                status = PASS
            rows.append(CapabilityResult(group, status, passed, failed, skipped))
        return tuple(rows)

    def capability(self, name: str) -> CapabilityResult:
        """The row for ``name`` (``"core"``, ``"delete"``, ...)."""
        for row in self.capabilities:
            if row.name == name:
                return row
        raise KeyError(name)

    @property
    def unproved(self) -> tuple[str, ...]:
        """Rows only a test hook proves, whose hook the backend does not provide
        (``damage``, ``erasure``, ``durability``): ``full`` says nothing about them."""
        if self.backend is None:
            return ()
        return tuple(row.name for row in self.capabilities if row.status == NOT_PROVIDED)

    @property
    def counts(self) -> dict[str, int]:
        """Tests passed, failed and skipped, and the total."""
        return {
            "passed": sum(o.outcome == "passed" for o in self.outcomes),
            "failed": sum(o.outcome == "failed" for o in self.outcomes),
            "skipped": sum(o.outcome == "skipped" for o in self.outcomes),
            "total": len(self.outcomes),
            "not_run": len(self.not_run),
        }

    @property
    def failures(self) -> tuple[TestOutcome, ...]:
        """The failed tests."""
        return tuple(o for o in self.outcomes if o.outcome == "failed")

    @property
    def level(self) -> Level:
        """``"full"``, ``"partial"``, ``"failed"`` or ``"interrupted"`` (see the class
        docstring)."""
        if self.interrupted:
            return "interrupted"
        rows = self.capabilities
        if self.error is not None or any(row.status == FAIL for row in rows if row.is_core):
            return "failed"
        core = self.capability(CORE).status
        if core not in (PASS, INCOMPLETE) and not (core == UNTESTED and self.narrowed):
            return "failed"
        if self.notes:
            return "partial"
        return "full"

    @property
    def notes(self) -> tuple[str, ...]:
        """Why the level is not ``full`` (empty when it is)."""
        if self.interrupted:
            return ("the run was interrupted before it finished: nothing can be concluded",)
        notes = []
        if self.error is not None:
            notes.append(self.error)
        if self.not_run:
            notes.append(
                f"narrowed run: {len(self.not_run)} test(s) of the suite did not run "
                "(-k, -x or a subset), so it cannot show the store passes everything"
            )
        for row in self.capabilities:
            declared_row = row.is_core or row.name in self.declared
            if row.status == FAIL:
                notes.append(f"{row.name}: {row.failed} test(s) failed")
            elif row.status == INCOMPLETE:
                notes.append(f"{row.name}: not every test ran (skipped or not selected)")
            elif row.status == UNTESTED and declared_row:
                notes.append(f"{row.name}: declared but no test of it ran")
        return tuple(notes)

    @property
    def ok(self) -> bool:
        """Whether the store passed everything it declares (``level == "full"``)."""
        return self.level == "full"

    # -- output ---------------------------------------------------------------------------

    def format(self) -> str:
        """A plain-text table for a terminal."""
        if self.backend is None:
            declares = "(unknown: the store did not open)"
        else:
            declares = ", ".join(sorted(self.declared)) or "(nothing optional)"
        lines = [
            "chatkeep conformance report",
            f"  store:    {self.url}" + (f"  (backend {self.backend})" if self.backend else ""),
            f"  declares: {declares}",
        ]
        if self.provided_hooks:
            lines.append(f"  hooks:    {', '.join(sorted(self.provided_hooks))}")
        unproved = self.unproved
        lines.append(
            f"  level:    {self.level}"
            + ("  ok" if self.ok else "  NOT OK")
            + (f"  (without test hooks, not proved: {', '.join(unproved)})" if unproved else "")
        )
        if self.error is not None:
            lines.append(f"  error:    {self.error}")
        if self.error is not None and not self.outcomes:
            return "\n".join(lines)  # nothing ran: no table to mislead anyone
        lines.append("")
        header = f"  {'capability':<16}{'status':<14}{'passed':>7}{'failed':>7}{'skipped':>8}"
        lines.append(header)
        lines.append("  " + "-" * (len(header) - 2))
        for row in self.capabilities:
            lines.append(
                f"  {row.name:<16}{row.status:<14}{row.passed:>7}{row.failed:>7}{row.skipped:>8}"
            )
        counts = self.counts
        lines.append("  " + "-" * (len(header) - 2))
        lines.append(
            f"  {'total':<30}{counts['passed']:>7}{counts['failed']:>7}{counts['skipped']:>8}"
        )
        notes = [note for note in self.notes if note != self.error]
        if notes:
            lines.append("")
            lines.append("not full because:" if not self.interrupted else "interrupted:")
            lines.extend(f"  - {note}" for note in notes)
        if self.failures:
            lines.append("")
            lines.append("failures:")
            for failure in self.failures:
                lines.append(f"  [{failure.group}] {failure.name}: {failure.message}")
                rule = _rule_of(failure.name)
                if rule is not None:
                    lines.append(f"      rule: {rule.text} (see {rule.see})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "url": self.url,
            "backend": self.backend,
            "declared": sorted(self.declared),
            "level": self.level,
            "ok": self.ok,
            "notes": list(self.notes),
            "narrowed": self.narrowed,
            "interrupted": self.interrupted,
            "hooks": sorted(self.provided_hooks),
            "unproved": list(self.unproved),
            "exit_code": self.exit_code,
            "error": self.error,
            "counts": self.counts,
            "capabilities": {
                row.name: {
                    "status": row.status,
                    "passed": row.passed,
                    "failed": row.failed,
                    "skipped": row.skipped,
                }
                for row in self.capabilities
            },
            "failures": [
                {
                    "test": o.name,
                    "capability": o.group,
                    "message": o.message,
                    "rule": rule.text if (rule := _rule_of(o.name)) else None,
                    "see": rule.see if rule else None,
                }
                for o in self.failures
            ],
            "tests": [
                {"test": o.name, "capability": o.group, "outcome": o.outcome, "message": o.message}
                for o in self.outcomes
            ],
            "not_run": list(self.not_run),
        }


def _rule_of(name: str) -> Rule | None:
    """The rule a test named ``Mixin.test_name`` checks, if it is one of the suite's."""
    return rule_for(name.split(".", 1)[0])


def _group_of(name: str) -> str:
    """The report row of a not-run test named ``Mixin.test_name``."""
    mixin = name.split(".", 1)[0]
    requirement = REQUIREMENTS.get(mixin)
    return CORE if requirement is None else requirement.group
