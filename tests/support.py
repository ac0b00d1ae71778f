"""What the tests share: events of their own for test programs, and helpers the reference tests use."""

from __future__ import annotations

from contract.events.base import Event, event, trace


@event
class ProgramMark(Event):
    """A test program marked a point in its run."""

    kind = "program.mark"
    tag: str


@event
class ProgramDraw(Event):
    """A test program drew a random number."""

    kind = "program.draw"
    value: int


@event
class DemoEvent(Event):
    """A demonstration event for the trace format tests."""

    kind = "demo.event"
    session: str | None = trace(omit_if_none=True)
    count: int | None = trace(omit_if_none=True)
    note: str | None = trace(omit_if_none=True)
