"""Runs the steps of one attempt, follows their output and decides how the attempt ended."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from orchestration import nofollow
from orchestration.agent.case import has_mesh
from orchestration.agent.logfollow import LogFollower, LogWrites, log_header_text
from orchestration.agent.outcome import Outcome, Stale, StepResult, over_disk, over_memory
from orchestration.agent.procs import (
    TreeSampler,
    become_subreaper,
    describe_exit,
    kill_group,
    kill_uid,
    reap_orphans,
    tree_pids,
    wait_exit,
    write_now,
)
from orchestration.agent.reporter import Reporter
from orchestration.agent.sandbox import Sandbox, SandboxError, find_program
from orchestration.agent.spec import AgentSpec, AgentStep
from orchestration.agent.watchdog import Watchdog
from orchestration.environment import step_environment
from orchestration.results.dat import DatFollower
from orchestration.results.logparse import LogParser

TYPE_CHECKING = False  # typing is not imported at run time (every Slurm job starts an agent)
if TYPE_CHECKING:
    from typing import Any

    from orchestration.agent.handover import Handover

__all__ = ["Supervisor", "log"]

PHASES = {
    "prepare": "meshing",
    "decompose": "decomposing",
    "solve": "solving",
    "reconstruct": "reconstructing",
    "other": "solving",
    "post": "post-processing",
}
TERMINATE_GRACE = 3.0  # on SIGTERM the driver waits for us: leave time to report
WRITE_ON_TERMINATE = 5.0  # … and for the solver to write the time step it is on
POLL = 0.1
LIVE_POLL = 0.02  # the shortest wait between reads of the log (a watched run)
SETTLE = 0.003  # after a watched step's write wakes the agent: the rest of its burst
WATCHED_BELOW = 1.0  # a telemetry interval shorter than this: someone watches the run live
SAMPLE_EVERY = 1.0  # CPU/memory of the step's process tree: once a second is plenty
DISK_EVERY = 5.0  # the run directory's size: every 5 s at least, longer for a large tree
DISK_COST = 0.02  # … so that the walks take at most 2 % of the agent's time


def log(message: str) -> None:
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    print(f"{stamp}.{int(now % 1 * 1000):03d} agent: {message}", file=sys.stderr, flush=True)


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Supervisor:
    def __init__(
        self,
        *,
        spec: AgentSpec,
        reporter: Reporter,
        terminate: threading.Event,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.reporter = reporter
        self.terminate = terminate
        self.clock = clock
        self.started = clock()
        self.sampler = TreeSampler()
        # stops a step that makes no progress, or the run past its wall time (watchdog.py)
        self.watchdog = Watchdog(spec.watchdog, clock)
        self.dat = DatFollower(spec.case_path)
        # the allowlist of the agent's environment, the run configuration's variables and a
        # HOME of the run's own (no system operations for the case: orchestration/environment)
        self.home = os.path.join(spec.work_dir, "home")
        self.env = step_environment(
            os.environ,
            spec.env,
            home=self.home,
            allow_system_operations=spec.allow_system_operations,
        )
        # every step runs confined: an unprivileged uid, limits, and (bwrap) nothing of the
        # host but a read-only system, its case and its home (orchestration/agent/sandbox.py)
        self.sandbox = Sandbox(spec.sandbox, run_id=spec.run_id)
        # the step's CPU time reaches the agent's RUSAGE_CHILDREN through bubblewrap's
        # namespace init, which its outer process leaves behind: the agent reaps it
        self._reap = self.sandbox.mode == "bwrap" and become_subreaper()
        if self.sandbox.mode != "off":  # no step runs as root, so none may run MPI as root
            for name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
                self.env.pop(name, None)
        self._follow_dat = False
        self.iterations: int | None = None  # time steps of the last solve step, as it counted
        self.resumed: Any = None  # the write a resumed attempt started from (resume.Resumed)
        self._saves = False  # a solver asked to stop writes its time step (write_now)
        self.last_time: float | None = None
        # each step as it ran (command line, exit code, times) and what the solver's log
        # header said of its build and hosts: the run's provenance (provenance_record)
        self.commands: list[dict[str, Any]] = []
        self.solver_header: dict[str, Any] = {}
        # the case directory, opened once: everything the agent does in it goes through this
        # descriptor without following links (orchestration/nofollow.py)
        self.case_fd = -1
        self.disk_bytes: int | None = None  # what the run's directory takes, last measured
        self._next_disk = 0.0
        self._disk_every = DISK_EVERY
        # the steps' CPU time is what RUSAGE_CHILDREN gains while they run (usage_figures)
        self._children_at_start: resource.struct_rusage | None = None
        self._single_peak = 0  # the largest one process of the steps reached, where known
        # where the runs' cores are handed over on this host (the local backend): the run's
        # own lock, held until its last step is over, and when that step is foreseen to end
        self.handover: Handover | None = None
        self.after_steps: Callable[[float], None] | None = None  # with the steps' seconds
        if spec.handover > 0 or spec.after:
            from orchestration.agent.handover import Handover  # lazy: left out of VM images

            self.handover = Handover(
                work_dir=spec.work_dir,
                lead=spec.handover,
                after=spec.after,
                announce=reporter.announce,
                set_phase=reporter.set_phase,
                log=log,
                clock=clock,
            )

    # -- steps ----------------------------------------------------------------------------

    def run_steps(self) -> Outcome:
        """Run every step in order; stop at the first failure, `stop` or SIGTERM."""
        messages: list[str] = []
        converged = False
        try:
            self.sandbox.prepare(
                case=self.spec.case_path,
                home=self.home,
                writable_home=self.spec.allow_system_operations,
                mounts=self.spec.mounts,
            )
            self.case_fd = nofollow.open_dir(self.spec.case_path)
        except (SandboxError, OSError) as exc:
            self._say(f"sandbox: {exc}")
            return Outcome(state="failed", reason="the case sandbox cannot start", message=str(exc))
        self._children_at_start = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.sandbox.make_cgroup(f"run-{self.spec.run_id}-a{self.spec.attempt}")
        if self.sandbox.cgroup_problem:
            self._say(f"resource limits: not enforced by a cgroup ({self.sandbox.cgroup_problem})")
        if self.handover is None:
            return self._run_steps(messages, converged)
        try:
            stopped = self.handover.wait(self._stop_reason)
            if stopped:
                return Outcome(state="cancelled", reason=stopped)
            return self._run_steps(messages, converged)
        finally:
            self.handover.release()

    def _steps_over(self) -> None:
        """The last step's processes are gone: `after_steps` (main.py's test-only wait), and
        then the next run may start."""
        if self.after_steps is not None:
            self.after_steps(self.clock() - self.started)
            self.after_steps = None
        if self.handover is not None:
            self.handover.release()

    def _stop_reason(self) -> str:
        """Why the run must stop now ("" if it need not); Stale for a superseded attempt."""
        self._check_interrupts()
        if self.terminate.is_set():
            return "terminated"
        return "stopped by the portal" if self.reporter.stop_requested.is_set() else ""

    def close(self) -> None:
        """Give back what the steps held: the run's cgroup (its last processes killed) and
        the case's descriptor."""
        cgroup = self.sandbox.cgroup
        if self.handover is not None:
            self.handover.release()
        if cgroup is not None:
            cgroup.kill_all(reap=(lambda: reap_orphans(timeout=0.05)) if self._reap else None)
            cgroup.leave()
            cgroup.remove()
            self.sandbox.cgroup = None
        if self.case_fd >= 0:
            os.close(self.case_fd)
            self.case_fd = -1

    def _run_steps(self, messages: list[str], converged: bool) -> Outcome:
        steps, mapped = self.spec.steps, None
        if self.resumed is not None and self.resumed.map_from:  # a warm start from another mesh
            from orchestration.agent.mapping import MappedStart  # lazy: mapped starts only

            mapped = MappedStart(case_fd=self.case_fd, sandbox=self.sandbox, resumed=self.resumed)
            steps = mapped.steps(steps)
        for index, step in enumerate(steps):
            self._check_interrupts()
            if self.terminate.is_set():
                return Outcome(state="cancelled", reason="terminated")
            if self.reporter.stop_requested.is_set():
                return Outcome(state="cancelled", reason="stopped by the portal")
            last = index == len(steps) - 1
            if mapped is not None and step is mapped.step:
                mapped.keep_start()
            result = self.run_step(step, last=last)
            if mapped is not None and step is mapped.step and not result.interrupted:
                if result.returncode == 0:
                    mapped.mapped(say=self._say)
                else:  # a head start only: the run goes on cold
                    self.resumed = mapped.failed(result, say=self._say)
                continue
            if result.converged:
                converged = True
                messages.append(f"{step.name}: solution converged")
            if result.interrupted == "terminated":
                return Outcome(state="cancelled", reason="terminated")
            if result.interrupted in ("stalled", "wall"):
                reason = "stalled" if result.interrupted == "stalled" else "max_wall_time"
                return Outcome(
                    state="failed",
                    exit_code=result.returncode,
                    reason=reason,
                    message=self.watchdog.message,
                )
            if result.interrupted == "disk":
                return over_disk(step.name, budget=self.sandbox.disk_bytes, used=self.disk_bytes)
            if self._memory_exceeded():
                limit = self.sandbox.memory_bytes
                return over_memory(step.name, limit=limit, exit_code=result.returncode)
            if result.interrupted == "stop":
                self._reconstruct_after_stop(steps[index + 1 :])
                return Outcome(
                    state="cancelled", reason="stopped by the portal", solver_converged=converged
                )
            if result.returncode != 0:
                return Outcome(
                    state="failed",
                    exit_code=result.returncode,
                    reason=describe_exit(step.name, result.returncode),
                    message=result.fatal_error or "",
                )
        return Outcome(
            state="completed", exit_code=0, message="; ".join(messages), solver_converged=converged
        )

    def _reconstruct_after_stop(self, rest: tuple[AgentStep, ...]) -> None:
        """A stopped parallel run still gets its latest time reconstructed (best effort)."""
        for step in rest:
            if step.role == "reconstruct" and not self.terminate.is_set():
                result = self.run_step(step, interruptible=False)
                if result.returncode != 0:
                    log(f"{step.name} after stop: {describe_exit(step.name, result.returncode)}")

    def post_process(self) -> str:
        """After a completed run, in the same sandbox as its steps: the flow-field artifact
        (orchestration/results/fields, run by the system's python3 in isolated mode) and
        foamToVTK's files for ParaView. Best effort: returns a note for the final message
        ('' when both went well); neither changes how the run ended. A case with no mesh
        (a solver that needs none, a stand-in) has nothing for either: they are not run."""
        if not has_mesh(self.case_fd):
            log("post-processing skipped: the case has no mesh (constant/polyMesh)")
            return ""
        notes = []
        python = find_program("python3", "/usr/bin:/bin:/usr/local/bin")
        if python is None:
            notes.append("flow fields: no python3 on this machine")
        else:
            from orchestration.results import fields  # lazy: only completed runs post-process

            try:  # nothing the case left there passes for this run's artifact
                nofollow.unlink(self.case_fd, fields.ARTIFACT)
            except OSError:
                pass
            argv = fields.fields_argv(python, self.sandbox.tools_root(), tuple(self.spec.fields))
            # the log marker shows the command, not the program text
            result = self.run_step(
                AgentStep(name="windtunnelFields", argv=tuple(argv), role="post"),
                interruptible=False,
                shown="python3 -I -B -c <orchestration.results.fields.artifact> "
                + " ".join(argv[6:]),
            )
            if result.returncode != 0:
                notes.append("flow fields: not written (see log.windtunnelFields)")
        if find_program("foamToVTK", self.env.get("PATH", "")) is not None:
            result = self.run_step(
                AgentStep(name="foamToVTK", argv=("foamToVTK", "-latestTime"), role="post"),
                interruptible=False,
            )
            if result.returncode != 0:
                notes.append("VTK: foamToVTK failed (see log.foamToVTK)")
        return "; ".join(notes)

    def _memory_exceeded(self) -> bool:
        cgroup = self.sandbox.cgroup
        return cgroup is not None and self.sandbox.memory_bytes > 0 and cgroup.memory_exceeded()

    def memory_peak(self) -> int | None:
        """The run's highest memory use so far, as its cgroup counted it (None: no cgroup)."""
        return self.sandbox.cgroup.memory_peak() if self.sandbox.cgroup is not None else None

    def _note_single_peak(self) -> None:
        """After a step was reaped: the largest peak of any one process the agent's
        descendants had (RUSAGE_CHILDREN's ru_maxrss, exact, its processes reaped through
        the agent), when it is above the agent's own peak. A process forked from the agent
        starts with the agent's memory counted as its own, so below that the figure may be
        the agent's, and the samples answer alone."""
        children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if children > own:
            self._single_peak = max(self._single_peak, children * 1024)

    def usage_figures(self) -> dict[str, Any]:
        """What the steps used, for the final report: `peak_memory_bytes`, the process
        tree's peak resident memory (TreeSampler.peak_bytes, raised to the largest single
        process's exact peak where known), and `cpu_seconds`, the user + system CPU time
        of every process of the steps (the agent's children, reaped through it: exact for
        the processes on this machine). Empty before any step ran."""
        if self._children_at_start is None:
            return {}
        before = self._children_at_start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        out: dict[str, Any] = {"cpu_seconds": round(max(cpu, 0.0), 3)}
        peak = max(self.sampler.peak_bytes, self._single_peak)
        if peak > 0:
            out["peak_memory_bytes"] = int(peak)
        return out

    def limits_record(self) -> dict[str, Any]:
        """What held the run to what it declared, for its provenance."""
        sandbox = self.sandbox
        return {
            "cgroup": sandbox.cgroup is not None,
            "detail": sandbox.cgroup_problem[:500],
            "memory_gb": round(sandbox.memory_bytes / 1024**3, 3),
            "cpus": sandbox.cpus,
            "processes": sandbox.processes,
            "disk_gb": round(sandbox.disk_bytes / 1024**3, 3),
            "memory_peak_bytes": self.memory_peak(),
        }

    def measure_disk(self) -> int | None:
        """What the run's directory takes on disk now (walked by descriptor, no link
        followed), also reported with the heartbeats; None when it cannot be walked."""
        if self.case_fd < 0:
            return None
        started = self.clock()
        try:
            used = nofollow.tree_usage(self.case_fd)
        except OSError as exc:  # folders nested too deep: counted as over any budget
            log(f"disk use: {exc}")
            used = max(self.sandbox.disk_bytes + 1, self.disk_bytes or 0)
        took = self.clock() - started
        self._disk_every = max(DISK_EVERY, took / DISK_COST)
        self.disk_bytes = used
        self.reporter.set_disk(used)
        return used

    def _say(self, note: str) -> None:
        """A line in the agent's log and the run's."""
        log(note)
        self.reporter.add_log([note])

    def _check_interrupts(self) -> None:
        if self.reporter.stale.is_set():
            raise Stale()

    def run_step(
        self, step: AgentStep, *, interruptible: bool = True, shown: str = "", last: bool = False
    ) -> StepResult:
        self.reporter.set_phase(PHASES.get(step.role, "solving"))
        self.reporter.add_log([f"== {step.name}: {shown or ' '.join(step.argv)} =="])
        log(f"step {step.name}: {shown or step.argv}")
        if step.role == "solve":
            self._follow_dat = True
        record: dict[str, Any] = {
            "name": step.name,
            "role": step.role,
            "command": shown or " ".join(step.argv),
            "started_at": _utc_now(),
        }
        if not shown:
            record["argv"] = list(step.argv)
        self.commands.append(record)
        # the step writes straight into its log file (as in a shell loop) and the agent follows
        # the file: a solver never waits on a pipe the agent has not drained yet. The file is
        # made new, by descriptor (whatever the case left under that name, a link to a host
        # file included, is removed first), and followed through that descriptor
        try:
            fd = nofollow.create_file(
                self.case_fd, f"log.{step.name}", owner=self.sandbox.uid, read=True
            )
        except OSError as exc:
            problem = f"cannot make log.{step.name} in the case: {exc}"
            self.reporter.add_log([problem])
            record.update(exit_code=127, ended_at=_utc_now())
            return StepResult(returncode=127, fatal_error=problem)
        try:
            return self._run_step(step, fd, record, interruptible=interruptible, last=last)
        finally:
            os.close(fd)

    def _run_step(
        self,
        step: AgentStep,
        fd: int,
        record: dict[str, Any],
        *,
        interruptible: bool,
        last: bool = False,
    ) -> StepResult:
        program = step.argv[0] if step.argv else ""
        if "/" not in program and find_program(program, self.env.get("PATH", "")) is None:
            # said here: inside the sandbox it would be bubblewrap's "execvp" error
            problem = f"cannot start {program}: no such program on PATH"
            os.write(fd, f"{problem}\n".encode())
            self.reporter.add_log([problem])
            record.update(exit_code=127, ended_at=_utc_now())
            return StepResult(returncode=127, fatal_error=problem)
        try:
            proc = self.sandbox.start(
                list(step.argv),
                cwd=self.spec.case_path,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                # own process group (so the step can be signalled as a whole) but the
                # agent's session: a driver can still find and kill it if the agent dies
                process_group=0,
            )
        except OSError as exc:
            os.write(fd, f"cannot start {step.argv[0]}: {exc}\n".encode())
            self.reporter.add_log([f"cannot start {step.argv[0]}: {exc}"])
            record.update(exit_code=127, ended_at=_utc_now())
            return StepResult(returncode=127, fatal_error=f"cannot start {step.argv[0]}: {exc}")
        self._saves = step.role == "solve" and not self.spec.allow_system_operations
        parser = LogParser()
        follower = LogFollower(fd, parser, self.reporter, solve=step.role == "solve")
        self.watchdog.step_started(step.name, solve=step.role == "solve")
        if self.handover is not None and last and step.role == "solve":
            self.handover.last_step_started(self.case_fd)
        interrupted = self._watch(proc, follower, interruptible=interruptible)
        proc.wait()
        if self._reap:
            reap_orphans(timeout=1.0)
        self._end_leftovers()
        if last:
            self._steps_over()
        self._note_single_peak()
        follower.poll(final=True)
        if step.role == "solve":
            self.reporter.add_columns(parser.flush_block())
            # the solver's own count of time steps: exact even where points were thinned
            self.iterations, self.last_time = parser.iterations, parser.last_time
        else:
            parser.flush_block()
        self._sample(proc.pid, final=True)
        record.update(exit_code=proc.returncode, ended_at=_utc_now())
        if step.role == "solve" or not self.solver_header:
            header = log_header_text(os.pread(fd, 8192, 0))
            if header:
                self.solver_header = header
        self.reporter.add_log([f"== {step.name}: {describe_exit(step.name, proc.returncode)} =="])
        log(f"step {step.name}: {describe_exit(step.name, proc.returncode)}")
        return StepResult(
            returncode=proc.returncode,
            interrupted=interrupted,
            fatal_error=parser.fatal_error,
            converged=parser.converged,
        )

    def _end_leftovers(self) -> None:
        """What a step left running when it ended (a daemon that left its process group) is
        killed: by its cgroup; without one, under a uid of the run's own on a machine of its
        own (`uid` mode), every process of that uid. (In `bwrap` mode the step's PID namespace
        ends with it.)"""
        reap = (lambda: reap_orphans(timeout=0.05)) if self._reap else None
        if self.sandbox.cgroup is not None:
            self.sandbox.cgroup.kill_all(reap=reap)
        elif self.sandbox.mode == "uid" and self.sandbox.uid is not None:
            kill_uid(self.sandbox.uid)

    def _watch(
        self, proc: subprocess.Popen[bytes], follower: LogFollower, *, interruptible: bool
    ) -> str:
        """Wait for `proc`, following its log, sampling and measuring the run's directory as
        it runs; stop it on stale/stop/SIGTERM, when the directory outgrows its budget, or
        when the watchdog says it makes no progress or the run is past its wall time."""
        next_sample = self.clock()
        writes: LogWrites | None = None
        tried_writes = False
        try:
            while proc.poll() is None:
                if writes is not None:
                    writes.drain()
                last_read = self.clock()
                follower.poll()
                if self.reporter.stale.is_set():
                    self.kill(proc, grace=0.0)
                    raise Stale()
                if self.terminate.is_set():
                    self.kill(proc, grace=TERMINATE_GRACE, save=WRITE_ON_TERMINATE)
                    return "terminated"
                if interruptible and self.reporter.stop_requested.is_set():
                    self.kill(proc, grace=self.spec.kill_grace, save=self.spec.kill_grace)
                    return "stop"
                if self.handover is not None:
                    self.handover.observe(follower.parser.last_time)
                self.watchdog.observe(
                    iterations=follower.parser.iterations, log_bytes=follower.offset
                )
                stopped = self.watchdog.check()
                if stopped:
                    log(f"watchdog: {self.watchdog.message}")
                    self.reporter.add_log([f"watchdog: {self.watchdog.message}"])
                    save = self.spec.kill_grace if stopped == "wall" else 0.0  # not a stall
                    self.kill(proc, grace=self.spec.kill_grace, save=save)
                    return stopped
                if self.clock() >= next_sample:
                    next_sample = self.clock() + max(self.spec.telemetry_interval, SAMPLE_EVERY)
                    self._sample(proc.pid)
                if self.clock() >= self._next_disk:
                    used = self.measure_disk()
                    self._next_disk = self.clock() + self._disk_every
                    if self.sandbox.disk_bytes and (used or 0) > self.sandbox.disk_bytes:
                        self.kill(proc, grace=0.0)
                        return "disk"
                watched = self.reporter.telemetry_interval < WATCHED_BELOW
                if watched and not tried_writes:
                    tried_writes, writes = True, LogWrites.open(follower.path)
                if watched and writes is not None:
                    # read when the step writes, LIVE_POLL apart at the most (a solver that
                    # writes a line a millisecond is read in blocks), else every POLL
                    gap = LIVE_POLL - (self.clock() - last_read)
                    if gap > 0:
                        wait_exit(proc, gap)
                    wait_exit(proc, POLL, writes.fd)
                    # woken by a step's first write, let the rest of its burst (a time
                    # step's lines) land before reading: a read in mid-burst leaves the
                    # rest waiting LIVE_POLL. It matters most when the step runs in a cgroup
                    # of its own, where the woken agent preempts it at once
                    wait_exit(proc, SETTLE)
                else:
                    wait_exit(proc, self._poll_every())
        finally:
            if writes is not None:
                writes.close()
        # a SIGTERM meant for the whole job (e.g. a Slurm time limit) may end the step before
        # the loop saw it: the step did not finish on its own then
        return "terminated" if self.terminate.is_set() else ""

    def _poll_every(self) -> float:
        """How often the step's log is read: every half telemetry interval while the run is
        watched (a line waits no longer than the batch), in [LIVE_POLL, POLL]."""
        return min(POLL, max(LIVE_POLL, self.reporter.telemetry_interval / 2))

    def kill(self, proc: subprocess.Popen[bytes], *, grace: float, save: float = 0.0) -> None:
        """SIGTERM the step's process group (plus strays), SIGKILL after `grace`; a solver is
        first asked to write its time step and end, for up to `save` seconds."""
        if save > 0 and self._saves:
            log(f"asking pid {proc.pid} to write now and end (up to {save:.0f} s)")
            if write_now(proc, wait=save):
                return
        kill_group(proc.pid, grace=grace, extra_pids=tree_pids(proc.pid), reap=proc.poll)

    # -- following ------------------------------------------------------------------------

    def _sample(self, pid: int, *, final: bool = False) -> None:
        x = round(self.clock() - self.started, 3)
        if not final:
            cpu, rss = self.sampler.sample(pid)
            self.reporter.set_resources(cpu_percent=cpu, rss_bytes=rss)
            self.reporter.add_points([("cpu.percent", x, cpu), ("memory.rss", x, float(rss))])
        if self._follow_dat:
            self.reporter.add_columns(self.dat.poll_columns())

    def poll_dat(self) -> None:
        if self._follow_dat or os.path.isdir(os.path.join(self.spec.case_path, "postProcessing")):
            self.reporter.add_columns(self.dat.poll_columns())
