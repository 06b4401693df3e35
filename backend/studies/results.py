"""A study's results as downloads (`results/` JSON, `results.csv`), streamed.

The rows come from one server-side cursor in pages of `PAGE` (one statement on the
(study, index) index, one snapshot: a row is written once, whatever runs change meanwhile),
and go out as they come: the first byte leaves before the last row is read, and memory holds
one page whatever the study's size. `StreamedResponse` sends them under ASGI without
collecting them first.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any, cast

import orjson
from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse
from django.utils import timezone
from rest_framework.utils.encoders import JSONEncoder

from studies.choices import EndReason, Reduce, RunState, StudyState
from studies.figures import core_hours_of
from studies.models import Run, Study

PAGE = 2000  # rows fetched per round trip of the cursor, and written per chunk

_FIELDS = (
    "id_text",
    "index",
    "parameters_text",
    "state",
    "objectives_text",
    "partial_objectives_text",
    "oscillation_text",
    "iterations",
    "started_at",
    "finished_at",
    "end_reason",
    "attempt",
    "trust",
    "reused_from_text",
    "processes",
    "released_at",
    "peak_memory_bytes",
    "cpu_seconds",
    "carried_core_hours",
)
# read as text and decoded here: orjson is 5x faster than the json module Django's JSONField
# uses (1.1 of 2.5 s profiled for 100,000 rows), and PostgreSQL writes a UUID's text itself
_AS_TEXT = {
    f"{name}_text": Cast(name, TextField())
    for name in ("id", "parameters", "objectives", "partial_objectives", "reused_from")
}
_AS_TEXT["oscillation_text"] = Cast(KeyTransform("oscillation", "trust_detail"), TextField())


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # beyond orjson (an integer over 64 bits): the json module
        return json.loads(text)


def _amplitudes(oscillation: Any) -> dict[str, float]:
    """The swing of each objective that oscillates (trust_detail.oscillation)."""
    return {
        name: m["amplitude"]
        for name, m in (oscillation or {}).items()
        if isinstance(m, dict) and m.get("oscillating")
    }


def _wall_seconds(started: datetime | None, finished: datetime | None) -> float | None:
    return (finished - started).total_seconds() if started and finished else None


def study_result_rows(*, study: Study) -> Iterator[dict[str, Any]]:
    """The study's runs as result rows, in index order, read through a server-side cursor
    (inside a transaction, so PostgreSQL sends rows as they are fetched instead of
    materializing the whole result first). A cancelled study's queued runs, still being
    ended in the background (state.study_cancel_queued), are cancelled here as in every
    other read."""
    cancelled = study.state == StudyState.CANCELLED
    now = timezone.now()
    with transaction.atomic():
        rows = (
            Run.objects.filter(study=study)
            .order_by("index")
            .annotate(**_AS_TEXT)
            .values_list(*_FIELDS)
            .iterator(chunk_size=PAGE)
        )
        for (
            run_id,
            index,
            params,
            state,
            objectives,
            partial,
            oscillation,
            iters,
            started,
            finished,
            end,
            att,
            trust,
            reused_from,
            processes,
            released,
            peak_memory,
            cpu_seconds,
            carried,
        ) in rows:
            if cancelled and state == RunState.PENDING:
                state, end = RunState.CANCELLED.value, EndReason.CANCELLED_BY_USER.value
            yield {
                "run": run_id,
                "index": index,
                "parameters": _loads(params),
                "state": state,
                "objectives": _loads(objectives) or {},
                # a run that did not complete: what its partial series give, apart
                "partial_objectives": _loads(partial) or {},
                "amplitudes": _amplitudes(_loads(oscillation)),
                "iterations": iters,
                "wall_seconds": _wall_seconds(started, finished),
                "end_reason": end,
                "attempts": att,
                "trust": trust,
                # the run whose results this one shows (not computed: reused), else null
                "reused_from": reused_from or None,
                "peak_memory_bytes": peak_memory,
                "cpu_seconds": cpu_seconds,
                "core_hours": core_hours_of(
                    processes=processes,
                    started_at=started,
                    released_at=released,
                    finished_at=finished,
                    now=now,
                    carried=carried,
                ),
            }


def _pages(items: Iterator[Any]) -> Iterator[list[Any]]:
    page: list[Any] = []
    for item in items:
        page.append(item)
        if len(page) >= PAGE:
            yield page
            page = []
    if page:
        yield page


def results_json_chunks(*, study: Study) -> Iterator[str]:
    """`{"study", "parameters", "objectives", "rows": [...], "last_seq"}` as DRF's JSON
    renderer writes it (compact, UTF-8, no NaN), a page of rows per chunk."""

    def dumps(value: Any) -> str:
        return json.dumps(
            value, cls=JSONEncoder, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )

    head = {
        "study": str(study.id),
        "parameters": list((study.spec.get("parameters") or {}).keys()),
        "objectives": list((study.objectives or {}).keys()),
    }
    yield dumps(head)[:-1] + ',"rows":['
    first = True
    for page in _pages(study_result_rows(study=study)):
        text = ",".join(dumps(row) for row in page)
        yield text if first else "," + text
        first = False
    yield f'],"last_seq":{dumps(study.event_seq)}}}'


def _number(value: Any) -> str:
    return "" if value is None else repr(value)


def _cell(value):
    """A text value as a spreadsheet will not run it as a formula (CSV injection): one that
    starts like a formula gets a leading apostrophe. Numbers stay numbers."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _blank(value: Any) -> Any:
    return "" if value is None else value


