"""portal_cdi_8: the capacity degradation index of the portal itself.

ScaleBench's CDI(n) = 100 × (1 − Cp/Cs): the capacity of one unit when n work in parallel
(Cp), against one working alone (Cs). 0 % means the portal serves n as well as one; 50 %
means each of n gets half of what one alone gets.

The workload is the same for every figure: no-op runs on the local backend through the whole
portal (submission, admission, a Celery worker's dispatch, the agent launcher, the agent in
its sandbox, the ingest API, the run's end and the next admission), each run's solver a
stand-in (bench/fake_solver.py) that writes 10 residual steps over SOLVE_S seconds and
computes nothing: the run's node is busy, the portal's cores are not.

- **Agents** (the headline, `portal_cdi_8`): n = 1, 2, 4, 8 agents at once (the tenant's
  quota and the backend hold n runs), each doing RUNS_PER_AGENT runs one after another (weak
  scaling: every agent has the same work). An agent's capacity is its runs per second of
  the study's span (first admission → last end); CDI(n) compares n agents with one. On a
  real deployment each agent has a node of its own; here they share the portal's 2 cores,
  so whatever the agents' own processes cost (fork, sandbox, the stand-in's interpreter)
  counts against the portal too: the figure is pessimistic.
- **Celery workers** and **web processes**: 1, 2, 4 processes serving the same 8 agents. The
  load is fixed by the agents, so a process's capacity is measured in what the machine
  spends: runs per CPU-second of the whole machine; CDI(n) says how much more each run
  costs with n processes than with one (idle polling, connections, caches per process).
  The study's span with n processes against one is printed beside it (does the portal
  serve the agents any slower?).

Where degradation comes from, per configuration and per run: CPU of the web processes, the
Celery workers (with beat), the agents (the launcher's reaped children: agents, sandboxes
and the stand-in solvers), PostgreSQL, Redis and the rest of the machine; time PostgreSQL
sessions spent waiting on locks (heavyweight `Lock` and internal `LWLock`), sampled from
`pg_stat_activity` every SAMPLE_S; Redis commands and their server time (`INFO
commandstats`).

Configurations run in rounds, every configuration once per round (machines here are shared
and noisy: each round sees the same weather on all sides); figures are medians over rounds.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field

import psutil

from bench.common import (
    ROOT,
    SMOKE,
    emit,
    fresh_stack,
    machine_cpu,
    progress,
    setup_django,
    sized,
)
from bench.figures import threshold

AGENTS = (1, 2) if SMOKE else (1, 2, 4, 8)
PROCESSES = (1, 2) if SMOKE else (1, 2, 4)
RUNS_PER_AGENT = sized(5, 1)
SOLVE_S = sized(2.0, 0.5)
STEPS = 10
ROUNDS = sized(int(os.environ.get("WT_BENCH_REPEATS", "3")), 1)
SAMPLE_S = 0.02
TARGET = threshold("portal_cdi_8")  # % at n = 8 agents
PARTS = ("web", "worker", "agents", "postgres", "redis", "other")


@dataclass
class Sample:
    """One study through one configuration."""

    component: str
    n: int
    agents: int
    runs: int
    span_s: float
    run_s: float  # mean running time (the agent's `running` → its end)
    start_s: float  # mean admission → `running` (dispatch, the launcher's fork, the agent's start)
    cpu_ms: dict[str, float]  # per run
    lock_ms: dict[str, float]  # per run: session-time waiting, by wait event type
    redis_calls: float  # per run
    redis_ms: float  # per run (server time)
    steal_s: float

    @property
    def capacity(self) -> float:
        """Runs per second per agent."""
        return self.runs / self.agents / self.span_s

    @property
    def machine_cpu_ms(self) -> float:
        return sum(self.cpu_ms.values())


@dataclass
class Meter:
    """CPU of the portal's processes, of PostgreSQL and Redis, and the machine's."""

    stack: object
    redis: object
    pg: dict[int, float] = field(default_factory=dict)

    @staticmethod
    def _cpu(proc: psutil.Process, *, reaped: bool = False) -> float:
        t = proc.cpu_times()
        return t.user + t.system + ((t.children_user + t.children_system) if reaped else 0.0)

    def _tree(self, proc) -> tuple[float, float]:
        """(the process and its children but launchers, the launchers with their reaped
        agents)."""
        own = agents = 0.0
        try:
            root = psutil.Process(proc.pid)
            own += self._cpu(root)
            for child in root.children(recursive=True):
                try:
                    if "launcher" in " ".join(child.cmdline()):
                        agents += self._cpu(child, reaped=True)
                    else:
                        own += self._cpu(child)
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        return own, agents

    def read(self) -> dict[str, float]:
        stack = self.stack
        web, _ = self._tree(stack.web)
        worker = agents = 0.0
        for proc in [stack.worker, *stack.extra_workers]:
            own, launched = self._tree(proc)
            worker += own
            agents += launched
        pg = 0.0
        for p in psutil.process_iter(["name"]):
            if p.info["name"] == "postgres":
                try:
                    pg += self._cpu(p)
                except psutil.Error:
                    pass
        info = self.redis.info("cpu")
        redis = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        busy, steal = machine_cpu()
        return {
            "web": web,
            "worker": worker,
            "agents": agents,
            "postgres": pg,
            "redis": redis,
            "busy": busy,
            "steal": steal,
        }

    def redis_commands(self) -> tuple[float, float]:
        """(calls, microseconds) over every command since the server started."""
        stats = self.redis.info("commandstats")
        return (
            sum(float(v["calls"]) for v in stats.values()),
            sum(float(v["usec"]) for v in stats.values()),
        )


class LockSampler(threading.Thread):
    """Session-seconds PostgreSQL spent waiting, by wait event type, sampled every SAMPLE_S
    from pg_stat_activity (active sessions of the bench database only, this one excluded)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.waits: dict[str, float] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.halt.is_set():
                for kind, count in conn.execute(
                    "SELECT coalesce(wait_event_type, 'CPU'), count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND state = 'active'"
                    " AND pid <> pg_backend_pid() GROUP BY 1"
                ):
                    self.waits[kind] = self.waits.get(kind, 0.0) + count * SAMPLE_S
                self.halt.wait(SAMPLE_S)


