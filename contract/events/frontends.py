"""Frontends (`frontends.py`).

What the user did, and what the terminal or the gateway showed. A title (a /title, or the auto-titler) is set
by the scenario harness's `title` drive through the store (`store/titles.py`).
"""

from __future__ import annotations

from contract.events.base import Event, event, trace
from contract.ids import SessionId


@event
class FrontendTurnSubmitted(Event):
    """The terminal took a user turn and started it."""

    kind = "frontend.turn_submitted"
    feeds = ("R1", "R10")
    agent: str
    text: str


@event
class FrontendTurnAbandoned(Event):
    """The terminal gave up on a turn that Ctrl+C cancelled (the prompt returns)."""

    kind = "frontend.turn_abandoned"
    feeds = ("R1",)
    agent: str
    text: str


@event
class FrontendTurnFailed(Event):
    """A turn raised, and the terminal showed its error."""

    kind = "frontend.turn_failed"
    feeds = ("R1", "R5", "R15")
    agent: str
    error: str = trace(note="`<exception type>: <message>`")


@event
class FrontendCtrlC(Event):
    """The user pressed Ctrl+C in the terminal."""

    kind = "frontend.ctrl_c"
    feeds = ("R1",)
    agent: str
    turn_running: bool


@event
class FrontendCtrlCGraceExpired(Event):
    """The grace period after Ctrl+C is over: the terminal accepts the next turn."""

    kind = "frontend.ctrl_c_grace_expired"
    feeds = ("R1",)
    agent: str
    turn_abandoned: bool = trace(note="the old turn was still running and was cancelled")


@event
class GatewayTurnStarted(Event):
    """A gateway agent took the next delivered message as a turn."""

    kind = "gateway.turn_started"
    agent: str
    platform_message_id: str | None


@event
class GatewayDelivered(Event):
    """A platform message was delivered to a gateway agent's queue."""

    kind = "gateway.delivered"
    agent: str
    platform_message_id: str | None


@event
class SessionTitled(Event):
    """A title was set on a session (a /title, or the auto-titler)."""

    kind = "session.titled"
    feeds = ("R17",)
    session: SessionId
    title: str
    source: str = trace(note="`derived`, `llm` or `user`")
    stored: str | None = trace(note="the title stored (numbered if taken); null: an automatic title ranked too low")


@event
class FrontendTitleFailed(Event):
    """A user's title was refused: another conversation shows it."""

    kind = "frontend.title_failed"
    feeds = ("R17",)
    session: SessionId
    title: str
    error: str = trace(note="the refusal's message")


@event
class SessionTitleIndeterminate(Event):
    """A title's store write raised: it may have committed before the error (a disk error on the way back)."""

    kind = "session.title_indeterminate"
    feeds = ("R17",)
    session: SessionId
    title: str
    source: str = trace(note="`derived`, `llm` or `user`")
