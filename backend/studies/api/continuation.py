"""The API's shapes of a run's continuation: what a request asks (one run, or a selection of
a study's runs), what a run may go on from, and what a selection did."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from studies.continuation import MAX_ITERATIONS, MAX_SELECTION, ResumeRequest, resume_problem
from studies.models import Run


class ContinueSerializer(serializers.Serializer):
    iterations = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_ITERATIONS,
        help_text="time steps to add from the write (the case's deltaT each); omitted: to the "
        "case's endTime (a restart from an earlier write)",
    )
    time = serializers.CharField(
        required=False,
        max_length=40,
        help_text='"latest" (the default), or one of the run\'s `continuation.writes`',
    )
    settings = serializers.DictField(
        child=serializers.DictField(child=serializers.CharField(max_length=200)),
        required=False,
        help_text="changed settings, by file (controlDict, fvSolution, fvSchemes) and dotted "
        'key: {"fvSolution": {"relaxationFactors.equations.U": "0.5"}}; numbers and words '
        "only; kept in the run's provenance",
    )


class StudyContinueSerializer(ContinueSerializer):
    runs = serializers.ListField(
        child=serializers.UUIDField(),
        min_length=1,
        max_length=MAX_SELECTION,
        help_text="the study's runs to continue (those that cannot are listed as skipped)",
    )


class SkippedRunSerializer(serializers.Serializer):
    run = serializers.UUIDField()
    index = serializers.IntegerField()
    reason = serializers.CharField()


class ContinuedSerializer(serializers.Serializer):
    continued = serializers.ListField(child=serializers.UUIDField())
    skipped = SkippedRunSerializer(many=True)


class ResumedFromSerializer(serializers.Serializer):
    # a field named `source`: DRF's serializer metaclass takes declared fields out of the
    # class, so it never shadows Field.source, which the stubs cannot see
    source = serializers.UUIDField(  # type: ignore[assignment]
        allow_null=True,
        help_text="a warm start: the neighbouring run whose converged fields it started from "
        "(null: its own earlier attempt)",
    )
    source_index = serializers.IntegerField(allow_null=True, help_text="that run's index")
    mapped = serializers.BooleanField(
        help_text="a warm start from a run of another mesh, its write mapped onto this run's "
        "mesh by mapFields"
    )
    attempt = serializers.IntegerField(help_text="the attempt whose write it started from")
    time = serializers.CharField(help_text="the write's time")
    iterations = serializers.IntegerField(allow_null=True, help_text="time steps added")
    settings = serializers.DictField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="the settings changed, by file and dotted key",
    )
    by = serializers.CharField(allow_blank=True, help_text="who asked ('': the portal)")
    at = serializers.DateTimeField(allow_null=True)


class ContinuationSerializer(serializers.Serializer):
    writes = serializers.ListField(
        child=serializers.CharField(),
        help_text="the times its last attempt wrote completely, earliest first: what it may "
        "go on from",
    )
    problem = serializers.CharField(
        allow_blank=True,
        help_text="why it cannot go on now (empty: it can, with more iterations)",
    )
    resumed_from = ResumedFromSerializer(
        allow_null=True, help_text="its current attempt went on from an earlier one's write"
    )


def continuation_of(run: Run) -> dict[str, Any]:
    """ContinuationSerializer's data for a run (its study and backend loaded)."""
    writes = run.writes if isinstance(run.writes, dict) else {}
    times = (
        [str(t) for t in writes.get("times") or []] if writes.get("attempt") == run.attempt else []
    )
    problem = resume_problem(run, ResumeRequest(iterations=1, time="latest", settings={}))
    resume = run.resume if isinstance(run.resume, dict) else None
    if resume is not None and resume.get("time") == "latest":
        # requeued after a loss: the write its agent picked, once it said (else none yet)
        picked = (run.provenance or {}).get("resumed_from")
        resume = {**resume, **picked} if isinstance(picked, dict) else None
    if resume is not None:  # a warm start's or a requeue's: asked by the portal, not a user
        resume = {**resume, "by": resume.get("by") or "", "at": resume.get("at")}
    return {
        "writes": times,
        "problem": problem[1] if problem else "",
        "resumed_from": (
            {
                k: resume.get(k)
                for k in ("source", "source_index", "attempt", "time", "iterations", "by", "at")
            }
            | {"settings": resume.get("settings") or {}, "mapped": resume.get("map") is True}
            if resume
            else None
        ),
    }