def _dsn() -> str:
    from django.db import connection

    params = connection.get_connection_params()
    return " ".join(
        f"{k}={v}"
        for k, v in params.items()
        if k in ("host", "port", "dbname", "user", "password") and v
    )


def run_study(*, meter: Meter, component: str, n: int, agents: int, label: str) -> Sample:
    """A study of agents × RUNS_PER_AGENT no-op runs, `agents` at a time; its figures."""
    from django.db import transaction

    from catalog.models import Backend
    from quotas.services import tenant_provision
    from studies.choices import TERMINAL_STATES
    from studies.models import Run, Study
    from studies.services import study_create, study_submit

    runs = agents * RUNS_PER_AGENT
    Backend.objects.filter(name="local").update(cores=agents, memory_gb=1024)
    tenant = tenant_provision(
        name="bench-cdi",
        username="bench-cdi",
        quota={"cores": agents, "memory_gb": 1024, "max_runs": agents, "max_queued_runs": 100_000},
    )
    user = tenant.memberships.get().user
    spec = {
        "name": f"cdi {label}",
        "template": "cavity",
        "reuse": False,  # measured runs are computed, never reused
        "parameters": {"lid_velocity": {"linspace": [1, 2, runs]}},
    }
    study = study_create(tenant=tenant, owner=user, spec=spec)
    solver = {
        "name": "noopFoam",
        # the system's python3 and the script's text: the case's sandbox shows the system
        # read-only, not the portal's folders or its virtualenv
        "argv": [
            "python3",
            "-c",
            (ROOT / "bench" / "fake_solver.py").read_text(),
            str(STEPS),
            str(SOLVE_S / STEPS),
        ],
        "role": "solve",
    }
    sampler = LockSampler(_dsn())
    sampler.start()
    before, (calls0, usec0) = meter.read(), meter.redis_commands()
    with transaction.atomic():  # admission runs after the commit: the runs see the stand-in
        study_submit(study=study)
        Study.objects.filter(pk=study.pk).update(steps=[solver])
    rows = Run.objects.filter(study=study)
    deadline = time.monotonic() + 120 + runs * SOLVE_S * 4
    while rows.exclude(state__in=TERMINAL_STATES).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"cdi: {label}: the study did not end in time")
        time.sleep(0.2)
    time.sleep(0.5)  # the last run's release and the study's refresh
    after, (calls1, usec1) = meter.read(), meter.redis_commands()
    sampler.halt.set()
    sampler.join()
    states = set(rows.values_list("state", flat=True))
    if states != {"completed"}:
        raise SystemExit(f"cdi: {label}: runs ended as {sorted(states)} (see the runs' agent.log)")
    times = list(rows.values_list("admitted_at", "started_at", "finished_at"))
    span = (max(t[2] for t in times) - min(t[0] for t in times)).total_seconds()
    run_s = statistics.mean((t[2] - t[1]).total_seconds() for t in times)
    start_s = statistics.mean((t[1] - t[0]).total_seconds() for t in times)
    delta = {k: after[k] - before[k] for k in after}
    cpu = {k: delta[k] * 1000 / runs for k in PARTS[:-1]}
    cpu["other"] = max(0.0, delta["busy"] * 1000 / runs - sum(cpu.values()))
    return Sample(
        component=component,
        n=n,
        agents=agents,
        runs=runs,
        span_s=span,
        run_s=run_s,
        start_s=start_s,
        cpu_ms=cpu,
        lock_ms={k: v * 1000 / runs for k, v in sampler.waits.items()},
        redis_calls=(calls1 - calls0) / runs,
        redis_ms=(usec1 - usec0) / 1000 / runs,
        steal_s=delta["steal"],
    )


