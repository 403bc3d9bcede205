"""The capability report :func:`chatkeep.testing.run_conformance` returns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .requirements import CAPABILITY_ORDER, CORE, REQUIREMENTS

__all__ = [
    "FAIL",
    "NOT_DECLARED",
    "PASS",
    "UNTESTED",
    "CapabilityResult",
    "ConformanceReport",
    "TestOutcome",
]

PASS = "pass"  # noqa: S105 (a status, not a password)
FAIL = "fail"
NOT_DECLARED = "not declared"
UNTESTED = "untested"

Level = Literal["full", "partial", "failed"]


@dataclass(frozen=True)
class TestOutcome:
    """The result of one test of the suite."""

    __test__ = False  # not a pytest test class, despite the name

    name: str  # "SliceTests.test_slices_match_python"
    group: str  # the report row: "core" or a capability
    outcome: Literal["passed", "failed", "skipped"]
    message: str = ""  # the failure or skip reason, one line


@dataclass(frozen=True)
class CapabilityResult:
    """One row of the report: a capability (or ``core``) and how its tests went."""

    name: str
    status: str  # PASS, FAIL, NOT_DECLARED or UNTESTED
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def is_core(self) -> bool:
        """Whether the row needs no capability (the required hooks, or a group like
        ``lifecycle`` that every store must pass)."""
        return _is_core_group(self.name)


def _is_core_group(group: str) -> bool:
    if group == CORE:
        return True
    return any(req.group == group and not req.capabilities for req in REQUIREMENTS.values())


def _group_order(declared: frozenset[str], seen: Iterable[str]) -> list[str]:
    order = [CORE, *CAPABILITY_ORDER]
    for requirement in REQUIREMENTS.values():
        if requirement.group not in order:
            order.append(requirement.group)
    order.extend(sorted((set(seen) | declared) - set(order)))
    return order


@dataclass(frozen=True)
class ConformanceReport:
    """How a store did on the conformance suite, per capability.

    ``level`` is ``"full"`` when the core hooks and every capability the store declares
    pass, ``"partial"`` when the core passes but a declared capability fails, and
    ``"failed"`` when the core fails (or the suite could not run). ``ok`` is ``level ==
    "full"``. Print :meth:`format`, or serialize :meth:`as_dict` to JSON.
    """

    url: str  # redacted
    backend: str | None
    declared: frozenset[str]
    outcomes: tuple[TestOutcome, ...] = ()
    exit_code: int = 0
    error: str | None = None  # why the suite could not run at all
    output: str | None = field(default=None, repr=False)  # pytest's output when captured

    # -- derived views -------------------------------------------------------------------

    @property
    def capabilities(self) -> tuple[CapabilityResult, ...]:
        """One :class:`CapabilityResult` per row: ``core``, then each capability."""
        rows = []
        for group in _group_order(self.declared, (o.group for o in self.outcomes)):
            mine = [o for o in self.outcomes if o.group == group]
            passed = sum(o.outcome == "passed" for o in mine)
            failed = sum(o.outcome == "failed" for o in mine)
            skipped = sum(o.outcome == "skipped" for o in mine)
            if not _is_core_group(group) and group not in self.declared:
                status = NOT_DECLARED
            elif failed or (self.error is not None and _is_core_group(group)):
                status = FAIL
            elif passed:
                status = PASS
            else:
                status = UNTESTED
            rows.append(CapabilityResult(group, status, passed, failed, skipped))
        return tuple(rows)

    def capability(self, name: str) -> CapabilityResult:
        """The row for ``name`` (``"core"``, ``"delete"``, ...)."""
        for row in self.capabilities:
            if row.name == name:
                return row
        raise KeyError(name)

    @property
    def counts(self) -> dict[str, int]:
        """Tests passed, failed and skipped, and the total."""
        return {
            "passed": sum(o.outcome == "passed" for o in self.outcomes),
            "failed": sum(o.outcome == "failed" for o in self.outcomes),
            "skipped": sum(o.outcome == "skipped" for o in self.outcomes),
            "total": len(self.outcomes),
        }

    @property
    def failures(self) -> tuple[TestOutcome, ...]:
        """The failed tests."""
        return tuple(o for o in self.outcomes if o.outcome == "failed")

    @property
    def level(self) -> Level:
        """``"full"``, ``"partial"`` or ``"failed"`` (see the class docstring)."""
        rows = self.capabilities
        core = [row for row in rows if row.is_core]
        if self.error is not None or any(row.status != PASS for row in core if row.name == CORE):
            return "failed"
        if any(row.status == FAIL for row in core):
            return "failed"
        if any(row.status == FAIL for row in rows):
            return "partial"
        return "full"

    @property
    def ok(self) -> bool:
        """Whether the store passed everything it declares (``level == "full"``)."""
        return self.level == "full"

    # -- output ---------------------------------------------------------------------------

    def format(self) -> str:
        """A plain-text table for a terminal."""
        lines = [
            "chatkeep conformance report",
            f"  store:    {self.url}" + (f"  (backend {self.backend})" if self.backend else ""),
            f"  declares: {', '.join(sorted(self.declared)) or '(nothing optional)'}",
            f"  level:    {self.level}" + ("  ok" if self.ok else "  NOT OK"),
        ]
        if self.error is not None:
            lines.append(f"  error:    {self.error}")
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
        if self.failures:
            lines.append("")
            lines.append("failures:")
            for failure in self.failures:
                lines.append(f"  [{failure.group}] {failure.name}: {failure.message}")
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
                {"test": o.name, "capability": o.group, "message": o.message} for o in self.failures
            ],
        }
