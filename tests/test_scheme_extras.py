"""The one scheme table (``chatkeep.core.schemes``) agrees with the meta-distribution's extras
and with what the in-repo plugins register, so no advice names an extra that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib  # the repo session runs on 3.11+

from chatkeep.core import backends
from chatkeep.core.schemes import IN_REPO_BACKENDS

ROOT = Path(__file__).resolve().parents[1]


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        extra: [re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0] for requirement in listed]
        for extra, listed in project["optional-dependencies"].items()
    }


def test_every_extra_named_exists_and_installs_the_backend_of_its_schemes() -> None:
    extras = _extras()
    installed = backends()
    for row in IN_REPO_BACKENDS:
        assert row.extra in extras, f"{row.name}: no extra {row.extra!r} in the meta-distribution"
        info = installed[row.name]
        assert info.distribution in extras[row.extra], (row.extra, info.distribution)
        # A backend is also reachable by its name; the table lists the URL schemes.
        assert set(info.schemes) - {row.name} == set(row.schemes) - {row.name}, row.name


def test_every_in_repo_backend_has_a_row() -> None:
    plugins = {path.name for path in (ROOT / "plugins").iterdir() if path.is_dir()}
    distributions = {info.distribution for info in backends().values()}
    rows = {row.name for row in IN_REPO_BACKENDS}
    for plugin in plugins:
        distribution = "chatkeep-" + plugin.replace("_", "-")
        assert distribution in distributions, f"{distribution} registers no backend"
        names = {name for name, info in backends().items() if info.distribution == distribution}
        assert names <= rows, f"{sorted(names - rows)} missing from IN_REPO_BACKENDS"
