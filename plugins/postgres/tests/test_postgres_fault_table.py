"""The one fault table: server errors that are not connection failures become chatkeep's
typed errors, never raw psycopg exceptions, and never show a secret."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from chatkeep_postgres_support import with_query
from psycopg import errors as pg_errors
from psycopg import sql

from chatkeep.core import ChatkeepError, Record, RecordConflict, StoreUnavailable
from chatkeep.postgres import PostgresStore
from chatkeep.postgres.faults import Call, Faults, ReadOnlyStore

Admin = psycopg.Connection[tuple[Any, ...]]


def test_a_dropped_table_is_store_unavailable_with_its_sqlstate(
    postgres_url: str, fresh_schema: str, admin: Admin
) -> None:
    with PostgresStore(with_query(postgres_url, schema=fresh_schema)) as store:
        store.append("s", [Record("a", b"")])
        admin.execute(
            sql.SQL("DROP TABLE {} CASCADE").format(sql.Identifier(fresh_schema, "records"))
        )
        with pytest.raises(StoreUnavailable) as caught:
            store.read("s")
    assert "42P01" in str(caught.value)  # undefined_table
    assert "refused read" in str(caught.value)
    assert not isinstance(caught.value, psycopg.Error)


def test_the_table_maps_by_class_and_scrubs_secrets() -> None:
    secret = "pw-7d1e0c55"
    faults = Faults("postgresql://app:***@db/app", (secret,))

    def mapped(error: BaseException, call: Call) -> BaseException:
        with pytest.raises(ChatkeepError) as caught, faults.mapped(call):
            raise error
        return caught.value

    refused = mapped(pg_errors.InsufficientPrivilege(f"no access, password {secret}"), Call("read"))
    assert isinstance(refused, StoreUnavailable)
    assert secret not in str(refused) and "42501" in str(refused)
    assert refused.__cause__ is None  # its text showed the secret: not chained
    context = refused.__context__  # still reachable (raised while handling): masked too
    assert context is None or secret not in f"{context} {context!r}"
    read_only = mapped(pg_errors.ReadOnlySqlTransaction("read-only"), Call("delete", "s"))
    assert isinstance(read_only, ReadOnlyStore) and "delete" in str(read_only)
    gone = mapped(psycopg.OperationalError("server closed the connection"), Call("append"))
    assert isinstance(gone, StoreUnavailable) and "1 attempt" in str(gone)
    assert isinstance(gone.__cause__, psycopg.OperationalError)  # safe to chain
    # chatkeep's own errors and foreign exceptions pass through untouched.
    conflict = RecordConflict("s", "m")
    with pytest.raises(RecordConflict) as passed, faults.mapped(Call("append", "s")):
        raise conflict
    assert passed.value is conflict
    with pytest.raises(KeyError), faults.mapped(Call("read")):
        raise KeyError("not a driver error")
