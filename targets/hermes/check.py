"""`python -m targets.hermes check VERSION`: load a release, stub its probes, build an AIAgent and run one
offline compaction, and say how long each took and whether anything still reached for the network or a
subprocess (exit 1 if so: a probe this package does not know about)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from targets.hermes import probes
from targets.hermes.baseline import history, make_agent
from targets.hermes.loader import LoadedRelease
from targets.hermes.provider import reply, script_summary


@dataclass
class CheckReport:
    version: str
    stubbed: list[str]
    agent_s: float = 0.0
    compaction_s: float = 0.0
    context_length: int = 0
    threshold_tokens: int = 0
    messages_before: int = 0
    messages_after: int = 0
    escaped: list[tuple[str, str, str]] = field(default_factory=list)


def run_check(loaded: LoadedRelease, stub: bool = True) -> CheckReport:
    """AIAgent() and one forced compaction of a 40-message conversation, timed, under a ProbeWatch."""
    import hermes_state

    report = CheckReport(loaded.version, probes.stub_probes() if stub else [])
    script_summary(lambda **kwargs: reply("SUMMARY"))
    with probes.ProbeWatch(loaded.release.paths[0]) as watch:
        db = hermes_state.SessionDB(db_path=loaded.home / "check.db")
        started = time.perf_counter()
        agent: Any = make_agent(db, in_place=None, threshold_tokens=None)
        report.agent_s = time.perf_counter() - started
        report.context_length = agent.context_compressor.context_length
        earlier = history()
        agent._persist_session(earlier, [])
        started = time.perf_counter()
        compacted, _ = agent._compress_context(earlier, "system prompt", force=True)
        report.compaction_s = time.perf_counter() - started
    report.threshold_tokens = agent.context_compressor.threshold_tokens
    report.messages_before, report.messages_after = len(earlier), len(compacted)
    report.escaped = watch.seen
    return report
