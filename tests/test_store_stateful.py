"""Random operation sequences from several holders against a small pure-Python model of the store.

Checked after every step: the store matches the model (sessions, active rows, lease rows), lease mutual
exclusion (a displaced holder's commit is refused), at most one live head per lineage, at most one
continuation per rotated session, and every written message active exactly once unless summarized away.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference.store import (
    AUTOMATIC_END_REASONS,
    COMPRESSION_END,
    DELIBERATE_END_REASONS,
    FORK_MARKERS,
    LeaseLostError,
    ParentChangedError,
    ParentEndedError,
    SessionClosedByCompression,
    SessionStore,
    StoreError,
)

TTL = 50.0
SLOTS = st.integers(0, 2)
# The watermark capture after acquiring may fail (None: archive everything); make that the rare case.
CAPTURE_OK = st.sampled_from([True, True, True, False])
# Automatic ends (healable) are the common case; `compression` here is the legacy non-atomic rotation (R20).
END_REASONS = st.one_of(
    st.sampled_from(sorted(AUTOMATIC_END_REASONS)),
    st.sampled_from(sorted(DELIBERATE_END_REASONS)),
    st.just(COMPRESSION_END),
)
MAX_SESSIONS = 10

Payload = tuple[str, str, float, str | None, bool]
Row = tuple[int, Payload]


@dataclass
class ModelSession:
    parent: str | None
    config: dict[str, Any]
    end_reason: str | None = None
    active: list[Row] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.end_reason is None


@dataclass(frozen=True)
class ModelLease:
    holder: str
    acquired_at: float
    expires_at: float


def as_dict(payload: Payload) -> dict[str, Any]:
    role, content, timestamp, pmid, is_summary = payload
    return {"role": role, "content": content, "timestamp": timestamp, "platform_message_id": pmid,
            "is_summary": is_summary}


def row_payload(row: dict[str, Any]) -> Payload:
    return (row["role"], row["content"], row["timestamp"], row["platform_message_id"], bool(row["is_summary"]))


def names_parent_as_fork(config: dict[str, Any], parent: str | None) -> bool:
    return any(config.get(marker) == parent for marker in FORK_MARKERS)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = SessionStore()
        self.now = 0.0
        self.sessions: dict[str, ModelSession] = {}
        self.leases: dict[str, ModelLease] = {}
        self.watermarks: dict[tuple[str, str], int | None] = {}
        self.holders = [f"h{slot}.0" for slot in range(3)]
        self.dead: set[str] = set()
        self.written: set[str] = set()
        self.summarized: set[str] = set()
        self.last_id = 0
        self.serial = 0
        self._create("origin", parent=None, config={})
        # A delegate session: every continuation inherits a marker naming `origin`, not its own parent (R16).
        self._create("root", parent="origin", config={"_delegate_from": "origin"})
        self._append("root", 3)  # a transcript to compact from the first step on

    def teardown(self) -> None:
        self.store.close()

    # -- helpers ---------------------------------------------------------------------------------

    def _fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def _create(self, sid: str, *, parent: str | None, config: dict[str, Any]) -> None:
        self.store.create_session(sid, now=self.now, parent=parent, model_config=config)
        self.sessions[sid] = ModelSession(parent=parent, config=config)

    @staticmethod
    def _mostly(data: st.DataObject, preferred: list[str], fallback: list[str]) -> list[str]:
        """Three draws in four take the preferred pool (if any), so random runs still reach deep states."""
        return preferred if preferred and data.draw(st.integers(0, 3), label="prefer") < 3 else fallback

    def _pick(self, data: st.DataObject, preferred: list[str]) -> str:
        """Mostly a preferred session (e.g. one the holder leases, so its commit can land), else any."""
        return data.draw(st.sampled_from(sorted(self._mostly(data, preferred, list(self.sessions)))), label="session")

    def _pick_holder(self, data: st.DataObject) -> str:
        """Mostly a current holder that owns some lease row, else any current holder."""
        owners = [h for h in self.holders if self._leased_by(h)]
        return data.draw(st.sampled_from(self._mostly(data, owners, self.holders)), label="holder")

    def _live(self) -> list[str]:
        return [sid for sid, s in self.sessions.items() if s.live]

    def _leased_by(self, holder: str) -> list[str]:
        """Sessions whose lease row names `holder` and that are not rotated yet: where its work lies."""
        return [
            sid for sid, lease in self.leases.items()
            if lease.holder == holder and self.sessions[sid].end_reason != COMPRESSION_END
        ]

    def _payload(self, prefix: str, *, is_summary: bool = False) -> Payload:
        content = self._fresh(prefix)
        role = "assistant" if self.serial % 2 else "user"
        pmid = f"pm-{content}" if self.serial % 3 == 0 else None
        return (role, content, self.now, pmid, is_summary)

    def _take_ids(self, ids: list[int], expected_count: int) -> list[int]:
        """New rows get fresh, strictly increasing ids above every id seen so far."""
        assert len(ids) == expected_count
        assert ids == sorted(set(ids)) and (not ids or ids[0] > self.last_id)
        self.last_id = ids[-1] if ids else self.last_id
        return ids

    def _max_active(self, sid: str) -> int:
        return max((row_id for row_id, _ in self.sessions[sid].active), default=0)

    def _holds_live_lease(self, sid: str, holder: str) -> bool:
        lease = self.leases.get(sid)
        return lease is not None and lease.holder == holder and lease.expires_at > self.now

    def _continuations(self, sid: str) -> list[str]:
        return sorted(
            cid for cid, s in self.sessions.items()
            if s.parent == sid and not names_parent_as_fork(s.config, sid)
        )

    def _active_contents(self) -> set[str]:
        return {payload[1] for s in self.sessions.values() for _, payload in s.active}

    def _commit(self, apply: Callable[[], None]) -> None:
        """Apply a successful compaction to the model; whatever it took out of the live set was summarized."""
        before = self._active_contents()
        apply()
        self.summarized |= before - self._active_contents()

    def _append(self, sid: str, count: int) -> None:
        payloads = [self._payload("m") for _ in range(count)]
        model = self.sessions[sid]
        if model.end_reason == COMPRESSION_END:
            with pytest.raises(SessionClosedByCompression):
                self.store.append_messages(sid, [as_dict(p) for p in payloads], now=self.now)
            return
        ids = self._take_ids(self.store.append_messages(sid, [as_dict(p) for p in payloads], now=self.now), count)
        model.active += list(zip(ids, payloads))
        self.written.update(p[1] for p in payloads)

    def _assert_retired(self, sid: str, retired: list[Row], *, superseded: list[Row]) -> None:
        """After a commit the old active rows are inactive; only those living on as copies are not `compacted`."""
        rows = {m.id: m for m in self.store.all_messages(sid)}
        kept = {row_id for row_id, _ in superseded}
        for row_id, _ in retired:
            assert not rows[row_id].active
            assert rows[row_id].compacted == (row_id not in kept), row_id

    def _model_tip(self, sid: str) -> str | None:
        seen: set[str] = set()
        while self.sessions[sid].end_reason == COMPRESSION_END and sid not in seen:
            seen.add(sid)
            continuations = self._continuations(sid)
            if not continuations:
                return None
            sid = continuations[0]
        end = self.sessions[sid]
        return sid if end.live or end.end_reason in AUTOMATIC_END_REASONS else None  # a shutdown stamp is adoptable

    # -- operations (each checks the store's answer against the model's prediction) --------------

    def _acquire(self, sid: str, me: str, *, capture_ok: bool) -> bool:
        current = self.leases.get(sid)
        if current is not None and current.holder == me:
            expected: ModelLease | None = ModelLease(me, current.acquired_at, self.now + TTL)
        elif current is None or current.expires_at <= self.now or current.holder in self.dead:
            expected = ModelLease(me, self.now, self.now + TTL)
        else:
            expected = None
        got = self.store.try_acquire_lease(sid, me, now=self.now, ttl_s=TTL, holder_is_dead=self.dead.__contains__)
        assert got == (expected is not None)
        if expected is not None:
            self.leases[sid] = expected
            watermark = self.store.active_watermark(sid)
            assert watermark == self._max_active(sid)
            self.watermarks[(sid, me)] = watermark if capture_ok else None
        return got

    def _archive(self, sid: str, me: str, tail_count: int) -> None:
        model = self.sessions[sid]
        watermark = self.watermarks.get((sid, me), self._max_active(sid))
        snapshot = [r for r in model.active if watermark is None or r[0] <= watermark]
        rewind = snapshot[-tail_count:] if tail_count else []
        tail = [r for r in model.active if watermark is not None and r[0] > watermark]
        compacted = [self._payload("S", is_summary=True)] + [p for _, p in rewind]
        call = partial(
            self.store.archive_and_compact, sid, [as_dict(p) for p in compacted], holder=me, watermark=watermark,
            now=self.now, tail_count=tail_count,
        )
        if model.end_reason == COMPRESSION_END:
            with pytest.raises(SessionClosedByCompression):
                call()
            return
        if not self._holds_live_lease(sid, me):
            with pytest.raises(LeaseLostError):
                call()
            return
        ids = self._take_ids(call(), len(compacted) + len(tail))
        self._assert_retired(sid, model.active, superseded=rewind + tail)

        def apply() -> None:
            model.active = list(zip(ids, compacted + [p for _, p in tail]))
            self.written.add(compacted[0][1])

        self._commit(apply)

    def _publish_error(self, sid: str, me: str, require_refresh: bool) -> type[StoreError] | None:
        """What the rotation commit must refuse with, checked in the store's order."""
        current = self.leases.get(sid)
        end_reason = self.sessions[sid].end_reason
        if current is None or current.holder != me:
            return LeaseLostError
        if current.expires_at <= self.now and not require_refresh:  # the in-txn refresh revives an own row
            return LeaseLostError
        if end_reason == COMPRESSION_END:
            return ParentChangedError
        if end_reason is not None and end_reason not in AUTOMATIC_END_REASONS:
            return ParentEndedError
        return None

    def _publish(self, sid: str, me: str, tail_count: int, own: int, require_refresh: bool) -> None:
        model = self.sessions[sid]
        ceiling = self.store.active_watermark(sid)
        assert ceiling == self._max_active(sid)
        flushed_from = len(model.active)
        if own:
            self._append(sid, own)  # the agent's own pre-publish flush, above the ceiling
        own_rows = model.active[flushed_from:]
        watermark = self.watermarks.get((sid, me), ceiling)
        bound = ceiling if watermark is None else watermark
        snapshot = [r for r in model.active if r[0] <= bound]
        rewind = snapshot[-tail_count:] if tail_count else []
        foreign = [r for r in model.active if watermark is not None and watermark < r[0] <= ceiling]
        handoff = [self._payload("S", is_summary=True)] + [p for _, p in rewind + own_rows]
        child = self._fresh("c")
        call = partial(
            self.store.publish_child, sid, child, [as_dict(p) for p in handoff], holder=me, watermark=watermark,
            ceiling=ceiling, now=self.now, ttl_s=TTL, require_refresh=require_refresh, own_rows=[i for i, _ in own_rows],
        )
        expected_error = self._publish_error(sid, me, require_refresh)
        if expected_error is not None:
            with pytest.raises(expected_error):
                call()
            return
        ids = self._take_ids(call(), len(handoff) + len(foreign))
        self._assert_retired(sid, model.active, superseded=foreign)

        def apply() -> None:
            self.sessions[child] = ModelSession(
                parent=sid, config=dict(model.config), active=list(zip(ids, handoff + [p for _, p in foreign]))
            )
            model.active = []
            model.end_reason = COMPRESSION_END
            self.written.add(handoff[0][1])
            if require_refresh:
                self.leases[sid] = replace(self.leases[sid], expires_at=self.now + TTL)

        self._commit(apply)

    def _end(self, sid: str, reason: str) -> None:
        model = self.sessions[sid]
        assert self.store.end_session(sid, now=self.now, reason=reason) == model.live
        if model.live:
            model.end_reason = reason

    # -- rules -----------------------------------------------------------------------------------

    @rule(dt=st.sampled_from([1.0, 10.0, 30.0, 60.0]))
    def advance(self, dt: float) -> None:
        self.now += dt

    @rule(slot=SLOTS)
    def kill(self, slot: int) -> None:
        """The holder's process dies; its successor in the slot is a new holder."""
        old = self.holders[slot]
        self.dead.add(old)
        self.holders[slot] = f"h{slot}.{int(old.split('.')[1]) + 1}"

    @rule(data=st.data(), slot=SLOTS, capture_ok=CAPTURE_OK)
    def acquire(self, data: st.DataObject, slot: int, capture_ok: bool) -> None:
        self._acquire(self._pick(data, self._live()), self.holders[slot], capture_ok=capture_ok)

    @rule(data=st.data())
    def refresh(self, data: st.DataObject) -> None:
        me = self._pick_holder(data)
        sid = self._pick(data, self._leased_by(me))
        current = self.leases.get(sid)
        owned = current is not None and current.holder == me
        assert self.store.refresh_lease(sid, me, now=self.now, ttl_s=TTL) == owned
        if owned:
            self.leases[sid] = replace(current, expires_at=self.now + TTL)

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        me = self._pick_holder(data)
        sid = self._pick(data, self._leased_by(me))
        current = self.leases.get(sid)
        owned = current is not None and current.holder == me
        assert self.store.release_lease(sid, me) == owned
        if owned:
            del self.leases[sid]

    @rule(data=st.data(), count=st.integers(1, 3))
    def append(self, data: st.DataObject, count: int) -> None:
        self._append(self._pick(data, self._live()), count)

    @rule(data=st.data(), tail_count=st.integers(0, 2))
    def archive(self, data: st.DataObject, tail_count: int) -> None:
        me = self._pick_holder(data)
        self._archive(self._pick(data, self._leased_by(me)), me, tail_count)

    @rule(data=st.data(), tail_count=st.integers(0, 2), own=st.integers(0, 2), require_refresh=st.booleans())
    def publish(self, data: st.DataObject, tail_count: int, own: int, require_refresh: bool) -> None:
        me = self._pick_holder(data)
        self._publish(self._pick(data, self._leased_by(me)), me, tail_count, own, require_refresh)

    @rule(data=st.data(), slot=SLOTS, turn=st.integers(1, 3), tail_count=st.integers(1, 2))
    def compaction_overlaps_a_turn(self, data: st.DataObject, slot: int, turn: int, tail_count: int) -> None:
        """R14 in one step: acquire and mark, the turn appends while the summary runs, then commit in place."""
        sid, me = self._pick(data, self._live()), self.holders[slot]
        if self._acquire(sid, me, capture_ok=True):
            self._append(sid, turn)
            self._archive(sid, me, tail_count)

    @rule(data=st.data(), slot=SLOTS, turn=st.integers(1, 3), own=st.integers(0, 2))
    def rotation_overlaps_a_turn(self, data: st.DataObject, slot: int, turn: int, own: int) -> None:
        """R14 for rotation: a foreign turn lands between the watermark and the ceiling, then publish."""
        sid, me = self._pick(data, self._live()), self.holders[slot]
        if self._acquire(sid, me, capture_ok=True):
            self._append(sid, turn)
            self._publish(sid, me, 1, own, True)

    @rule(data=st.data(), reason=END_REASONS)
    def end_session(self, data: st.DataObject, reason: str) -> None:
        self._end(self._pick(data, self._live()), reason)

    @rule(data=st.data(), reason=st.sampled_from(sorted(AUTOMATIC_END_REASONS)))
    def frontend_ends_compacting_session(self, data: st.DataObject, reason: str) -> None:
        """R11: a shutdown stamps an automatic end on a session while a compaction holds its lease."""
        self._end(self._pick(data, [sid for sid in self._live() if sid in self.leases]), reason)

    @rule(data=st.data())
    def reopen(self, data: st.DataObject) -> None:
        sid = self._pick(data, [s for s, m in self.sessions.items() if m.end_reason == COMPRESSION_END])
        model = self.sessions[sid]
        lease = self.leases.get(sid)
        expected = (
            model.end_reason == COMPRESSION_END
            and not self._continuations(sid)
            and (lease is None or lease.expires_at <= self.now)
        )
        assert self.store.reopen_orphaned(sid, now=self.now) == expected
        if expected:
            model.end_reason = None
            self.leases.pop(sid, None)

    @precondition(lambda self: len(self.sessions) < MAX_SESSIONS)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        """A branch child: its marker names its direct parent, so it starts a lineage of its own."""
        parent = self._pick(data, self._live())
        self._create(self._fresh("f"), parent=parent,
                     config={**self.sessions[parent].config, "_branched_from": parent})

    # -- invariants ------------------------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        snap = self.store.snapshot()
        rows = {r["id"]: r for r in snap["sessions"]}
        assert set(rows) == set(self.sessions)
        active: dict[str, list[Row]] = {}
        for m in snap["messages"]:
            if m["active"]:
                active.setdefault(m["session_id"], []).append((m["id"], row_payload(m)))
        for sid, model in self.sessions.items():
            row = rows[sid]
            assert (row["parent_id"], row["end_reason"], row["ended_at"] is None) == (
                model.parent, model.end_reason, model.live)
            assert row["model_config"] == model.config
            assert active.get(sid, []) == model.active
            assert row["message_count"] == len(model.active)
        leases = {r["session_id"]: ModelLease(r["holder"], r["acquired_at"], r["expires_at"]) for r in snap["leases"]}
        assert leases == self.leases

    @invariant()
    def only_the_models_holder_is_unexpired(self) -> None:
        for sid in self.sessions:
            lease = self.leases.get(sid)
            expected = lease.holder if lease is not None and lease.expires_at > self.now else None
            assert self.store.lease_holder(sid, now=self.now) == expected

    @invariant()
    def each_message_active_once_unless_summarized(self) -> None:
        counts = Counter(m["content"] for m in self.store.snapshot()["messages"] if m["active"])
        assert set(counts) <= self.written
        for content in self.written:
            assert counts[content] == (0 if content in self.summarized else 1), content

    @invariant()
    def at_most_one_live_head_per_lineage(self) -> None:
        rows = {r["id"]: r for r in self.store.snapshot()["sessions"]}

        def lineage_root(sid: str) -> str:
            while rows[sid]["parent_id"] is not None and not names_parent_as_fork(
                rows[sid]["model_config"], rows[sid]["parent_id"]
            ):
                sid = rows[sid]["parent_id"]
            return sid

        heads = Counter(lineage_root(sid) for sid, row in rows.items() if row["ended_at"] is None)
        assert all(count <= 1 for count in heads.values()), heads

    @invariant()
    def rotated_sessions_continue_at_most_once(self) -> None:
        for sid, model in self.sessions.items():
            if model.end_reason == COMPRESSION_END:
                assert len(self.store.continuation_children(sid)) <= 1

    @invariant()
    def tip_follows_the_chain(self) -> None:
        for sid in self.sessions:
            assert self.store.compression_tip(sid) == self._model_tip(sid)


StoreMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreMachine = StoreMachine.TestCase