def configuration(*, web: int, workers: int):
    """A fresh portal: `web` uvicorn processes, `workers` Celery workers (beat in the first)."""
    stack = fresh_stack()
    stack.start_web(workers=web)
    stack.start_worker()
    for _ in range(workers - 1):
        stack.add_worker()
    time.sleep(3)  # the workers connect, beat and the agent launchers start
    return stack


def describe(s: Sample) -> str:
    parts = ", ".join(f"{k} {s.cpu_ms[k]:.0f}" for k in PARTS)
    locks = s.lock_ms.get("Lock", 0.0) + s.lock_ms.get("LWLock", 0.0)
    return (
        f"{s.component} n={s.n} ({s.agents} agents, {s.runs} runs): span {s.span_s:.2f} s, "
        f"{s.capacity:.3f} runs/s an agent, run {s.run_s:.2f} s, start {s.start_s:.2f} s; "
        f"per run CPU ms: {parts} "
        f"(machine {s.machine_cpu_ms:.0f}); lock waits {locks:.1f} ms, "
        f"Redis {s.redis_calls:.0f} calls {s.redis_ms:.2f} ms"
    )


def cdi(base: float, value: float) -> float:
    """100 × (1 − value/base): how much capacity one unit lost against the serial case."""
    return 100.0 * (1.0 - value / base)


def median_sample(samples: list[Sample]) -> dict:
    """The medians of a configuration's rounds."""
    return {
        "span_s": statistics.median(s.span_s for s in samples),
        "capacity": statistics.median(s.capacity for s in samples),
        "machine_cpu_ms": statistics.median(s.machine_cpu_ms for s in samples),
        "cpu_ms": {k: statistics.median(s.cpu_ms[k] for s in samples) for k in PARTS},
        "lock_ms": statistics.median(
            s.lock_ms.get("Lock", 0.0) + s.lock_ms.get("LWLock", 0.0) for s in samples
        ),
        "redis_calls": statistics.median(s.redis_calls for s in samples),
        "redis_ms": statistics.median(s.redis_ms for s in samples),
        "run_s": statistics.median(s.run_s for s in samples),
        "start_s": statistics.median(s.start_s for s in samples),
        # the rest of an agent's cycle: its run's end → the next run's admission
        "turn_s": statistics.median(
            s.span_s / RUNS_PER_AGENT - s.run_s - s.start_s for s in samples
        ),
    }


def sources(base: dict, at: dict) -> str:
    """Where a configuration's agent cycle grew against the base (the run itself; admission →
    running; a run's end → the next admission), then its machine CPU per run by part,
    largest growth first, and the lock waits."""
    cycle = ", ".join(
        f"{name} {1000 * (at[k] - base[k]):+.0f} ms"
        for name, k in (("run", "run_s"), ("start", "start_s"), ("end→next", "turn_s"))
    )
    grew = sorted(((at["cpu_ms"][k] - base["cpu_ms"][k], k) for k in PARTS), reverse=True)
    text = ", ".join(f"{k} {d:+.0f}" for d, k in grew if abs(d) >= 1)
    locks = at["lock_ms"] - base["lock_ms"]
    return (
        f"cycle: {cycle}; CPU a run: {text or 'no part moved'} ms; lock waits {locks:+.1f} ms a run"
    )


