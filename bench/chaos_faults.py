"""The chaos benchmark's faults: the seeded plan, hitting a part of the portal (a signal to
web, worker, beat, an agent, PostgreSQL, Redis or slurmctld, and its start again), and the
recovery measured after each."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psutil

from bench.chaos_sampler import Sampler
from bench.chaos_services import Postgres, Redis, Service, Slurmctld, db_call
from bench.common import SMOKE

DOWN_S = (0.5, 5.0)
# faults fall between these shares of the runs ended (a smoke run's few runs end quickly)
MOMENTS = (0.03, 0.5) if SMOKE else (0.03, 0.9)
DELAY_S = (0.0, 0.5) if SMOKE else (0.0, 2.0)  # a moment later, at random


def utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


@dataclass
class Fault:
    component: str
    action: str  # kill (SIGKILL) | restart (a graceful stop)
    down: float  # seconds down before it is started again
    when: float  # made once this share of the runs has ended
    delay: float  # and this many seconds more
    at: float = 0.0  # when it was hit
    back: float = 0.0  # when it answered again
    recovery: float | None = None
    detail: str = ""
    run: tuple[str, int] | None = None  # an agent's (run, attempt)
    waiting: int | None = None  # runs not yet dispatched when it was back
    stuck: bool = False  # no progress after it until the benchmark stopped waiting
    overlaps: list[str] = field(default_factory=list)  # faults within its window


def plan(rng: random.Random, count: int, components: tuple[str, ...]) -> list[Fault]:
    """`count` faults: every component once (when there are enough), the rest at random."""
    names = rng.sample(components, min(count, len(components)))
    names += [rng.choice(components) for _ in range(count - len(names))]
    rng.shuffle(names)
    moments = sorted(rng.uniform(*MOMENTS) for _ in names)
    return [
        Fault(
            component=name,
            action="kill" if name == "agent" else rng.choice(("kill", "restart")),
            down=0.0 if name == "agent" else round(rng.uniform(*DOWN_S), 2),
            when=round(when, 3),
            delay=round(rng.uniform(*DELAY_S), 2),
        )
        for name, when in zip(names, moments, strict=True)
    ]


def signal_of(fault: Fault) -> int:
    return signal.SIGKILL if fault.action == "kill" else signal.SIGTERM


def agent_process(handle: str) -> psutil.Process | None:
    """The live agent process of a local run's handle, or None."""
    from orchestration.drivers.local import parse_handle

    parsed = parse_handle(handle)
    if parsed is None:
        return None
    try:
        proc = psutil.Process(parsed[0])
        if abs(proc.create_time() - parsed[1]) > 0.05 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    return proc


