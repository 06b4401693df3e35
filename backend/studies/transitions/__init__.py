"""The one place a run's state changes.

    pending → admitted → provisioning → running → completed | failed | cancelled
        ↑__________________________|  (requeued: a retry, or a backend that could not take it)

Every change here is a conditional UPDATE fenced by the state(s) it leaves and by the
attempt, so a stale worker or agent can never overwrite a newer attempt, and every change
publishes its live event (studies.events) in the same step, after commit. What a change
leaves to do elsewhere (schedule the tenant, kill or release what the backend holds,
refresh the study) is enqueued by name (core.jobs): those steps live in higher layers.

Callers decide *whether* (a retry left? the backend's words?); this package only writes.
By step: continuation (an ended run queued again to go on from one of its writes), admission (pending → admitted), reuse (pending → completed from an identical
run's results), dispatch (admitted → provisioning → running), ending (an attempt's end,
requeue, failure), cancellation; tokens (an attempt's bearer token) and effects (what every
change leaves to do) serve them. Callers use `from studies import transitions` and the
names below.
"""

from studies.transitions.admission import runs_admit
from studies.transitions.cancellation import run_cancel, runs_cancel_for_study, runs_cancel_queued
from studies.transitions.continuation import runs_record_warm_sources, runs_resume
from studies.transitions.dispatch import (
    run_record_provenance,
    run_record_superseded_handle,
    run_report_running,
    runs_claim,
    runs_record_handles,
)
from studies.transitions.effects import MESSAGE_MAX, PUBLISH_CHUNK, PUBLISH_INLINE, RESULT_FIELDS
from studies.transitions.ending import (
    run_dispatch_later,
    run_end,
    run_fail,
    run_requeue,
    run_stop_by_policy,
    runs_fail_waiting_for_image,
)
from studies.transitions.reuse import REUSED_MESSAGE, runs_hand_over_reused, runs_reuse
from studies.transitions.tokens import hash_run_token, run_token, run_token_is_of

__all__ = [
    "MESSAGE_MAX",
    "PUBLISH_CHUNK",
    "PUBLISH_INLINE",
    "RESULT_FIELDS",
    "REUSED_MESSAGE",
    "hash_run_token",
    "run_cancel",
    "run_dispatch_later",
    "run_end",
    "run_fail",
    "run_record_provenance",
    "run_record_superseded_handle",
    "run_report_running",
    "run_requeue",
    "run_stop_by_policy",
    "run_token",
    "run_token_is_of",
    "runs_admit",
    "runs_cancel_for_study",
    "runs_record_warm_sources",
    "runs_resume",
    "runs_cancel_queued",
    "runs_claim",
    "runs_fail_waiting_for_image",
    "runs_hand_over_reused",
    "runs_record_handles",
    "runs_reuse",
]
