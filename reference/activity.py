"""The agent's activity label and the compression heartbeat that keeps it fresh (§2 step 10d, R26).

A long summary would look like a hung agent, so the attempt's heartbeat labels the agent "compression
started", then "in progress" every interval, then "completed". When the host gives up on the attempt it
labels the agent "timed out", a terminal state; the abandoned worker runs on, and its heartbeat must not
relabel the agent "in progress" behind the host's back.
"""

from __future__ import annotations

from contract.events import ActivityLabeled
from contract.ids import AttemptId, SessionId
from contract.runtime import CancelScopeLike, Runtime
from reference.fence import CommitFence

STARTED = "started"
IN_PROGRESS = "in_progress"
COMPLETED = "completed"
TIMED_OUT = "timed_out"


def write_label(rt: Runtime, session: SessionId, attempt: AttemptId, label: str, *, terminal: bool = False) -> None:
    """Show `label` on the agent's status line (the `activity.labeled` event is what the user sees)."""
    rt.emit(ActivityLabeled(session=session, attempt=attempt, label=label, terminal=terminal))


class Heartbeat:
    """An attempt's heartbeat: a child task of the attempt, stopped (with its final label) as the attempt ends."""

    def __init__(self, rt: Runtime, fence: CommitFence, session: SessionId, *, interval_s: float) -> None:
        self._rt = rt
        self._fence = fence
        self._session = session
        self._interval_s = interval_s
        self._scope: CancelScopeLike | None = None
        self._stopped = False

    def start(self) -> None:
        """A new episode: labelled whatever the label said before (a timeout of an earlier attempt included)."""
        self._touch(STARTED)

    async def run(self) -> None:
        """Label "in progress" every interval until stopped; registers its scope in the step it checks `stopped`."""
        with self._rt.cancel_scope() as scope:
            if self._stopped:
                return
            self._scope = scope
            while True:
                await self._rt.sleep(self._interval_s)
                # FIX heartbeat-is-no-progress (R9): a tick only relabels the status line; counted as progress it keeps a silent summary from ever timing out as idle
                self._touch(IN_PROGRESS)

    def stop(self) -> None:
        """End the ticks and label the attempt completed (silent, like every touch, once it was stopped)."""
        self._stopped = True
        if self._scope is not None:
            self._scope.cancel()
        self._touch(COMPLETED)

    def _touch(self, label: str) -> None:
        # FIX heartbeat-silent-after-give-up (R26): the host gave up and labelled the attempt timed out; a late tick would show it running again
        if self._fence.is_cancelled:
            return
        write_label(self._rt, self._session, self._fence.attempt, label)
