"""`make lint`: no module over 600 lines. A module that long holds more than one idea: split it
by idea (docs/development/README.md). Generated code and migrations are exempt.

Checks the Python and TypeScript files git tracks (and new ones it does not ignore); prints
one line per file over the limit and exits 1 when there is any.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 600
SUFFIXES = (".py", ".ts", ".tsx")
EXEMPT = ("frontend/src/generated/", "/migrations/")


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        line
        for line in out.splitlines()
        if line.endswith(SUFFIXES) and not any(part in f"/{line}" for part in EXEMPT)
    ]


def main() -> int:
    over = []
    for rel in tracked_files():
        path = ROOT / rel
        if not path.is_file():
            continue
        with path.open("rb") as fh:
            lines = sum(1 for _ in fh)
        if lines > LIMIT:
            over.append((lines, rel))
    for lines, rel in sorted(over, reverse=True):
        print(f"{rel}: {lines} lines; at most {LIMIT}: split it by idea")
    print(f"check-sizes: {len(over)} module(s) over {LIMIT} lines" if over else "check-sizes: ok")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
