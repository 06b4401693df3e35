"""A study's state once submitted: derived from its runs after each run's change (and
settled when such a refresh was lost), or cancelled by its user (at once, whatever its
size: the queued runs are ended in the background)."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from core import jobs
from core.exceptions import Conflict, ErrorCode
from core.jobs import Job
from quotas.models import Quota
from studies.choices import (
    ACTIVE_STATES,
    ENDED_STUDY_STATES,
    HOLDING_STATES,
    AdaptiveEnd,
    RunState,
    StudyState,
)
from studies.deletion import deletions_resume
from studies.events import publish_study
from studies.models import Run, Study
from studies.transitions import runs_cancel_for_study, runs_cancel_queued


@transaction.atomic
def study_cancel(*, study: Study, by) -> int:
    """Cancel a study at once, whatever its size: the study is marked cancelled and its runs
    that hold resources (at most a quota's worth) are cancelled now, their jobs stopped on
    their backends; its queued runs, up to 100,000, are ended in chunks by the worker
    (study_cancel_queued), and from this commit on nothing admits them and every read shows
    them cancelled (selectors.study_progress, the runs' serializer). How many runs were
    cancelled now."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.state == StudyState.DRAFT:
        raise Conflict(
            "a draft study has no runs to cancel; delete it instead", code=ErrorCode.STATE
        )
    if study.state == StudyState.CANCELLED:
        raise Conflict("the study is cancelled already", code=ErrorCode.STATE)
    between_batches = (
        study.spec.get("combine") == "adaptive"
        and not study.adaptive_end
        and study.state not in ENDED_STUDY_STATES
    )
    if (
        not between_batches
        and not study.runs.filter(state__in=(RunState.PENDING, *HOLDING_STATES)).exists()
    ):
        raise Conflict(
            f"the study is {study.get_state_display().lower()}: no run is queued or running, "
            "so there is nothing to cancel",
            code=ErrorCode.STATE,
        )
    # the fence: admission holds the tenant's quota row for its whole pass, so a pass under
    # way ends before this commits and a later one reads the study as cancelled
    # (scheduler.admission skips a cancelled study's queued runs): none is admitted after
    Quota.objects.select_for_update().filter(tenant_id=study.tenant_id).first()
    count = runs_cancel_for_study(study=study, by=by, queued=False)
    if between_batches:  # and no further batch
        study.adaptive_end = AdaptiveEnd.CANCELLED
    study.state = StudyState.CANCELLED
    study.finished_at = timezone.now()
    study.save(update_fields=["state", "finished_at", "adaptive_end", "updated_at"])
    who = getattr(by, "username", None) or "the system"
    jobs.enqueue(Job.CANCEL_QUEUED_RUNS, str(study.pk), who)
    transaction.on_commit(lambda: publish_study(study_id=study.pk, kind="study", payload={}))
    return count


CANCEL_CHUNK = 5000  # queued runs per statement of the background cancel


def study_cancel_queued(*, study_id: Any, who: str = "the system") -> int:
    """The background half of study_cancel: a cancelled study's queued runs ended, a range
    of CANCEL_CHUNK indexes per transaction, the study's counts published after each
    ("cancelling: 40,000 of 100,000"); then any run that holds resources is cancelled as
    study_cancel does (none should: the fence); then the study's end is notified.
    Idempotent: a repeat finds nothing left. How many queued runs it ended."""
    study = Study.objects.filter(pk=study_id, state=StudyState.CANCELLED).first()
    if study is None or study.finished_at is None:
        return 0
    last = study.runs.order_by("-index").values_list("index", flat=True).first()
    done = 0
    for start in range(0, (last or 0) + 1, CANCEL_CHUNK):
        with transaction.atomic():
            ids = runs_cancel_queued(
                study_id=study.pk,
                who=who,
                cancelled_at=study.finished_at,
                start=start,
                stop=start + CANCEL_CHUNK,
            )
        done += len(ids)
        if ids:
            publish_study(study_id=study.pk, kind="study", payload={})
    with transaction.atomic():
        runs_cancel_for_study(study=study, queued=False)
        # its subscribers are told once its runs are all ended (the event's key is the
        # study's end: a repeat of this job tells no one twice)
        jobs.enqueue(Job.NOTIFY_STUDY_ENDED, str(study.pk))
    return done


def study_refresh_state(*, study_id) -> None:
    """Derive the study's state from its runs (called after every run transition)."""
    with transaction.atomic():
        study = Study.objects.select_for_update().filter(pk=study_id).first()
        if study is None or study.state in (StudyState.DRAFT, StudyState.CANCELLED):
            return
        states = _states_present(study.pk)
        if not states:
            return
        active = states & {RunState.PENDING, *HOLDING_STATES}
        if not active and study.spec.get("combine") == "adaptive" and not study.adaptive_end:
            # a batch has ended: the next one is made (or the batches end) by its own task,
            # fenced by the batch number; the study runs on until then
            jobs.enqueue(Job.NEXT_BATCH, str(study.pk), study.batches)
            active = {RunState.RUNNING}
        if active:
            new = (
                StudyState.RUNNING
                if states - {RunState.PENDING, RunState.ADMITTED}
                else StudyState.SUBMITTED
            )
            finished = None
        else:
            new = (
                StudyState.COMPLETED
                if states == {RunState.COMPLETED}
                else StudyState.COMPLETED_WITH_FAILURES
            )
            finished = study.finished_at or timezone.now()
        if new != study.state or finished != study.finished_at:
            # the study's end, found once: refreshes of one study queue on its row lock, so
            # of two last runs ending together only the first refresh sees it go from active
            ended = finished is not None and study.state not in ENDED_STUDY_STATES
            study.state, study.finished_at = new, finished
            study.save(update_fields=["state", "finished_at", "updated_at"])
            transaction.on_commit(
                lambda: publish_study(study_id=study.pk, kind="study", payload={})
            )
            if ended:
                jobs.enqueue(Job.NOTIFY_STUDY_ENDED, str(study.pk))


_STATES_PRESENT_SQL = (  # a probe of the (study, state) index per state: not a scan of the runs
    f"SELECT s FROM unnest(%s::text[]) AS s WHERE EXISTS"
    f" (SELECT 1 FROM {Run._meta.db_table} r WHERE r.study_id = %s AND r.state = s)"
)


def _states_present(study_id: Any) -> set[str]:
    """The states the study's runs are in: a probe per state, so a refresh after each run's
    end costs the same with 100 runs as with 100,000."""
    with connection.cursor() as cur:
        cur.execute(_STATES_PRESENT_SQL, [[s.value for s in RunState], str(study_id)])
        return {row[0] for row in cur.fetchall()}


def studies_settle() -> int:
    """Refresh studies still shown as submitted or running with no active run left (their
    refresh after the last run's end was lost); how many."""
    runs = Run.objects.filter(study_id=OuterRef("pk"))
    ids = list(
        Study.objects.filter(state__in=[StudyState.SUBMITTED, StudyState.RUNNING])
        .filter(Exists(runs))  # a study without runs has no state to derive: left alone
        .exclude(Exists(runs.filter(state__in=ACTIVE_STATES)))
        .values_list("pk", flat=True)
    )
    for study_id in ids:
        jobs.send(Job.REFRESH_STUDY, str(study_id))
    # a cancel whose background half was lost (a worker restarted): it is done again
    cancelling = Study.objects.filter(state=StudyState.CANCELLED).filter(
        Exists(runs.filter(state=RunState.PENDING))
    )
    for study_id in cancelling.values_list("pk", flat=True):
        jobs.send(Job.CANCEL_QUEUED_RUNS, str(study_id))
    # a deletion whose background half was lost: it goes on where it stopped
    deletions_resume()
    return len(ids)
