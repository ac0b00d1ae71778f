"""Reference session store: every operation, each failure path and each race guard (R-numbers in names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import run_sim

from reference.db import Database
from reference.store import (
    AUTOMATIC_END_REASONS,
    COMPRESSION_END,
    DELIBERATE_END_REASONS,
    EXPLICIT_CLOSE_REASONS,
    FORK_MARKERS,
    CooldownRestoreMismatch,
    CooldownRow,
    LeaseLostError,
    LeaseRow,
    ParentChangedError,
    ParentEndedError,
    SessionClosedByCompression,
    SessionExistsError,
    SessionStore,
    StoreError,
    UnknownSessionError,
)

TTL = 300.0


def msg(content: str, *, role: str = "user", ts: float = 1.0, pmid: str | None = None) -> dict[str, Any]:
    return {"role": role, "content": content, "timestamp": ts, "platform_message_id": pmid}


def summary(content: str = "S") -> dict[str, Any]:
    return {"role": "user", "content": content, "timestamp": 50.0, "is_summary": True}


def contents(store: SessionStore, sid: str) -> list[str]:
    return [m.content for m in store.active_messages(sid)]


def flags(store: SessionStore, sid: str) -> dict[str, tuple[bool, bool]]:
    """content -> (active, compacted) of the original rows (first occurrence wins)."""
    out: dict[str, tuple[bool, bool]] = {}
    for m in store.all_messages(sid):
        out.setdefault(m.content, (m.active, m.compacted))
    return out


class Boom(Exception):
    pass


@pytest.fixture
def store() -> SessionStore:
    s = SessionStore()
    s.create_session("s", now=0.0)
    yield s
    s.close()


def seed(store: SessionStore, sid: str, *names: str) -> list[int]:
    return store.append_messages(sid, [msg(n) for n in names], now=1.0)


# -- constants ----------------------------------------------------------------------------------


def test_end_reason_taxonomy_is_disjoint_and_complete() -> None:
    assert AUTOMATIC_END_REASONS == {
        "agent_close", "ws_orphan_reap", "superseded_by_resume", "startup_orphan_reap",
        "tui_shutdown", "ws_disconnect", "idle_timeout", "lru_evict",
    }
    assert DELIBERATE_END_REASONS == {
        "session_reset", "session_switch", "idle", "daily", "suspended", "resume_pending_expired", "new_session",
    }
    assert EXPLICIT_CLOSE_REASONS == {"tui_close", "cli_close", "webhook_complete"}
    assert not AUTOMATIC_END_REASONS & DELIBERATE_END_REASONS
    assert not (AUTOMATIC_END_REASONS | DELIBERATE_END_REASONS) & EXPLICIT_CLOSE_REASONS
    assert COMPRESSION_END == "compression"
    assert COMPRESSION_END not in AUTOMATIC_END_REASONS | DELIBERATE_END_REASONS | EXPLICIT_CLOSE_REASONS
    assert FORK_MARKERS == ("_branched_from", "_delegate_from", "_reset_from")


def test_every_error_is_a_store_error() -> None:
    for err in (SessionClosedByCompression, LeaseLostError, ParentEndedError, ParentChangedError,
                UnknownSessionError, CooldownRestoreMismatch, SessionExistsError):
        assert issubclass(err, StoreError)


# -- sessions -----------------------------------------------------------------------------------


def test_create_and_get_session_round_trips_every_field() -> None:
    store = SessionStore()
    store.create_session("p", now=1.0)
    store.create_session("c", now=2.5, parent="p", model_config={"k": [1, 2], "_branched_from": "p"},
                         title="T", title_source="llm")
    row = store.get_session("c")
    assert row is not None
    assert (row.id, row.parent_id, row.started_at, row.ended_at, row.end_reason) == ("c", "p", 2.5, None, None)
    assert row.model_config == {"k": [1, 2], "_branched_from": "p"}
    assert (row.message_count, row.title, row.title_source) == (0, "T", "llm")
    assert row.live and not row.rotated


def test_get_unknown_session_is_none(store: SessionStore) -> None:
    assert store.get_session("nope") is None


def test_create_duplicate_session_is_refused(store: SessionStore) -> None:
    with pytest.raises(SessionExistsError):
        store.create_session("s", now=1.0)


def test_create_with_unknown_parent_is_refused(store: SessionStore) -> None:
    with pytest.raises(UnknownSessionError):
        store.create_session("c", now=1.0, parent="ghost")
    assert store.get_session("c") is None


def test_end_session_stamps_only_an_open_session(store: SessionStore) -> None:
    assert store.end_session("s", now=5.0, reason="tui_shutdown") is True
    assert store.end_session("s", now=6.0, reason="session_reset") is False
    row = store.get_session("s")
    assert (row.ended_at, row.end_reason) == (5.0, "tui_shutdown")


def test_end_session_rejects_unknown_reason_and_unknown_session(store: SessionStore) -> None:
    with pytest.raises(ValueError):
        store.end_session("s", now=1.0, reason="because")
    with pytest.raises(UnknownSessionError):
        store.end_session("ghost", now=1.0, reason="agent_close")
    assert store.get_session("s").live


def test_live_sessions_and_children(store: SessionStore) -> None:
    store.create_session("a", now=1.0, parent="s")
    store.create_session("b", now=2.0, parent="s")
    store.end_session("a", now=3.0, reason="idle")
    assert [r.id for r in store.live_sessions()] == ["b", "s"]
    assert store.session_ids() == ["a", "b", "s"]
    assert [r.id for r in store.children("s")] == ["a", "b"]
    assert store.children("ghost") == []


def test_file_backed_store_is_durable_across_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "state.db")
    first = SessionStore(path)
    first.create_session("s", now=0.0)
    first.append_message("s", msg("kept"), now=1.0)
    first.close()
    second = SessionStore(path)
    assert contents(second, "s") == ["kept"]
    second.close()


# -- messages -----------------------------------------------------------------------------------


def test_append_returns_monotone_ids_and_counts_active_rows(store: SessionStore) -> None:
    ids = seed(store, "s", "a", "b")
    ids += [store.append_message("s", msg("c", role="assistant", pmid="p-1"), now=2.0)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    rows = store.active_messages("s")
    assert [r.id for r in rows] == ids
    assert rows[2].payload == ("assistant", "c", 1.0, "p-1", False)
    assert store.get_session("s").message_count == 3


def test_append_without_timestamp_uses_callers_now(store: SessionStore) -> None:
    store.append_message("s", {"role": "user", "content": "x"}, now=42.5)
    assert store.active_messages("s")[0].timestamp == 42.5


def test_append_never_checks_the_compression_lease_r14(store: SessionStore) -> None:
    assert store.try_acquire_lease("s", "compressor", now=1.0, ttl_s=TTL)
    store.append_message("s", msg("turn"), now=2.0)
    assert contents(store, "s") == ["turn"]


def test_append_to_session_closed_by_compression_names_compression(store: SessionStore) -> None:
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    with pytest.raises(SessionClosedByCompression) as caught:
        store.append_message("s", msg("late"), now=2.0)
    assert "compression" in str(caught.value) and "disk" not in str(caught.value)
    assert store.all_messages("s") == []


def test_append_to_automatically_or_deliberately_ended_session_is_allowed(store: SessionStore) -> None:
    store.create_session("d", now=0.0)
    store.end_session("s", now=1.0, reason="tui_shutdown")
    store.end_session("d", now=1.0, reason="session_reset")
    seed(store, "s", "a")
    seed(store, "d", "b")
    assert contents(store, "s") == ["a"] and contents(store, "d") == ["b"]


def test_append_to_unknown_session_raises(store: SessionStore) -> None:
    with pytest.raises(UnknownSessionError):
        store.append_messages("ghost", [msg("x")], now=1.0)


def test_a_platform_message_shares_its_live_row_else_the_one_its_conversation_summarized_r10(store: SessionStore) -> None:
    """#104653: the gateway's receipt write and the turn's flush leave one row, also once the receipt row was
    summarized in place or by a rotation (then the row is found in the closed parent); never a fork parent's."""
    (receipt,) = store.append_messages("s", [msg("hi", pmid="tg:1")], now=1.0)
    assert store.append_messages("s", [msg("hi", pmid="tg:1")], now=2.0) == [receipt]
    assert store.try_acquire_lease("s", "h", now=2.0, ttl_s=TTL)
    store.archive_and_compact("s", [summary()], holder="h", watermark=receipt, now=3.0)
    assert store.append_messages("s", [msg("hi", pmid="tg:1")], now=4.0) == [receipt]
    assert contents(store, "s") == ["S"]
    store.release_lease("s", "h")
    rotate(store, "s", "child", 5.0)
    assert store.append_messages("child", [msg("hi", pmid="tg:1")], now=6.0) == [receipt]
    store.create_session("branch", now=7.0, parent="s", model_config={"_branched_from": "s"})
    assert store.append_messages("branch", [msg("hi", pmid="tg:1")], now=8.0) != [receipt]


