"""The invariants' view of the store: a read is answered once per state of the data, and always as the store
would answer it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reference.store import SessionStore
from reference.transcript import new_message
from sim.scenario.view import StoreReads


class Boom(Exception):
    pass


def counted(store: SessionStore, op: str) -> list[int]:
    """Count the store's own calls of `op` (an instance attribute shadows the method)."""
    calls: list[int] = []
    read: Callable[..., Any] = getattr(store, op)

    def spy(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return read(*args, **kw)

    setattr(store, op, spy)
    return calls


def contents(rows: list[Any]) -> list[str]:
    return [row.content for row in rows]


@pytest.fixture
def store() -> SessionStore:
    store = SessionStore()
    store.create_session("s", now=0.0)
    store.append_message("s", new_message("user", "a", 0.0), now=0.0)
    return store


def test_repeated_reads_between_writes_run_once(store: SessionStore) -> None:
    calls = counted(store, "all_messages")
    reads = StoreReads(store)
    assert contents(reads.all_messages("s")) == contents(reads.all_messages("s")) == ["a"]
    assert len(calls) == 1


def test_a_write_is_seen_by_the_next_read(store: SessionStore) -> None:
    reads = StoreReads(store)
    assert contents(reads.active_messages("s")) == ["a"]
    store.append_message("s", new_message("assistant", "b", 1.0), now=1.0)
    assert contents(reads.active_messages("s")) == ["a", "b"]


def test_a_rolled_back_write_reads_again_and_sees_the_old_state(store: SessionStore) -> None:
    reads = StoreReads(store)
    calls = counted(store, "active_messages")
    reads.active_messages("s")

    def fail(op: str, point: str) -> None:
        if point == "before_commit":
            raise Boom

    store.fault_hook = fail
    with pytest.raises(Boom):
        store.append_message("s", new_message("assistant", "lost", 1.0), now=1.0)
    assert contents(reads.active_messages("s")) == ["a"]
    assert len(calls) == 2


def test_a_reader_cannot_change_what_the_next_reader_is_told(store: SessionStore) -> None:
    reads = StoreReads(store)
    reads.all_messages("s").clear()
    assert contents(reads.all_messages("s")) == ["a"]


def test_arguments_tell_reads_apart(store: SessionStore) -> None:
    store.create_session("t", now=0.0)
    reads = StoreReads(store)
    assert contents(reads.all_messages("s")) == ["a"] and reads.all_messages("t") == []
    assert reads.lease_holder("s", now=0.0) is None
