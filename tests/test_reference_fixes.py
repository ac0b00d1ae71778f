"""The fix registry and the `# FIX` markers in reference/ agree one to one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import reference
from reference.fixes import FIX_BY_NAME, FIXES, MARKER, scan_markers

ROOT = Path(reference.__file__).parent
MARKERS = scan_markers(ROOT)


def test_fix_names_are_unique_kebab_case_and_name_a_race():
    assert len(FIX_BY_NAME) == len(FIXES)
    for fix in FIXES:
        assert MARKER.search(f"# FIX {fix.name} ({fix.race}): why"), fix.name
        assert fix.race.startswith("R") and fix.summary


def test_every_registered_fix_has_exactly_one_marker_in_its_module():
    counts = Counter(marker.name for marker in MARKERS)
    assert {name: counts[name] for name in FIX_BY_NAME if counts[name] != 1} == {}
    for marker in MARKERS:
        fix = FIX_BY_NAME.get(marker.name)
        assert fix is not None, f"unregistered fix marker {marker.name} in {marker.module}:{marker.line}"
        assert (marker.module, marker.race) == (fix.module, fix.race), marker


def test_every_marker_sits_directly_above_code():
    for marker in MARKERS:
        path = ROOT.joinpath(*marker.module.split(".")[1:]).with_suffix(".py")
        following = path.read_text().splitlines()[marker.line].strip()
        assert following and not following.startswith("#"), marker


def test_the_documented_fixes_are_the_registered_ones():
    text = (ROOT / "FIXES.md").read_text()
    documented = {name for name in FIX_BY_NAME if f"`{name}`" in text}
    missing = [fix.name for fix in FIXES if not fix.module.startswith("reference.store") and fix.name not in documented]
    assert missing == []