def test_watermark_is_max_active_id_or_zero(store: SessionStore) -> None:
    assert store.active_watermark("s") == 0
    ids = seed(store, "s", "a", "b")
    assert store.active_watermark("s") == ids[-1]
    assert store.active_watermark("ghost") == 0


def test_all_messages_keeps_inactive_rows(store: SessionStore) -> None:
    seed(store, "s", "a")
    store.try_acquire_lease("s", "h", now=1.0, ttl_s=TTL)
    store.archive_and_compact("s", [summary()], holder="h", watermark=store.active_watermark("s"), now=2.0)
    assert [(m.content, m.active, m.compacted) for m in store.all_messages("s")] == [
        ("a", False, True), ("S", True, False),
    ]


# -- lease --------------------------------------------------------------------------------------


def test_acquire_free_lease_then_live_holder_excludes_others(store: SessionStore) -> None:
    assert store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert not store.try_acquire_lease("s", "B", now=9.0, ttl_s=10.0)
    assert store.lease_row("s") == LeaseRow("s", "A", 0.0, 10.0)
    assert store.lease_holder("s", now=9.0) == "A"


def test_reacquire_by_same_holder_refreshes(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert store.try_acquire_lease("s", "A", now=5.0, ttl_s=10.0)
    assert store.lease_row("s") == LeaseRow("s", "A", 0.0, 15.0)


def test_expired_lease_is_reclaimed_r24(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert store.try_acquire_lease("s", "B", now=10.0, ttl_s=10.0)  # expires_at <= now is stale
    assert store.lease_row("s") == LeaseRow("s", "B", 10.0, 20.0)


def test_dead_holder_is_reclaimed_at_once_r24(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=TTL)
    asked: list[str] = []

    def dead(holder: str) -> bool:
        asked.append(holder)
        return holder == "A"

    assert store.try_acquire_lease("s", "B", now=1.0, ttl_s=TTL, holder_is_dead=dead)
    assert asked == ["A"]
    assert store.lease_holder("s", now=1.0) == "B"


def test_live_unexpired_holder_is_never_displaced_r24(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=TTL)
    assert not store.try_acquire_lease("s", "B", now=1.0, ttl_s=TTL, holder_is_dead=lambda h: False)
    assert not store.try_acquire_lease("s", "B", now=1.0, ttl_s=TTL)
    assert store.lease_row("s") == LeaseRow("s", "A", 0.0, TTL)


def test_acquire_rejects_non_positive_ttl(store: SessionStore) -> None:
    with pytest.raises(ValueError):
        store.try_acquire_lease("s", "A", now=0.0, ttl_s=0.0)


def test_refresh_extends_own_row_only(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert store.refresh_lease("s", "A", now=4.0, ttl_s=10.0)
    assert not store.refresh_lease("s", "B", now=4.0, ttl_s=10.0)
    assert store.lease_row("s").expires_at == 14.0


def test_refresh_revives_own_expired_row_by_ownership(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert store.lease_holder("s", now=20.0) is None
    assert store.refresh_lease("s", "A", now=20.0, ttl_s=10.0)
    assert store.lease_holder("s", now=20.0) == "A"


def test_refresh_never_reinserts_after_release_r3(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    store.release_lease("s", "A")
    assert not store.refresh_lease("s", "A", now=1.0, ttl_s=10.0)
    assert store.lease_row("s") is None


def test_stale_release_leaves_new_holders_lease_aba_r3(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert store.try_acquire_lease("s", "B", now=11.0, ttl_s=10.0)
    assert store.release_lease("s", "A") is False
    assert store.lease_row("s") == LeaseRow("s", "B", 11.0, 21.0)
    assert not store.try_acquire_lease("s", "C", now=12.0, ttl_s=10.0)


def test_release_is_idempotent(store: SessionStore) -> None:
    store.try_acquire_lease("s", "A", now=0.0, ttl_s=10.0)
    assert store.release_lease("s", "A") is True
    assert store.release_lease("s", "A") is False
    assert store.lease_row("s") is None and store.lease_holder("s", now=0.0) is None


# -- archive_and_compact (in place) --------------------------------------------------------------


def lease_and_mark(store: SessionStore, sid: str = "s", holder: str = "h", now: float = 2.0) -> int:
    """Acquire, then capture the watermark, as a compressor does right after winning the lease."""
    assert store.try_acquire_lease(sid, holder, now=now, ttl_s=TTL)
    return store.active_watermark(sid)


def test_archive_replaces_active_set_with_compacted(store: SessionStore) -> None:
    seed(store, "s", "a", "b")
    wm = lease_and_mark(store)
    ids = store.archive_and_compact("s", [summary(), msg("b")], holder="h", watermark=wm, now=3.0)
    rows = store.active_messages("s")
    assert [r.id for r in rows] == ids and min(ids) > wm
    assert [(r.content, r.is_summary) for r in rows] == [("S", True), ("b", False)]
    assert flags(store, "s")["a"] == (False, True)
    assert store.get_session("s").message_count == 2


def test_archive_clones_concurrent_tail_after_summary_r14(store: SessionStore) -> None:
    seed(store, "s", "a", "b")
    wm = lease_and_mark(store)
    late = store.append_messages("s", [msg("c1", ts=7.0, pmid="x"), msg("c2", role="assistant", ts=8.0)], now=4.0)
    before = {r.id: r.payload for r in store.active_messages("s")}
    ids = store.archive_and_compact("s", [summary()], holder="h", watermark=wm, now=5.0)
    rows = store.active_messages("s")
    assert [r.content for r in rows] == ["S", "c1", "c2"]
    assert [r.payload for r in rows[1:]] == [before[i] for i in late]
    assert not set(ids) & set(late)
    originals = {r.id: (r.active, r.compacted) for r in store.all_messages("s")}
    assert [originals[i] for i in late] == [(False, False), (False, False)]


def test_tail_count_rewind_is_bounded_at_watermark_r14(store: SessionStore) -> None:
    seed(store, "s", "a", "b", "c", "d")
    wm = lease_and_mark(store)
    seed(store, "s", "e", "f")
    store.archive_and_compact("s", [summary(), msg("c"), msg("d")], holder="h", watermark=wm, now=5.0,
                              tail_count=2)
    assert contents(store, "s") == ["S", "c", "d", "e", "f"]
    f = flags(store, "s")
    assert [f[n] for n in "abcdef"] == [(False, True)] * 2 + [(False, False)] * 4


def test_tail_count_rewinds_only_carried_rows_r14(store: SessionStore) -> None:
    """A slot row the candidate summarized (an unsaved message took its verbatim place) stays searchable."""
    seed(store, "s", "a", "b", "c", "d")
    wm = lease_and_mark(store)
    store.archive_and_compact("s", [summary(), msg("d"), msg("new")], holder="h", watermark=wm, now=5.0,
                              tail_count=2)
    f = flags(store, "s")
    assert [f[n] for n in "abcd"] == [(False, True)] * 3 + [(False, False)]


def test_archive_without_watermark_archives_everything(store: SessionStore) -> None:
    seed(store, "s", "a", "b", "c")
    lease_and_mark(store)
    store.archive_and_compact("s", [summary(), msg("c")], holder="h", watermark=None, now=5.0, tail_count=1)
    assert contents(store, "s") == ["S", "c"]
    assert [flags(store, "s")[n] for n in "abc"] == [(False, True), (False, True), (False, False)]


@pytest.mark.parametrize("case", ["expired", "other_holder", "released"])
def test_archive_refuses_without_a_live_lease_r25(store: SessionStore, case: str) -> None:
    seed(store, "s", "a")
    wm = lease_and_mark(store, now=0.0)
    now = 1.0
    if case == "expired":
        now = TTL
    elif case == "other_holder":
        now = TTL + 1
        assert store.try_acquire_lease("s", "other", now=now, ttl_s=TTL)
    else:
        store.release_lease("s", "h")
    before = store.snapshot()
    with pytest.raises(LeaseLostError):
        store.archive_and_compact("s", [summary()], holder="h", watermark=wm, now=now)
    assert store.snapshot() == before


def test_archive_of_rotated_session_is_refused(store: SessionStore) -> None:
    wm = lease_and_mark(store)
    store.end_session("s", now=3.0, reason=COMPRESSION_END)
    with pytest.raises(SessionClosedByCompression):
        store.archive_and_compact("s", [summary()], holder="h", watermark=wm, now=4.0)


def test_archive_rejects_empty_compacted_and_negative_tail(store: SessionStore) -> None:
    seed(store, "s", "a")
    wm = lease_and_mark(store)
    with pytest.raises(ValueError):
        store.archive_and_compact("s", [], holder="h", watermark=wm, now=3.0)
    with pytest.raises(ValueError):
        store.archive_and_compact("s", [summary()], holder="h", watermark=wm, now=3.0, tail_count=-1)
    assert contents(store, "s") == ["a"]


# -- publish_child (rotation) --------------------------------------------------------------------


@pytest.fixture
def rotating() -> SessionStore:
    """A delegate session `s` (its marker names `origin`) with two rows under a held lease."""
    s = SessionStore()
    s.create_session("origin", now=0.0)
    s.create_session("s", now=0.0, parent="origin", model_config={"_delegate_from": "origin", "m": 1},
                     title="Trip", title_source="llm")
    seed(s, "s", "a", "b")
    yield s
    s.close()


def publish(store: SessionStore, **overrides: Any) -> list[int]:
    args: dict[str, Any] = dict(holder="h", watermark=None, ceiling=None, now=10.0, ttl_s=TTL)
    args.update(overrides)
    handoff = args.pop("handoff", [summary()])
    return store.publish_child("s", args.pop("child", "c"), handoff, **args)


def test_publish_creates_child_and_closes_parent_r20(rotating: SessionStore) -> None:
    wm = lease_and_mark(rotating)
    ids = publish(rotating, handoff=[summary(), msg("b")], watermark=wm, ceiling=wm)
    child = rotating.get_session("c")
    assert (child.parent_id, child.started_at, child.live) == ("s", 10.0, True)
    assert child.model_config == {"_delegate_from": "origin", "m": 1}
    assert (child.title, child.title_source) == ("Trip", "llm")
    assert [r.id for r in rotating.active_messages("c")] == ids
    assert contents(rotating, "c") == ["S", "b"] and child.message_count == 2
    parent = rotating.get_session("s")
    assert (parent.ended_at, parent.end_reason, parent.message_count) == (10.0, COMPRESSION_END, 0)
    assert contents(rotating, "s") == []
    assert flags(rotating, "s") == {"a": (False, True), "b": (False, True)}


def test_publish_clones_the_foreign_tail_but_not_the_own_flush_r14(rotating: SessionStore) -> None:
    wm = lease_and_mark(rotating)
    foreign = seed(rotating, "s", "f1", "f2")
    ceiling = rotating.active_watermark("s")
    own = seed(rotating, "s", "own")
    foreign += seed(rotating, "s", "late")  # another writer, after the ceiling was read
    before = {r.id: r.payload for r in rotating.active_messages("s")}
    publish(rotating, handoff=[summary(), msg("own")], watermark=wm, ceiling=ceiling, own_rows=own)
    rows = rotating.active_messages("c")
    assert [r.content for r in rows] == ["S", "own", "f1", "f2", "late"]
    assert [r.payload for r in rows[2:]] == [before[i] for i in foreign]
    f = flags(rotating, "s")
    assert (f["f1"], f["late"], f["own"], f["a"]) == ((False, False), (False, False), (False, True), (False, True))


def test_publish_without_ceiling_clones_everything_above_watermark(rotating: SessionStore) -> None:
    wm = lease_and_mark(rotating)
    seed(rotating, "s", "f1")
    publish(rotating, watermark=wm, ceiling=None)
    assert contents(rotating, "c") == ["S", "f1"]


def test_publish_without_watermark_clones_nothing(rotating: SessionStore) -> None:
    lease_and_mark(rotating)
    seed(rotating, "s", "f1")
    publish(rotating, watermark=None, ceiling=rotating.active_watermark("s"))
    assert contents(rotating, "c") == ["S"]


def test_publish_refreshes_the_lease_in_the_commit_r25(rotating: SessionStore) -> None:
    lease_and_mark(rotating, now=0.0)
    publish(rotating, now=TTL + 5)  # expired but still ours: the in-txn refresh revives it
    assert rotating.lease_row("s").expires_at == 2 * TTL + 5
    assert rotating.get_session("c").live


@pytest.mark.parametrize("case", ["expired_no_refresh", "other_holder", "released"])
def test_publish_refuses_without_a_live_lease_r25(rotating: SessionStore, case: str) -> None:
    lease_and_mark(rotating, now=0.0)
    overrides: dict[str, Any] = {"now": 1.0}
    if case == "expired_no_refresh":
        overrides = {"now": TTL, "require_refresh": False}
    elif case == "other_holder":
        assert rotating.try_acquire_lease("s", "other", now=TTL + 1, ttl_s=TTL)
        overrides = {"now": TTL + 2}
    else:
        rotating.release_lease("s", "h")
    before = rotating.snapshot()
    with pytest.raises(LeaseLostError):
        publish(rotating, **overrides)
    assert rotating.snapshot() == before


@pytest.mark.parametrize("reason", sorted(AUTOMATIC_END_REASONS))
def test_publish_heals_an_automatic_end_r11(rotating: SessionStore, reason: str) -> None:
    lease_and_mark(rotating)
    rotating.end_session("s", now=5.0, reason=reason)
    publish(rotating)
    parent = rotating.get_session("s")
    assert (parent.end_reason, parent.ended_at) == (COMPRESSION_END, 10.0)
    assert rotating.get_session("c").live


@pytest.mark.parametrize("reason", sorted(DELIBERATE_END_REASONS))
def test_publish_refuses_a_deliberate_end_r11(rotating: SessionStore, reason: str) -> None:
    lease_and_mark(rotating)
    rotating.end_session("s", now=5.0, reason=reason)
    before = rotating.snapshot()
    with pytest.raises(ParentEndedError):
        publish(rotating)
    assert rotating.snapshot() == before


def test_late_contender_cannot_rotate_a_rotated_parent_r19(rotating: SessionStore) -> None:
    lease_and_mark(rotating, holder="A")
    publish(rotating, holder="A", child="c1")
    rotating.release_lease("s", "A")
    lease_and_mark(rotating, holder="B", now=11.0)
    before = rotating.snapshot()
    with pytest.raises(ParentChangedError):
        publish(rotating, holder="B", child="c2", now=12.0)
    assert rotating.snapshot() == before
    assert rotating.continuation_children("s") == ["c1"]


def test_publish_rejects_empty_handoff_existing_child_and_unknown_parent(rotating: SessionStore) -> None:
    lease_and_mark(rotating)
    with pytest.raises(ValueError):
        publish(rotating, handoff=[])
    with pytest.raises(SessionExistsError):
        publish(rotating, child="origin")
    assert rotating.get_session("s").live
    assert rotating.try_acquire_lease("ghost", "h", now=2.0, ttl_s=TTL)
    with pytest.raises(UnknownSessionError):
        rotating.publish_child("ghost", "c", [summary()], holder="h", watermark=None, ceiling=None,
                               now=3.0, ttl_s=TTL)


def test_publish_is_atomic_when_the_commit_fails_r20(rotating: SessionStore) -> None:
    lease_and_mark(rotating)
    before = rotating.snapshot()

    def fail(op: str, point: str) -> None:
        if (op, point) == ("publish_child", "before_commit"):
            raise Boom

    rotating.fault_hook = fail
    with pytest.raises(Boom):
        publish(rotating)
    assert rotating.snapshot() == before
    assert rotating.get_session("c") is None and rotating.get_session("s").live


def test_a_rotation_without_lease_ignores_the_lease_and_commits_as_one_write_r19(rotating: SessionStore) -> None:
    lease_and_mark(rotating, holder="A")
    writes: list[tuple[str, str]] = []
    rotating.fault_hook = lambda op, point: writes.append((op, point))
    ids = rotating.rotate_without_lease("s", "s/old", [msg("carried")], now=5.0, model_config={"m": 1}, title="t",
                                        title_source="user")
    assert writes == [("rotate_without_lease", "before_commit"), ("rotate_without_lease", "after_commit")]
    child = rotating.get_session("s/old")
    assert (child.parent_id, child.model_config, child.title) == ("s", {"m": 1}, "t")
    assert [m.id for m in rotating.active_messages("s/old")] == ids and contents(rotating, "s/old") == ["carried"]
    assert rotating.get_session("s").end_reason == COMPRESSION_END
    assert rotating.lease_row("s").holder == "A"  # it never looked at the lease


def test_a_rotation_without_lease_is_rolled_back_whole_when_it_fails(rotating: SessionStore) -> None:
    before = rotating.snapshot()

    def fail(op: str, point: str) -> None:
        if point == "before_commit":
            raise Boom

    rotating.fault_hook = fail
    with pytest.raises(Boom):
        rotating.rotate_without_lease("s", "s/old", [msg("carried")], now=5.0, model_config={}, title=None, title_source=None)
    assert rotating.snapshot() == before


# -- lineage --------------------------------------------------------------------------------------


def rotate(store: SessionStore, parent: str, child: str, now: float, holder: str = "h") -> None:
    assert store.try_acquire_lease(parent, holder, now=now, ttl_s=TTL)
    store.publish_child(parent, child, [summary(child)], holder=holder, watermark=None, ceiling=None,
                        now=now, ttl_s=TTL)
    store.release_lease(parent, holder)


def test_tip_walks_root_mid_tip_transitively_r15(store: SessionStore) -> None:
    rotate(store, "s", "mid", 1.0)
    rotate(store, "mid", "tip", 2.0)
    assert store.compression_tip("s") == "tip"
    assert store.compression_tip("mid") == "tip"
    assert store.compression_tip("tip") == "tip"


def test_tip_is_none_when_the_chain_does_not_end_live(store: SessionStore) -> None:
    rotate(store, "s", "mid", 1.0)
    rotate(store, "mid", "tip", 2.0)
    store.end_session("tip", now=3.0, reason="session_reset")
    assert store.compression_tip("s") is None
    assert store.compression_tip("tip") is None
    assert store.compression_tip("ghost") is None


def test_tip_stamped_automatically_is_still_adopted_but_not_one_closed_explicitly(store: SessionStore) -> None:
    rotate(store, "s", "tip", 1.0)
    store.end_session("tip", now=2.0, reason="tui_shutdown")
    assert store.compression_tip("s") == "tip"  # the shutdown's own agent goes on writing there; a rotation heals it
    store.create_session("u", now=3.0)
    rotate(store, "u", "v", 4.0)
    store.end_session("v", now=5.0, reason="tui_close")
    assert store.compression_tip("u") is None


def test_tip_never_follows_a_fork(store: SessionStore) -> None:
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    store.create_session("branch", now=2.0, parent="s", model_config={"_branched_from": "s"})
    assert store.continuation_children("s") == []
    assert store.compression_tip("s") is None


def test_tip_prefers_the_continuation_that_carried_the_chain_then_a_live_one(store: SessionStore) -> None:
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    for sid in ("old", "live", "carried"):
        store.create_session(sid, now=2.0, parent="s")
    store.end_session("old", now=3.0, reason="idle")
    assert store.compression_tip("s") == "live"
    store.end_session("carried", now=3.0, reason=COMPRESSION_END)
    store.create_session("end", now=4.0, parent="carried")
    assert store.compression_tip("s") == "end"


def test_continuation_children_bind_markers_to_the_parent_r16(store: SessionStore) -> None:
    store.create_session("cont", now=1.0, parent="s", model_config={"_delegate_from": "elsewhere"})
    for i, marker in enumerate(FORK_MARKERS):
        store.create_session(f"fork{i}", now=1.0, parent="s", model_config={marker: "s"})
    assert store.continuation_children("s") == ["cont"]
    assert store.continuation_children("ghost") == []


def test_reopen_heals_a_legacy_orphan_r20(store: SessionStore) -> None:
    seed(store, "s", "a")
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    assert store.reopen_orphaned("s", now=2.0) is True
    row = store.get_session("s")
    assert (row.ended_at, row.end_reason) == (None, None)
    store.append_message("s", msg("b"), now=3.0)
    assert contents(store, "s") == ["a", "b"]


@pytest.mark.parametrize("child_ended", [False, True])
def test_reopen_refused_with_a_continuation_child_r16(store: SessionStore, child_ended: bool) -> None:
    rotate(store, "s", "c", 1.0)
    if child_ended:
        store.end_session("c", now=2.0, reason="session_reset")
    assert store.reopen_orphaned("s", now=3.0) is False
    assert store.get_session("s").rotated


def test_reopen_refused_while_a_lease_is_unexpired(store: SessionStore) -> None:
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    store.try_acquire_lease("s", "h", now=1.0, ttl_s=10.0)
    assert store.reopen_orphaned("s", now=10.0) is False
    assert store.lease_row("s") is not None and store.get_session("s").rotated


def test_reopen_reclaims_an_expired_lease(store: SessionStore) -> None:
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    store.try_acquire_lease("s", "h", now=1.0, ttl_s=10.0)
    assert store.reopen_orphaned("s", now=11.0) is True
    assert store.lease_row("s") is None
    assert not store.refresh_lease("s", "h", now=12.0, ttl_s=10.0)


def test_reopen_allowed_when_the_only_child_is_a_real_fork_r16(store: SessionStore) -> None:
    store.end_session("s", now=1.0, reason=COMPRESSION_END)
    store.create_session("d", now=2.0, parent="s", model_config={"_delegate_from": "s"})
    assert store.reopen_orphaned("s", now=3.0) is True



@pytest.mark.parametrize("reason", sorted(EXPLICIT_CLOSE_REASONS))
def test_the_routing_host_clears_an_explicit_close_106459(store: SessionStore, reason: str) -> None:
    store.end_session("s", now=1.0, reason=reason)
    assert store.reopen_if_explicitly_closed("s") == reason
    row = store.get_session("s")
    assert (row.ended_at, row.end_reason) == (None, None)


@pytest.mark.parametrize("reason", sorted(AUTOMATIC_END_REASONS | DELIBERATE_END_REASONS | {COMPRESSION_END}))
def test_the_routing_host_leaves_every_other_stamp_106459(store: SessionStore, reason: str) -> None:
    store.end_session("s", now=1.0, reason=reason)
    assert store.reopen_if_explicitly_closed("s") is None
    assert store.get_session("s").end_reason == reason


def test_an_explicit_close_with_a_continuation_stays_106459(store: SessionStore) -> None:
    store.create_session("t", now=0.0)
    store.end_session("t", now=1.0, reason="tui_close")
    store.create_session("u", now=2.0, parent="t")  # an explicit close whose session a continuation already took over
    assert store.reopen_if_explicitly_closed("t") is None
    assert store.get_session("t").end_reason == "tui_close"


def test_publication_refuses_an_explicit_close_106459(store: SessionStore) -> None:
    seed(store, "s", "a")
    store.end_session("s", now=1.0, reason="webhook_complete")
    store.try_acquire_lease("s", "h", now=1.0, ttl_s=60.0)
    with pytest.raises(ParentEndedError):
        store.publish_child("s", "c", [summary()], holder="h", watermark=1, ceiling=None, now=2.0, ttl_s=TTL)
    assert store.get_session("c") is None and store.get_session("s").end_reason == "webhook_complete"

def test_reopen_refused_when_the_child_only_inherited_a_marker_r16() -> None:
    store = SessionStore()
    store.create_session("P", now=0.0)
    store.create_session("D", now=0.0, parent="P", model_config={"_delegate_from": "P"})
    rotate(store, "D", "C", 1.0)
    assert store.get_session("C").model_config == {"_delegate_from": "P"}
    assert store.reopen_orphaned("D", now=2.0) is False
    assert [r.id for r in store.live_sessions()] == ["C", "P"]
    assert store.compression_tip("D") == "C"


def test_reopen_ignores_live_and_otherwise_ended_sessions(store: SessionStore) -> None:
    assert store.reopen_orphaned("s", now=1.0) is False
    store.end_session("s", now=1.0, reason="tui_shutdown")
    assert store.reopen_orphaned("s", now=2.0) is False
    assert store.get_session("s").end_reason == "tui_shutdown"
    with pytest.raises(UnknownSessionError):
        store.reopen_orphaned("ghost", now=2.0)


# -- cooldown and breaker ------------------------------------------------------------------------


def test_cooldown_record_and_get_unexpired(store: SessionStore) -> None:
    assert store.get_cooldown("s", now=0.0) is None
    store.record_cooldown("s", 100.0, "timeout")
    assert store.get_cooldown("s", now=99.0) == (100.0, "timeout")
    assert store.get_cooldown("s", now=100.0) is None
    assert store.cooldown_row("s").until == 100.0
    assert store.get_cooldown("ghost", now=0.0) is None


def test_cooldown_merge_keeps_the_later_deadline_and_its_error_r2(store: SessionStore) -> None:
    store.record_cooldown("s", 300.0, "host_timeout")
    store.record_cooldown("s", 60.0, "late_worker")
    assert store.get_cooldown("s", now=0.0) == (300.0, "host_timeout")
    store.record_cooldown("s", 900.0, "ceiling")
    assert store.get_cooldown("s", now=0.0) == (900.0, "ceiling")


def test_cooldown_row_is_raw_and_flags_missing_sessions(store: SessionStore) -> None:
    store.record_cooldown("s", 5.0, "e")
    assert store.cooldown_row("s") == CooldownRow(5.0, "e", 0, 0, True)
    assert store.cooldown_row("ghost") == CooldownRow(None, None, 0, 0, False)


def test_restore_writes_the_exact_row_even_an_earlier_deadline_r1(store: SessionStore) -> None:
    store.record_cooldown("s", 60.0, "old")
    snapshot = store.cooldown_row("s")
    store.record_cooldown("s", 900.0, "attempt")
    store.bump_ineffective("s")
    store.restore_cooldown_row("s", snapshot)
    assert store.cooldown_row("s") == snapshot
    empty = CooldownRow(None, None, 0, 0, True)
    store.restore_cooldown_row("s", empty)
    assert store.cooldown_row("s") == empty


def test_restore_mismatch_raises_and_rolls_back(store: SessionStore) -> None:
    with pytest.raises(CooldownRestoreMismatch):
        store.restore_cooldown_row("ghost", CooldownRow(5.0, "e", 0, 0, True))
    store.record_cooldown("s", 7.0, "kept")
    with pytest.raises(CooldownRestoreMismatch):
        store.restore_cooldown_row("s", CooldownRow(None, None, 0, 0, False))
    assert store.cooldown_row("s") == CooldownRow(7.0, "kept", 0, 0, True)


def test_clear_cooldown(store: SessionStore) -> None:
    store.record_cooldown("s", 7.0, "e")
    store.clear_cooldown("s")
    assert store.cooldown_row("s") == CooldownRow(None, None, 0, 0, True)


def test_ineffective_counter_bumps_atomically_and_resets(store: SessionStore) -> None:
    assert [store.bump_ineffective("s") for _ in range(3)] == [1, 2, 3]
    store.reset_ineffective("s")
    assert store.cooldown_row("s").ineffective_count == 0


@pytest.mark.parametrize("op", ["record", "clear", "bump", "reset"])
def test_cooldown_writes_on_unknown_session_raise(store: SessionStore, op: str) -> None:
    calls = {
        "record": lambda: store.record_cooldown("ghost", 1.0, "e"),
        "clear": lambda: store.clear_cooldown("ghost"),
        "bump": lambda: store.bump_ineffective("ghost"),
        "reset": lambda: store.reset_ineffective("ghost"),
    }
    with pytest.raises(UnknownSessionError):
        calls[op]()


# -- fault hook and transactions ------------------------------------------------------------------


def test_fault_hook_brackets_each_write_commit_and_skips_reads() -> None:
    seen: list[tuple[str, str]] = []
    store = SessionStore(fault_hook=lambda op, point: seen.append((op, point)))
    store.create_session("s", now=0.0)
    store.append_message("s", msg("a"), now=1.0)
    store.active_messages("s")
    store.get_session("s")
    assert seen == [
        ("create_session", "before_commit"), ("create_session", "after_commit"),
        ("append_message", "before_commit"), ("append_message", "after_commit"),
    ]


def test_fault_before_commit_rolls_back(store: SessionStore) -> None:
    seed(store, "s", "a")
    before = store.snapshot()

    def fail(op: str, point: str) -> None:
        if point == "before_commit":
            raise Boom

    store.fault_hook = fail
    with pytest.raises(Boom):
        store.append_messages("s", [msg("lost")], now=2.0)
    with pytest.raises(Boom):
        store.try_acquire_lease("s", "h", now=2.0, ttl_s=TTL)
    assert store.snapshot() == before
    store.fault_hook = None
    store.append_message("s", msg("next"), now=3.0)  # the connection is usable again
    assert contents(store, "s") == ["a", "next"]


def test_fault_after_commit_leaves_the_write_durable(store: SessionStore) -> None:
    def fail(op: str, point: str) -> None:
        if point == "after_commit":
            raise Boom

    store.fault_hook = fail
    with pytest.raises(Boom):
        store.try_acquire_lease("s", "h", now=1.0, ttl_s=TTL)
    with pytest.raises(Boom):
        store.append_message("s", msg("kept"), now=2.0)
    store.fault_hook = None
    assert store.lease_holder("s", now=1.0) == "h"
    assert contents(store, "s") == ["kept"]


def test_failed_operation_leaves_no_open_transaction(store: SessionStore) -> None:
    with pytest.raises(UnknownSessionError):
        store.append_message("ghost", msg("x"), now=1.0)
    with pytest.raises(LeaseLostError):
        store.archive_and_compact("s", [summary()], holder="h", watermark=0, now=1.0)
    store.create_session("t", now=2.0)
    assert store.get_session("t") is not None


def test_snapshot_is_plain_ordered_data(store: SessionStore) -> None:
    store.create_session("a", now=1.0, model_config={"x": 1})
    seed(store, "a", "m1")
    seed(store, "s", "m2")
    store.try_acquire_lease("s", "h", now=1.0, ttl_s=TTL)
    snap = store.snapshot()
    assert set(snap) == {"sessions", "messages", "leases"}
    assert [r["id"] for r in snap["sessions"]] == ["a", "s"]
    assert snap["sessions"][0]["model_config"] == {"x": 1}
    assert [r["content"] for r in snap["messages"]] == ["m1", "m2"]
    assert snap["leases"] == [{"session_id": "s", "holder": "h", "acquired_at": 1.0, "expires_at": 1.0 + TTL}]
    assert snap == store.snapshot()


def test_store_never_reads_a_clock() -> None:
    source_dir = Path(__file__).resolve().parents[1] / "reference" / "store"
    text = "\n".join(p.read_text() for p in sorted(source_dir.glob("*.py"))).lower()
    for needle in ("import time", "datetime", "current_timestamp", "julianday", "strftime", "'now'"):
        assert needle not in text, needle


# -- the async facade -----------------------------------------------------------------------------


class Gone(BaseException):
    pass


def test_a_closed_connection_refuses_every_call_and_writes_nothing(store: SessionStore) -> None:
    async def main(rt: Any) -> list[str]:
        db, refused = Database(rt, store), []
        await db.call("append_messages", "s", [msg("before")])
        db.close(lambda op: Gone(op))
        for call in (db.call("append_messages", "s", [msg("after")]), db.call_unless(lambda: False, "clear_cooldown", "s")):
            try:
                await call
            except Gone as gone:
                refused.append(str(gone))
        return refused

    assert run_sim(0, main).value == ["append_messages", "clear_cooldown"] and contents(store, "s") == ["before"]
