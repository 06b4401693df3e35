"""Ended runs go on from their writes: continued for more iterations from the latest one, or
restarted from an earlier one with changed settings (relaxation factors, a time step, a
scheme). Each is a new attempt of the same run: its agent copies the write into the
rendered case and starts the solver there (orchestration/agent/resume.py); its series go
on from the old ones up to that time (telemetry.carry), and its objectives and trust are
computed again from all of them when it ends. Its provenance keeps what it started from and
what changed (`resumed_from`).

The run's backend must show a later attempt its earlier attempts' folders (the trait
`keeps_attempts`: local and Slurm backends); the write must be one the run's last attempt
reported complete (Run.writes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from compute.drivers import traits_of
from core.exceptions import ApplicationError, Conflict, ErrorCode, NotFound
from orchestration.agent.resume import SETTING_KEY, SETTING_VALUE, SETTINGS_FILES
from studies import transitions
from studies.choices import TERMINAL_STATES, RunState, StudyState
from studies.models import Run, Study
from studies.services import queue_check
from studies.transitions.continuation import AGENT_KEYS

__all__ = [
    "MAX_SELECTION",
    "ResumeRequest",
    "agent_resume",
    "resume_request",
    "run_continue",
    "runs_continue",
]

MAX_ITERATIONS = 10_000_000
MAX_SETTINGS = 20
MAX_SELECTION = 1000  # runs one request continues
# set by the continuation itself: where the solver starts
_OWN_KEYS = {"controlDict": ("startFrom", "startTime")}


@dataclass(frozen=True)
class ResumeRequest:
    """What the user asked: `iterations` more (None: to the case's endTime), from `time`
    ("latest", or one of the run's writes), with `settings` changed ({file: {key: value}})."""

    iterations: int | None
    time: str
    settings: dict[str, dict[str, str]]


def resume_request(*, iterations: Any, time: Any, settings: Any) -> ResumeRequest:
    """The request checked for its shape (each run is checked on its own: resume_problem)."""
    if iterations is not None and (
        isinstance(iterations, bool)
        or not isinstance(iterations, int)
        or not 1 <= iterations <= MAX_ITERATIONS
    ):
        raise ApplicationError(
            f"iterations: a whole number from 1 to {MAX_ITERATIONS:,} (the time steps to add)",
            field="iterations",
        )
    if time is None or time == "":
        time = "latest"
    if isinstance(time, int | float) and not isinstance(time, bool):
        time = f"{time:g}"
    if not isinstance(time, str) or (time != "latest" and not _is_number(time)):
        raise ApplicationError(
            'time: "latest", or one of the run\'s write times (its page lists them)',
            field="time",
        )
    return ResumeRequest(iterations=iterations, time=time, settings=_settings(settings, iterations))


def _is_number(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return value == value and abs(value) != float("inf")


def _settings(raw: Any, iterations: int | None) -> dict[str, dict[str, str]]:
    if raw in (None, {}):
        return {}
    files = ", ".join(SETTINGS_FILES)
    if not isinstance(raw, Mapping):
        raise ApplicationError(
            f'settings: an object of files ({files}) to {{key: value}}, e.g. {{"fvSolution": '
            '{"relaxationFactors.equations.U": 0.5}}',
            field="settings",
        )
    out: dict[str, dict[str, str]] = {}
    count = 0
    for name, values in raw.items():
        where = f"settings.{name}"
        if name not in SETTINGS_FILES:
            raise ApplicationError(
                f"{where}: a restart changes {files} (system/…), not {name}", field=where
            )
        if not isinstance(values, Mapping) or not values:
            raise ApplicationError(f"{where}: an object of {{key: value}}", field=where)
        out[name] = {}
        for key, value in values.items():
            count += 1
            field = f"{where}.{key}"
            if not isinstance(key, str) or not SETTING_KEY.match(key):
                raise ApplicationError(
                    f"{field}: a dotted key of plain words (relaxationFactors.equations.U, "
                    "relaxationFactors.equations..*, ddtSchemes.default)",
                    field=where,
                )
            if key.split(".")[0] in _OWN_KEYS.get(name, ()) or (
                key == "endTime" and iterations is not None
            ):
                raise ApplicationError(
                    f"{field}: set by the restart itself (from the time and the iterations "
                    "you give)",
                    field=field,
                )
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise ApplicationError(f"{field}: a number or a word", field=field)
            text = f"{value:g}" if isinstance(value, int | float) else value.strip()
            if not SETTING_VALUE.match(text):
                raise ApplicationError(
                    f"{field}: {text[:40]!r} is not allowed: numbers and words only (0.5, "
                    "Euler, Gauss linearUpwind grad(U)), no ; {{ }} # $ or quotes",
                    field=field,
                )
            out[name][key] = text
    if count > MAX_SETTINGS:
        raise ApplicationError(f"settings: at most {MAX_SETTINGS} keys", field="settings")
    return out


def _write_times(run: Run) -> tuple[int | None, list[str]]:
    writes = run.writes if isinstance(run.writes, dict) else {}
    times = [str(t) for t in writes.get("times") or []]
    attempt = writes.get("attempt")
    return (attempt if isinstance(attempt, int) else None), times


def resume_problem(run: Run, request: ResumeRequest) -> tuple[str, str] | None:
    """(field, why) a run cannot go on as asked; None when it can."""
    if run.state not in TERMINAL_STATES:
        return "run", f"the run is {run.state}: a run goes on once it has ended"
    if run.reused:
        source = run.reused_from_id or "an earlier run"
        return "run", (
            f"the run shares the results of an identical earlier run ({source}): continue "
            "that run instead"
        )
    if run.study.state in (StudyState.CANCELLED, StudyState.DELETING):
        return "run", f"the study is {run.study.state}: its runs do not go on; clone it instead"
    backend = run.backend
    if not traits_of(backend).keeps_attempts:
        return "run", (
            f"the run ran on {backend.name} ({backend.kind}), whose next attempt would not "
            "see this one's files: runs on local and Slurm backends go on from their writes"
        )
    attempt, times = _write_times(run)
    if not times or attempt != run.attempt:
        return "time", (
            "the run has no write to go on from (it ended before its case's first write: "
            "lower writeInterval in system/controlDict, or run it again)"
        )
    if request.time != "latest" and not any(float(t) == float(request.time) for t in times):
        shown = ", ".join(times[-8:])
        return "time", f"the run never wrote time {request.time} completely; its writes: {shown}"
    latest = request.time == "latest" or float(request.time) == float(times[-1])
    if request.iterations is None and latest and run.state == RunState.COMPLETED:
        return "iterations", (
            f"give how many iterations to add: the run ended at its last write ({times[-1]})"
        )
    return None


def _resume_of(run: Run, request: ResumeRequest, by: Any) -> dict[str, Any]:
    """Run.resume: the write (by its name: the latest is the last the run reported) and the
    rest of the request, with who asked and when."""
    _attempt, times = _write_times(run)
    time = times[-1]
    if request.time != "latest":
        time = next(t for t in times if float(t) == float(request.time))
    # without iterations: to the end the run was given, its case's endTime or, when it went
    # on before for more iterations, where that took it
    before = run.resume if isinstance(run.resume, dict) else {}
    end_time = None
    if request.iterations is None and (before.get("iterations") or before.get("end_time")):
        end_time = run.last_time if run.last_time is not None else before.get("end_time")
    return {
        "attempt": run.attempt,
        "time": time,
        "iterations": request.iterations,
        "end_time": end_time,
        "settings": request.settings,
        "required": True,
        # attempts up to this one were earlier requests': the retries count afresh
        "retry_base": run.attempt,
        "by": getattr(by, "username", "") or "",
        "at": timezone.now().isoformat(),
    }


def agent_resume(resume: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the next attempt's agent is told (run.json's resume), from Run.resume."""
    if not resume:
        return None
    return {k: resume[k] for k in AGENT_KEYS if k in resume}


def retry_base(run: Run) -> int:
    """Attempts that belong to earlier requests (before its latest continuation)."""
    base = (run.resume or {}).get("retry_base") if isinstance(run.resume, dict) else None
    return base if isinstance(base, int) else 0


@transaction.atomic
def run_continue(*, run: Run, by: Any, request: ResumeRequest) -> Run:
    """Queue one ended run again to go on as `request` asks; 400 naming the field when it
    cannot, 409 when it has not ended."""
    run = (
        Run.objects.select_for_update(of=("self",))
        .select_related("study", "backend")
        .get(pk=run.pk)
    )
    problem = resume_problem(run, request)
    if problem is not None:
        field, why = problem
        if field == "run" and run.state not in TERMINAL_STATES:
            raise Conflict(why, code=ErrorCode.STATE)
        raise ApplicationError(why, field=field)
    queue_check(tenant_id=run.tenant_id, adding=1)
    transitions.runs_resume(
        resumes={run.pk: (run.attempt, _resume_of(run, request, by))}, tenant_id=run.tenant_id
    )
    run.refresh_from_db()
    return run


@transaction.atomic
def runs_continue(
    *, study: Study, run_ids: Iterable[Any], by: Any, request: ResumeRequest
) -> dict[str, Any]:
    """Queue a selection of a study's ended runs again (at most MAX_SELECTION): those that
    can go on do; the others are named with the reason. 400 when none can."""
    ids = list(dict.fromkeys(str(x) for x in run_ids))
    if not ids or len(ids) > MAX_SELECTION:
        raise ApplicationError(
            f"runs: from 1 to {MAX_SELECTION:,} of the study's run ids", field="runs"
        )
    runs = list(
        Run.objects.select_for_update(of=("self",))
        .select_related("study", "backend")
        .filter(study=study, pk__in=ids)
        .order_by("index")
    )
    found = {str(r.pk) for r in runs}
    missing = [x for x in ids if x not in found]
    if missing:
        raise NotFound(f"runs: the study has no run {missing[0]}")
    resumes: dict[Any, tuple[int, dict[str, Any]]] = {}
    skipped: list[dict[str, Any]] = []
    for run in runs:
        problem = resume_problem(run, request)
        if problem is None:
            resumes[run.pk] = (run.attempt, _resume_of(run, request, by))
        else:
            skipped.append({"run": str(run.pk), "index": run.index, "reason": problem[1]})
    if not resumes:
        first = skipped[0]
        raise ApplicationError(
            f"none of the {len(skipped)} runs can go on; run {first['index']}: {first['reason']}",
            field="runs",
            details={"skipped": skipped},
        )
    queue_check(tenant_id=study.tenant_id, adding=len(resumes))
    continued = transitions.runs_resume(resumes=resumes, tenant_id=study.tenant_id)
    return {"continued": continued, "skipped": skipped}
