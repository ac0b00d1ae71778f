"""Each release's resolved dependency set, pinned in a file so every machine installs the same bytes' versions.

A hermes-agent release pins most of its dependencies exactly (`openai==2.24.0`), but not all (`fastapi<1`,
and everything they pull in), so what `pip install hermes-agent==X` resolves drifts with the registry. The
lock (`locks/hermes-agent-X.txt`) is that resolution taken once (`python -m targets.hermes lock X`): the
release's own `==` pins verbatim, the free ones as the registry resolved them on the day the lock was made.
Installs use the lock with `--no-deps`, so a release gets exactly its lock and nothing else.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

LOCKS_DIR = Path(__file__).resolve().parent / "locks"
DISTRIBUTION = "hermes-agent"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)$")


class LockError(Exception):
    """A lock file that is missing or malformed: names the file, the line and what was expected."""


@dataclass(frozen=True, order=True)
class Pin:
    """One distribution at one version; `key` is its folder name in the shared store."""

    name: str
    version: str

    @property
    def key(self) -> str:
        return f"{canonical(self.name)}-{self.version}"

    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def canonical(name: str) -> str:
    """PEP 503 normalisation: `Ruamel.YAML` and `ruamel_yaml` name one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_path(version: str) -> Path:
    return LOCKS_DIR / f"{DISTRIBUTION}-{version}.txt"


def locked_versions() -> tuple[str, ...]:
    """The releases that have a lock, oldest first."""
    prefix = f"{DISTRIBUTION}-"
    versions = [p.stem[len(prefix) :] for p in LOCKS_DIR.glob(f"{prefix}*.txt")]
    return tuple(sorted(versions, key=lambda v: tuple(int(part) for part in v.split("."))))


def read_lock(version: str) -> tuple[Pin, ...]:
    """The pins of a release, hermes-agent itself first (its folder leads sys.path)."""
    path = lock_path(version)
    if not path.is_file():
        known = ", ".join(locked_versions()) or "none"
        raise LockError(f"{path}: no lock for {DISTRIBUTION}=={version} (locked releases: {known}); "
                        f"make one with `python -m targets.hermes lock {version}`")
    pins = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = _PIN.match(text)
        if match is None:
            raise LockError(f"{path}:{number}: expected `name==version`, got {text!r}")
        pins.append(Pin(match["name"], match["version"]))
    own = [pin for pin in pins if canonical(pin.name) == DISTRIBUTION]
    if [pin.version for pin in own] != [version]:
        raise LockError(f"{path}: expected exactly one `{DISTRIBUTION}=={version}` line, got {own}")
    return (own[0], *sorted(pin for pin in pins if pin is not own[0]))


def resolve(version: str) -> tuple[Pin, ...]:
    """Ask pip what `hermes-agent==version` resolves to today, for this interpreter and platform."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                   "--report", str(report), f"{DISTRIBUTION}=={version}"]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        installs = json.loads(report.read_text())["install"]
    return tuple(sorted(Pin(item["metadata"]["name"], item["metadata"]["version"]) for item in installs))


def write_lock(version: str, pins: tuple[Pin, ...]) -> Path:
    """Write the lock file; the header says where the pins came from."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    header = (f"# {DISTRIBUTION}=={version} and its dependencies as pip resolved them for Python {python}"
              f" on {sys.platform};\n# remake with `python -m targets.hermes lock {version}`.\n")
    path = lock_path(version)
    path.write_text(header + "".join(f"{pin.requirement()}\n" for pin in pins))
    return path
