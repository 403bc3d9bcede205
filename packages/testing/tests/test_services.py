"""A missing service skips outside CI and fails under CI=true."""

from __future__ import annotations

import pytest

from chatkeep.testing.services import in_ci, service_unavailable


@pytest.mark.parametrize("value", ["true", "TRUE", " True "])
def test_ci_true_fails(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match="no server on 5432"):
        service_unavailable("no server on 5432")


@pytest.mark.parametrize("value", [None, "", "false", "1"])
def test_elsewhere_skips(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match="no server on 5432"):
        service_unavailable("no server on 5432")
