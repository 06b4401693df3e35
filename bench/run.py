"""Run one benchmark (`python -m bench.run overhead`, as scripts/bench does) and fail it when
a figure it printed missed its target by more than that figure's noise margin
(bench/figures.py): after all its BENCH lines, one `GUARD` line per such figure naming its
value, target and margin, and exit status 1. A benchmark that fails on its own keeps its
own status."""

from __future__ import annotations

import runpy
import sys

from bench import common


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.run NAME (a module of bench/)", file=sys.stderr)
        return 2
    runpy.run_module(f"bench.{argv[0]}", run_name="__main__", alter_sys=True)
    for failure in common.GUARD_FAILURES:
        print(f"GUARD {argv[0]}: {failure}", flush=True)
    return 1 if common.GUARD_FAILURES else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