def main() -> None:
    # runs that report late on a loaded machine are not requeued mid-measurement
    os.environ.setdefault("WINDTUNNEL_HEARTBEAT_TIMEOUT", "300")
    setup_django()
    import redis
    from django.conf import settings

    from catalog.models import Backend
    from studies.models import Run

    local = Backend.objects.get(name="local")
    saved = (local.cores, local.memory_gb)
    client = redis.Redis.from_url(settings.REDIS_URL)
    Run.objects.filter(tenant__name="bench-cdi").delete()

    samples: list[Sample] = []
    plan = [("agents", 1, 1, AGENTS)]
    plan += [("workers", 1, n, (max(AGENTS),)) for n in PROCESSES[1:]]
    plan += [("web", n, 1, (max(AGENTS),)) for n in PROCESSES[1:]]
    try:
        for r in range(ROUNDS):
            for component, web, workers, agent_counts in plan:
                stack = configuration(web=web, workers=workers)
                meter = Meter(stack=stack, redis=client)
                try:
                    # a warm-up study: imports, the launcher's first fork, connections
                    run_study(meter=meter, component="warm-up", n=0, agents=2, label="warm-up")
                    for agents in agent_counts:
                        n = {"agents": agents, "workers": workers, "web": web}[component]
                        label = f"round {r + 1}, {component} n={n}"
                        s = run_study(
                            meter=meter, component=component, n=n, agents=agents, label=label
                        )
                        samples.append(s)
                        progress(f"round {r + 1}: {describe(s)}")
                        if component == "agents" and agents == max(AGENTS):
                            # the same study is the base of the workers' and web's series
                            for other in ("workers", "web"):
                                samples.append(Sample(**{**asdict(s), "component": other, "n": 1}))
                finally:
                    stack.stop()
                    Run.objects.filter(tenant__name="bench-cdi").delete()
    finally:
        Backend.objects.filter(pk=local.pk).update(cores=saved[0], memory_gb=saved[1])

    table: dict[str, dict[int, dict]] = {}
    for s in samples:
        table.setdefault(s.component, {}).setdefault(s.n, []).append(s)  # type: ignore[arg-type]
    med = {c: {n: median_sample(v) for n, v in sorted(by_n.items())} for c, by_n in table.items()}

    rows = []
    for component, by_n in med.items():
        base = by_n[1]
        for n, m in by_n.items():
            row = {
                "component": component,
                "n": n,
                "cdi_wall": cdi(base["capacity"], m["capacity"]) if component == "agents" else None,
                "cdi_cpu": cdi(1 / base["machine_cpu_ms"], 1 / m["machine_cpu_ms"]),
                "span_ratio": m["span_s"] / base["span_s"],
                "sources": sources(base, m),
                **m,
            }
            rows.append(row)
            wall = f"CDI {row['cdi_wall']:5.1f} %, " if row["cdi_wall"] is not None else ""
            progress(
                f"{component:8} n={n}: {wall}CDI(CPU) {row['cdi_cpu']:5.1f} %, span "
                f"{m['span_s']:.2f} s (x{row['span_ratio']:.2f}), {m['capacity']:.3f} runs/s an "
                f"agent, machine {m['machine_cpu_ms']:.0f} ms CPU a run; {row['sources']}"
            )

    top = max(AGENTS)
    head = next(r for r in rows if r["component"] == "agents" and r["n"] == top)
    others = "; ".join(
        f"{r['component']} {r['n']}: {r['cdi_cpu']:.1f} % CPU, span x{r['span_ratio']:.2f}"
        for r in rows
        if r["component"] in ("workers", "web") and r["n"] > 1
    )
    agents_line = ", ".join(
        f"n={r['n']} {r['cdi_wall']:.1f} %" for r in rows if r["component"] == "agents"
    )
    meets = head["cdi_wall"] <= TARGET
    emit(
        f"portal_cdi_{top}",
        head["cdi_wall"],
        "%",
        f"CDI of agents ({agents_line}; CPU a run {head['cdi_cpu']:.1f} %): no-op runs "
        f"({STEPS} steps over {SOLVE_S:g} s, {RUNS_PER_AGENT} an agent) on the local backend, "
        f"1 web, 1 worker; where from at n={top}: {head['sources']}; {others}; median of "
        f"{ROUNDS} rounds" + ("" if meets else f"; MISSES <= {TARGET:g} %"),
        rows=rows,
        samples=[{**asdict(s), "capacity": s.capacity} for s in samples],
    )


if __name__ == "__main__":
    main()