def study_parameter_names(study: Study) -> list[str]:
    """The spec's parameters, then any that runs of an old extension carry beyond them."""
    params = list((study.spec.get("parameters") or {}).keys())
    return params + [n for n in study.extra_parameter_names or () if n not in params]


def results_csv_chunks(*, study: Study) -> Iterator[str]:
    """results.csv: a header, then one line per run in index order, a page per chunk.

    The objective columns hold results only (empty for a run that did not complete);
    `partial.NAME` columns what an incomplete run's partial series give, and
    `amplitude.NAME` (mean_last objectives) the swing of an oscillating one."""
    params = study_parameter_names(study)
    specs = study.objectives or {}
    objectives = list(specs.keys())
    averaged = [o for o, spec in specs.items() if spec.get("reduce") == Reduce.MEAN_LAST]
    out = io.StringIO()
    writer = csv.writer(out)

    def flush() -> str:
        text = out.getvalue()
        out.seek(0)
        out.truncate()
        return text

    writer.writerow(
        [
            "run",
            "index",
            *params,
            "state",
            "trust",
            *objectives,
            *[f"amplitude.{o}" for o in averaged],
            *[f"partial.{o}" for o in objectives],
            # a parameter may itself be called `iterations` (the airfoil template's is)
            "solver_iterations" if "iterations" in params else "iterations",
            "wall_seconds",
            "end_reason",
            "reused_from",
            "peak_memory_bytes",
            "cpu_seconds",
            "core_hours",
        ]
    )
    yield flush()
    for page in _pages(study_result_rows(study=study)):
        for row in page:
            writer.writerow(
                [
                    row["run"],
                    row["index"],
                    *[_cell(row["parameters"].get(p, "")) for p in params],
                    row["state"],
                    row["trust"],
                    *[_number(row["objectives"].get(o)) for o in objectives],
                    *[_number(row["amplitudes"].get(o)) for o in averaged],
                    *[_number(row["partial_objectives"].get(o)) for o in objectives],
                    "" if row["iterations"] is None else row["iterations"],
                    "" if row["wall_seconds"] is None else f"{row['wall_seconds']:.3f}",
                    row["end_reason"],
                    row["reused_from"] or "",
                    _blank(row["peak_memory_bytes"]),
                    "" if row["cpu_seconds"] is None else f"{row['cpu_seconds']:.3f}",
                    "" if row["core_hours"] is None else f"{row['core_hours']:.6f}",
                ]
            )
        yield flush()


class StreamedResponse(StreamingHttpResponse):
    """A streamed response whose synchronous chunks (reads from the database) are made one at
    a time in the request's own thread under ASGI, and sent as each is made. (Django's ASGI
    handler collects a synchronous iterator whole before it sends a byte.) Under WSGI and
    the test client it is an ordinary streamed response."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = iter(cast(Iterator[bytes], self.streaming_content))
        # thread-sensitive: every step in the thread that holds the request's connection
        step = sync_to_async(lambda: next(chunks, None), thread_sensitive=True)
        while (chunk := await step()) is not None:
            yield chunk
