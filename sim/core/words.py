"""How the tool counts things in what it prints: `1 mutant`, `2 mutants`."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, the noun in the plural (`plural`, else with an s) unless the count is one."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
