"""Where each seam of the compaction path is in each release, counted from the installed wheel.

`python -m targets.hermes seams` prints the table in SEAMS.md from the releases in the store, so the
document's file:line figures can be re-derived (and re-checked by a test) instead of trusted. A seam is a
file and a pattern; `after` narrows it to the first match after an anchor line (the `time.time()` inside
one function), and a cell shows the enclosing function when the pattern matches a call rather than a `def`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CC, CONV, STATE, RUN, CLI, GATEWAY = ("agent/context_compressor.py", "agent/conversation_compression.py",
                                      "hermes_state.py", "run_agent.py", "cli.py", "gateway/run.py")


@dataclass(frozen=True)
class Seam:
    label: str
    file: str
    pattern: str
    after: str | None = None


SEAMS = (
    # the summary
    Seam("`call_llm` imported by name (the summary seam)", CC, r"^\s+call_llm,\s*$|^from agent\.auxiliary_client import .*\bcall_llm\b"),
    Seam("`ContextCompressor._generate_summary`", CC, r"^\s+def _generate_summary\("),
    Seam("summary call `call_llm(**call_kwargs)`", CC, r"response = call_llm\(\*\*call_kwargs\)"),
    Seam("`with aux_interrupt_protection()` around it", CC, r"with aux_interrupt_protection\(\)"),
    Seam("`ContextCompressor.compress`", CC, r"^    def compress\("),
    Seam("`time.monotonic()` first use in the compressor", CC, r"time\.monotonic\(\)"),
    # the attempt
    Seam("`AIAgent._compress_context`", RUN, r"^    def _compress_context\("),
    Seam("`compress_context` (the attempt)", CONV, r"^def compress_context\("),
    Seam("feasibility check, lazily in the attempt", CONV, r"^\s+check_compression_model_feasibility\(agent\)"),
    Seam("in-place commit `archive_and_compact(...)`", CONV, r"_session_db\.archive_and_compact\("),
    Seam("rotation: `end_session(..., \"compression\")`", CONV, r"_session_db\.end_session\(agent\.session_id, \"compression\"\)"),
    Seam("rotation: child id `datetime.now()` + `uuid4`", CONV, r"agent\.session_id = f\"\{datetime\.now\(\)"),
    Seam("rotation: child rows by `replace_messages` (else the next flush)", CONV, r"_session_db\.replace_messages\(agent\.session_id"),
    Seam("`AIAgent._persist_session`", RUN, r"^    def _persist_session\("),
    Seam("`AIAgent._flush_messages_to_session_db`", RUN, r"^    def _flush_messages_to_session_db\("),
    # the lease
    Seam("holder id `pid:tid:agent:nonce` (`uuid4`)", CONV, r"^def _compression_lock_holder\("),
    Seam("TTL default 300 s in the acquire", STATE, r"ttl_seconds: float = 300", after=r"^    def try_acquire_compression_lock\("),
    Seam("TTL override `agent._compression_lock_ttl_seconds`", CONV, r"_compression_lock_ttl_seconds\"?, 300"),
    Seam("acquire call in the attempt", CONV, r"_try_acquire_lock\(\s*$|_try_acquire_lock\(_lock_sid|try_acquire_compression_lock\("),
    Seam("`_release_lock()` (finally of the attempt)", CONV, r"^\s+def _release_lock\("),
    Seam("`SessionDB.try_acquire_compression_lock`", STATE, r"^    def try_acquire_compression_lock\("),
    Seam("its `time.time()`", STATE, r"time\.time\(\)", after=r"^    def try_acquire_compression_lock\("),
    Seam("`SessionDB.refresh_compression_lock`", STATE, r"^    def refresh_compression_lock\("),
    Seam("`SessionDB.release_compression_lock`", STATE, r"^    def release_compression_lock\("),
    Seam("`SessionDB.get_compression_lock_holder`", STATE, r"^    def get_compression_lock_holder\("),
    Seam("refresher class", CONV, r"^class _CompressionLockLeaseRefresher"),
    Seam("refresher thread `compression-lock-refresh`", CONV, r"name=\"compression-lock-refresh\""),
    Seam("refresh interval `max(1, min(60, ttl/2))`", CONV, r"max\(1\.0, min\(60\.0"),
    Seam("refresher paced by `Event.wait`", CONV, r"while not self\._stop\.wait\("),
    Seam("refresher stop `join(timeout=1.0)`", CONV, r"self\._thread\.join\(timeout=1\.0\)"),
    Seam("refresher started in the attempt", CONV, r"_lock_refresher = _CompressionLockLeaseRefresher\("),
    # the store
    Seam("`SessionDB._execute_write`", STATE, r"^    def _execute_write\("),
    Seam("`BEGIN IMMEDIATE`", STATE, r"\"BEGIN IMMEDIATE\"", after=r"^    def _execute_write\("),
    Seam("retry jitter `random.uniform`", STATE, r"random\.uniform\(", after=r"^    def _execute_write\("),
    Seam("retry `time.sleep`", STATE, r"time\.sleep\(", after=r"^    def _execute_write\("),
    Seam("`_WRITE_MAX_RETRIES` (15)", STATE, r"^\s+_WRITE_MAX_RETRIES = "),
    Seam("connection `sqlite3.connect(` (timeout, WAL)", STATE, r"self\._conn = sqlite3\.connect\(", after=r"^class SessionDB"),
    Seam("`SessionDB.append_message`", STATE, r"^    def append_message\("),
    Seam("`SessionDB.archive_and_compact`", STATE, r"^    def archive_and_compact\("),
    Seam("`SessionDB.end_session`", STATE, r"^    def end_session\("),
    Seam("`SessionDB.create_session`", STATE, r"^    def create_session\("),
    Seam("`SessionDB.replace_messages`", STATE, r"^    def replace_messages\("),
    # interrupts and frontends
    Seam("`AIAgent.interrupt`", RUN, r"^    def interrupt\("),
    Seam("`AIAgent.clear_interrupt`", RUN, r"^    def clear_interrupt\("),
    Seam("`tools/interrupt.set_interrupt` (per-thread bit)", "tools/interrupt.py", r"^def set_interrupt\("),
    Seam("CLI: turn on a daemon thread", CLI, r"agent_thread = threading\.Thread\(target=run_agent, daemon=True\)"),
    Seam("CLI: typed message `agent.interrupt(msg)`", CLI, r"self\.agent\.interrupt\(interrupt_msg\)"),
    Seam("CLI: 10 s grace, 50 joins of 0.2 s", CLI, r"for _wait_tick in range\(50\)"),
    Seam("CLI: Ctrl+C key handler", CLI, r"@kb\.add\('c-c'\)"),
    Seam("CLI: Ctrl+C `agent.interrupt()`", CLI, r"self\.agent\.interrupt\(\)$"),
    Seam("gateway: message for a running agent interrupts it", GATEWAY, r"running_agent\.interrupt\("),
)


def locate(release_root: Path, seam: Seam) -> str:
    """`file:line` (with the enclosing function for a call), or `-` where the release has no such line."""
    path = release_root / seam.file
    if not path.is_file():
        return "-"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = 0
    if seam.after is not None:
        anchor = next((i for i, line in enumerate(lines) if re.search(seam.after, line)), None)
        if anchor is None:
            return "-"
        start = anchor + 1
    pattern = re.compile(seam.pattern)
    hit = next((i for i in range(start, len(lines)) if pattern.search(lines[i])), None)
    if hit is None:
        return "-"
    where = f"{seam.file}:{hit + 1}"
    if re.match(r"\s*(def|class) ", lines[hit]):
        return where
    enclosing = _enclosing(lines, hit)
    return f"{where} ({enclosing})" if enclosing else where


def _enclosing(lines: list[str], index: int) -> str | None:
    """The innermost `def`/`class` whose body holds line `index`: walking up, one indented less than every
    line between it and `index` (a nested function that ended before `index` does not count)."""
    floor = len(lines[index]) - len(lines[index].lstrip())
    for line in reversed(lines[:index]):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = re.match(r"\s*(?:async )?(?:def|class) (\w+)", line)
        if match and indent < floor:
            return match.group(1)
        floor = min(floor, indent)
    return None


def table(roots: dict[str, Path]) -> str:
    """The markdown table: one row per seam, one column per release."""
    header = "| seam | " + " | ".join(roots) + " |\n|---|" + "---|" * len(roots) + "\n"
    rows = ("| " + seam.label + " | " + " | ".join(locate(root, seam) for root in roots.values()) + " |"
            for seam in SEAMS)
    return header + "\n".join(rows) + "\n"
