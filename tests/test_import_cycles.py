"""No import cycles: every module of every distribution imports only modules that do not
import it back, directly or through others.

The graph is built statically (grimp parses each member's ``src``; nothing is imported),
with every import counted: module level, inside functions and under ``TYPE_CHECKING``. A
cycle that only works because of import order, a lazy import or a type-checking guard is
still a loop a reader has to untangle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import tomllib  # the repo session runs on 3.11+

ROOT = Path(__file__).resolve().parents[1]

#: Known cycles being removed by their owners, each named by the issue that removes it.
#: Nothing else may be added here.
ALLOWED: dict[frozenset[str], str] = {}


def distributions() -> dict[str, Path]:
    """Each workspace member's top-level package (``chatkeep.<name>``) -> its folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages: dict[str, Path] = {}
    for pattern in config["tool"]["uv"]["workspace"]["members"]:
        for member in sorted(ROOT.glob(pattern)):
            for init in sorted(member.glob("src/chatkeep/*/__init__.py")):
                packages[f"chatkeep.{init.parent.name}"] = member
    return packages


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """The imports that hold a cycle together, one per line with file line numbers."""
    members = set(component)
    lines = [f"cycle among {', '.join(component)}:"]
    for importer in component:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for detail in graph.get_import_details(importer=importer, imported=imported):
                lines.append(
                    f"  {importer}:{detail['line_number']} imports {imported}"
                    f"  ({detail['line_contents'].strip()})"
                )
    return "\n".join(lines)


def test_the_cycle_finder_finds_cycles_and_only_cycles() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a"},  # a -> b -> c -> a
        "d": {"a", "e"},
        "e": {"d"},  # d <-> e, which also reaches the first loop
        "f": {"a"},  # imports into a loop, is not in one
    }
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected({"x": {"y"}, "y": set()}) == []


def test_every_member_is_analysed() -> None:
    found = distributions()
    # The core, every in-repo backend and the client/testing packages are all there.
    for expected in ("chatkeep.core", "chatkeep.sqlite", "chatkeep.testing", "chatkeep.cli"):
        assert expected in found, f"{expected} missing from the analysis"


def test_no_import_cycle_inside_any_distribution() -> None:
    packages = distributions()
    graph = grimp.build_graph(*packages, cache_dir=None)
    edges = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    cycles = [c for c in strongly_connected(edges) if frozenset(c) not in ALLOWED]
    assert not cycles, "\n\n".join(describe(graph, c) for c in cycles)
    stale = [
        sorted(c) for c in ALLOWED if c not in {frozenset(x) for x in strongly_connected(edges)}
    ]
    assert not stale, f"allowed cycles that no longer exist (remove them from ALLOWED): {stale}"
