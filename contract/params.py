"""The parameters a fault kind takes, as a scenario file writes them: declared here, validated by the harness.

A fault kind lists its parameters (`params = {"duration": duration("How long the point blocks.")}`); the
scenario loader turns each declaration into the check it runs and the line of the key reference it renders,
so a fault kind says what it accepts without depending on how the harness validates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class _Required:
    """The default of a parameter (or a scenario key) that must be written."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class ParamType(StrEnum):
    TEXT = "text"
    INTEGER = "integer"
    DURATION = "duration"  # "250ms", "1.5s", "10m", "2h" or a number of seconds; float seconds once loaded
    CHOICE = "choice"  # one of `values`
    REFERENCE = "reference"  # a name the scenario declares in `namespace` (a session, an agent, a process)


@dataclass(frozen=True)
class Param:
    description: str
    type: ParamType
    default: Any = REQUIRED
    example: str | None = None
    minimum: int | None = None
    values: tuple[str, ...] = ()
    namespace: str = ""


def text(description: str, *, default: Any = REQUIRED, example: str | None = None) -> Param:
    return Param(description, ParamType.TEXT, default, example)


def integer(description: str, *, minimum: int | None = None, default: Any = REQUIRED, example: str | None = None) -> Param:
    return Param(description, ParamType.INTEGER, default, example, minimum=minimum)


def duration(description: str, *, default: Any = REQUIRED, example: str | None = None) -> Param:
    return Param(description, ParamType.DURATION, default, example)


def choice(description: str, *, values: tuple[str, ...], default: Any = REQUIRED, example: str | None = None) -> Param:
    return Param(description, ParamType.CHOICE, default, example, values=values)


def reference(description: str, *, namespace: str, default: Any = REQUIRED, example: str | None = None) -> Param:
    return Param(description, ParamType.REFERENCE, default, example, namespace=namespace)
