"""slurm_submit_rate: how fast the Slurm driver submits 500 runs — single jobs vs job arrays,
local commands vs SSH to a login node — on the private test cluster (scripts/start-slurm).

Each variant stages 500 run.json files and submits them as the portal does: single jobs
from 8 threads at once (several Celery workers), arrays in batches of 50 (what one dispatch
task hands the driver). Jobs are submitted to begin in an hour (`--begin=now+1hour`, an
allowed extra directive), so nothing runs; all are cancelled at the end. Baseline in the
same run: a bare `sbatch --begin=now+1hour --wrap true` loop.
The SSH variants also record how many connections and concurrent channels the burst used.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import ROOT, emit, progress, sized

RUNS = sized(500, 20)
THREADS = 8
BATCH = sized(50, 10)


def _specs(case: Path, tag: str):
    from orchestration.drivers.base import RunSpec, Step

    return [
        RunSpec(
            run_id=f"00000000-0000-4000-{tag}-{i:012d}",
            attempt=1,
            portal_url="http://127.0.0.1:9",
            token="bench",
            case_dir=str(case),
            work_dir="/nonexistent",
            context={"i": i},
            steps=[Step(name="true", argv=("true",))],
            memory_gb=0.1,
        )
        for i in range(RUNS)
    ]


def _variant(name: str, settings: dict, case: Path, *, array: bool, tag: str) -> dict:
    from orchestration.drivers.base import build_driver

    driver = build_driver("slurm", {**settings, "array": array})
    specs = _specs(case, tag)
    driver.check()  # connect (SSH) and read the config first: not part of the rate
    t0 = time.perf_counter()
    if array:
        handles = []
        for i in range(0, RUNS, BATCH):
            batch = specs[i : i + BATCH]
            for spec in batch:
                driver.prepare(spec)
            handles += driver.start_batch(batch)
    else:

        def one(spec):
            d = build_driver("slurm", {**settings, "array": array})  # a driver per call
            d.prepare(spec)
            return d.start(spec)

        with ThreadPoolExecutor(THREADS) as pool:
            handles = list(pool.map(one, specs))
    seconds = time.perf_counter() - t0
    jobs = sorted({h.split("_")[0] for h in handles})
    result = {
        "variant": name,
        "runs": len(handles),
        "seconds": round(seconds, 3),
        "runs_per_s": round(len(handles) / seconds, 1),
        "sbatch_calls": len(jobs),
    }
    pool = getattr(driver.transport, "pool", None)
    if pool is not None:
        result["ssh_connections_opened"] = pool.connections_opened
        result["ssh_peak_channels"] = pool.peak_sessions
        result["ssh_channels_refused_and_retried"] = pool.channels_refused
    for i in range(0, len(jobs), 200):
        driver.cluster.scancel(jobs[i : i + 200])
    progress(f"{name}: {result}")
    return result


def _bare_loop(conf: str, workdir: Path) -> dict:
    env = {**os.environ, "SLURM_CONF": conf}
    t0 = time.perf_counter()
    jobs = []
    for _ in range(RUNS):
        out = subprocess.run(
            [
                "sbatch",
                "--parsable",
                "--begin=now+1hour",
                "--mem=100M",
                f"--chdir={workdir}",
                "--output=/dev/null",
                "--wrap",
                "true",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        jobs.append(out.stdout.strip())
    seconds = time.perf_counter() - t0
    for i in range(0, len(jobs), 200):
        subprocess.run(["scancel", *jobs[i : i + 200]], env=env, check=False)
    result = {
        "variant": "bare sbatch loop (local)",
        "runs": RUNS,
        "seconds": round(seconds, 3),
        "runs_per_s": round(RUNS / seconds, 1),
        "sbatch_calls": RUNS,
    }
    progress(f"bare: {result}")
    return result


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from orchestration.tests.test_slurm_cluster import started_cluster

    with started_cluster():
        _main()


def _main() -> None:
    from orchestration.tests.test_slurm_cluster import (
        slurm_settings,
        slurm_unavailable,
        ssh_secrets,
        ssh_settings,
        ssh_unavailable,
    )

    if reason := slurm_unavailable():
        raise SystemExit(f"slurm_submit: {reason}")
    with tempfile.TemporaryDirectory(prefix="wt-bench-submit-") as tmp:
        case = Path(tmp) / "case"
        (case / "system").mkdir(parents=True)
        (case / "system" / "controlDict").write_text("application icoFoam;\n")
        os.chmod(tmp, 0o755)
        local = slurm_settings(work_root=f"{tmp}/work", extra_directives=["--begin=now+1hour"])
        results = [_bare_loop(local["slurm_conf"], Path(tmp))]
        results.append(_variant("single jobs, local", local, case, array=False, tag="8001"))
        results.append(_variant("arrays of 50, local", local, case, array=True, tag="8002"))
        if not ssh_unavailable():
            remote = {
                **ssh_settings(
                    work_root="windtunnel-bench", extra_directives=["--begin=now+1hour"]
                ),
                "secrets": ssh_secrets(),
            }
            results.append(_variant("single jobs, SSH", remote, case, array=False, tag="8003"))
            results.append(_variant("arrays of 50, SSH", remote, case, array=True, tag="8004"))
            subprocess.run(["rm", "-rf", "/var/lib/wtslurm/windtunnel-bench"], check=False)
    by = {r["variant"]: r for r in results}
    for r in results:
        print(
            f"  {r['variant']:<28} {r['runs_per_s']:>8.1f} runs/s  ({r['seconds']:.2f} s, "
            f"{r['sbatch_calls']} sbatch)",
            file=sys.stderr,
        )
    headline = by.get("single jobs, SSH") or by["single jobs, local"]
    others = "; ".join(
        f"{r['variant']} {r['runs_per_s']:g}/s" for r in results if r is not headline
    )
    emit(
        "slurm_submit_rate",
        headline["runs_per_s"],
        "runs/s",
        f"{RUNS} runs, {headline['variant']}, {THREADS} threads ({others})",
        samples=results,
    )


if __name__ == "__main__":
    main()
