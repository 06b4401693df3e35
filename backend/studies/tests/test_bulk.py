"""Runs written as one COPY (studies/bulk.py): what goes in comes back, whatever it holds."""

from __future__ import annotations

import time
import uuid

from django.utils import timezone

from studies.bulk import copy_text, runs_copy, time_ordered_uuids
from studies.choices import RunState, WaitReason
from studies.models import Run
from studies.services import study_create


def test_values_with_tabs_newlines_and_backslashes_come_back_as_they_went_in(api) -> None:
    study = study_create(
        tenant=api.tenant,
        owner=api.tenant.user,
        spec={"name": "s", "template": "cavity", "parameters": {"lid_velocity": {"values": [1]}}},
    )
    template = Run(
        study=study,
        tenant_id=study.tenant_id,
        backend=study.backend,
        processes=2,
        nodes=1,
        memory_gb=1.5,
        queued_at=timezone.now(),
        state=RunState.PENDING,
        wait_reason=WaitReason.QUEUED,
        message="a\tmessage\nwith \\ in it",
    )
    awkward = ["tab\there", "new\nline", "back\\slash", 'quote " and \\n literal', "\\N", ""]
    points = [(i, {"label": text}, {"label": text, "x": i * 0.5}) for i, text in enumerate(awkward)]
    assert runs_copy(template=template, points=points) == len(awkward)
    runs = list(Run.objects.filter(study=study).order_by("index"))
    assert [r.parameters["label"] for r in runs] == awkward
    assert [r.context["x"] for r in runs] == [i * 0.5 for i in range(len(awkward))]
    assert {(r.message, r.processes, r.memory_gb, r.state) for r in runs} == {
        ("a\tmessage\nwith \\ in it", 2, 1.5, "pending")
    }
    assert all(r.exit_code is None and r.stop_requested is False for r in runs)
    assert len({r.pk for r in runs}) == len(awkward)


def test_the_runs_ids_are_distinct_version_7_uuids_in_ascending_order() -> None:
    before = time.time_ns() // 1_000_000
    ids = time_ordered_uuids(5000)
    later = time_ordered_uuids(10)
    assert len(set(ids)) == 5000
    assert ids == sorted(ids)
    # a later block sorts after (unless made in the same millisecond)
    assert ids[-1] < min(later) or ids[-1][:13] == later[0][:13]
    parsed = [uuid.UUID(i) for i in ids]
    assert {u.version for u in parsed} == {7}
    assert {u.variant for u in parsed} == {uuid.RFC_4122}
    # the first 48 bits are the time of making, in milliseconds
    assert before <= parsed[0].int >> 80 <= time.time_ns() // 1_000_000
    assert [i.lower() for i in ids] == [str(u) for u in parsed]


def test_copy_text_writes_null_booleans_and_escapes() -> None:
    assert copy_text(None) == "\\N"
    assert (copy_text(True), copy_text(False)) == ("t", "f")
    assert copy_text("a\tb\\c\nd\re") == "a\\tb\\\\c\\nd\\re"
