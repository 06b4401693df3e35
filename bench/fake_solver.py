"""A stand-in solver for the live-latency benchmark: prints OpenFOAM-style time steps at a
steady pace and records, for each step, the wall time its residual line was written."""

import sys
import time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
period = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05
with open("stamps.txt", "w") as stamps:
    for k in range(1, steps + 1):
        print(f"Time = {k}\n")
        print(
            f"smoothSolver:  Solving for Ux, Initial residual = {1.0 / k:.6g}, Final residual = {0.1 / k:.6g}, No Iterations 1"
        )
        sys.stdout.flush()
        stamps.write(f"{k} {time.time()!r}\n")
        stamps.flush()
        print(f"ExecutionTime = {k * period:.2f} s  ClockTime = {k * period:.0f} s\n", flush=True)
        time.sleep(period)
print("End", flush=True)