class Chaos:
    """The portal under test and the means to hit each of its parts."""

    def __init__(self, *, stack: Any, studies: list[Any], slurm_backend: Any, rng: random.Random):
        self.stack = stack
        self.studies = studies
        self.slurm_backend = slurm_backend
        self.rng = rng
        self.services: dict[str, Service] = {
            "postgres": Postgres(),
            "redis": Redis(),
            "slurmctld": Slurmctld(),
        }

    def hit(self, fault: Fault, sampler: Sampler) -> None:
        fault.at = time.time()
        sig = signal_of(fault)
        stack = self.stack
        if fault.component == "agent":
            self._kill_an_agent(fault, sampler)
            fault.back = fault.at
            return
        if fault.component == "web":
            stack.web.send_signal(sig)
            try:
                stack.web.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stack.web.kill()
                stack.web.wait()
            time.sleep(fault.down)
            stack.start_web()  # returns once /healthz answers
        elif fault.component == "worker":
            stack.stop_worker(sig)  # its process group: the agent launcher goes too
            time.sleep(fault.down)
            stack.start_worker(beat=False)
        elif fault.component == "beat":
            stack.stop_beat(sig)
            time.sleep(fault.down)
            stack.start_beat()
        else:
            service = self.services[fault.component]
            try:
                service.stop(sig)
                time.sleep(fault.down)
            finally:
                service.start()  # returns once it answers
        fault.back = time.time()

    def _kill_an_agent(self, fault: Fault, sampler: Sampler) -> None:
        """SIGKILL the live agent of a local run that is solving (or at least running)."""
        from studies.choices import TERMINAL_STATES
        from studies.models import Run

        local = Run.objects.filter(study=self.studies[0])
        started = time.monotonic()
        while True:
            rows = db_call(
                lambda: list(
                    local.filter(state="running")
                    .exclude(handle="")
                    .order_by("id")
                    .values_list("id", "attempt", "handle")
                )
            )
            agents = [(r, proc) for r in rows or [] if (proc := agent_process(r[2])) is not None]
            solving = [(r, proc) for r, proc in agents if str(r[0]) in sampler.solving]
            if solving or (agents and time.monotonic() > started + 5):
                break  # a solving one if there is one within 5 s, else one that runs
            left = db_call(lambda: local.exclude(state__in=TERMINAL_STATES).exists())
            if left is False or time.monotonic() > started + 60:
                fault.detail = "no local run was running: nothing killed"
                return
            time.sleep(0.1)
        (run_id, attempt, _), proc = self.rng.choice(solving or agents)
        try:
            proc.kill()  # psutil checks the process is still the agent (its create time)
        except psutil.Error:
            fault.detail = f"run {run_id}: its agent exited first"
            return
        fault.at = time.time()
        fault.run = (str(run_id), attempt)
        state = "solving" if solving else "running"
        fault.detail = f"run {run_id} attempt {attempt} ({state}), agent pid {proc.pid}"

    def waiting(self, fault: Fault) -> int | None:
        """Runs of the fault's scope not yet claimed by dispatch (None: PostgreSQL is away)."""
        return db_call(lambda: self._scope(fault).filter(state__in=("pending", "admitted")).count())

    def _scope(self, fault: Fault) -> Any:
        from studies.models import Run

        runs = Run.objects.filter(study__in=self.studies)
        if fault.component == "slurmctld":
            runs = runs.filter(backend=self.slurm_backend)
        return runs

    def recovery(self, fault: Fault, *, until: float) -> None:
        """After the run: from the component's return to the end of the first run dispatched
        after it (on the Slurm backend for slurmctld): the whole path, admission → dispatch →
        agent → final report, worked again. With nothing left to dispatch then, the next
        run's end."""
        if fault.component == "agent":
            self._agent_recovery(fault, until=until)
            return
        back = utc(fault.back)
        ended = self._scope(fault).filter(finished_at__gt=back).order_by("finished_at")
        first = ended.filter(provisioning_at__gt=back).first()
        if first is None and fault.waiting == 0:
            first = ended.first()
            fault.detail = "nothing left to dispatch: the next run's end"
        if first is not None and first.finished_at is not None:
            fault.recovery = max(0.0, first.finished_at.timestamp() - fault.back)
        elif fault.waiting:
            fault.recovery = until - fault.back  # at least
            fault.stuck = True
            fault.detail = f"{fault.waiting} runs were waiting; none dispatched after it ended"
        else:
            fault.detail = "no run ended after it"

    def _agent_recovery(self, fault: Fault, *, until: float) -> None:
        """After the run: the agent's run, from its kill to its end on a later attempt."""
        from studies.models import Run

        if fault.run is None:
            return
        run = Run.objects.get(pk=fault.run[0])
        killed_attempt = fault.run[1]
        if run.state != "completed" or run.finished_at is None:
            fault.recovery = until - fault.at  # at least
            fault.stuck = True
            fault.detail += f"; the run ended {run.state} (attempt {run.attempt})"
        elif run.attempt == killed_attempt:
            fault.recovery = max(0.0, run.finished_at.timestamp() - fault.at)
            fault.detail += "; its end was reported before the kill took"
        else:
            fault.recovery = run.finished_at.timestamp() - fault.at
            fault.detail += f"; completed on attempt {run.attempt}"
