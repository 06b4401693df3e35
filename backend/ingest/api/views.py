"""The ingest API the run agents report to (docs/agent-protocol.md).

Authenticated first, from the headers and the URL alone (ingest.auth: 401, telling nothing of
the run; the body is not read), its body capped by its declared length (411, 413), then
parsed and fenced by the attempt number (409: the agent of an attempt that is over stops) and
by the attempt's end (409 once its final report is in: the token opens nothing any more).
Under the ASGI server the gate in front of Django (ingest.api.gate) has applied the same
checks before any of the body was read; these views apply them again for every other way in.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

import orjson
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ApplicationError, NotFound, RunEnded, StaleAttempt
from core.http import file_download
from core.ids import parse_uuid
from core.schemas import component_ref, validate
from dispatch import pilots
from ingest import services
from ingest.api.envelope import plain_telemetry_batch
from ingest.auth import (
    MAX_ATTEMPT,
    RunTokenRefused,
    attempt_named,
    attempt_required,
    bearer_token,
    body_length,
    body_limit,
    reported_attempt_check,
    run_caller,
)
from runs import archives
from runs.services import (
    run_end_on_refused_report,
    run_heartbeat,
    run_heartbeat_fenced,
    run_report_state,
)
from studies.choices import TERMINAL_STATES, RunState
from studies.models import Run
from studies.transitions import hash_run_token, run_report_running, run_token_is_of
from telemetry.batches import check_log_lines
from telemetry.ingest import batch_status, telemetry_check_batch
from telemetry.watch import interval_for, is_watched, telemetry_interval


def _run_for(request, run_id, attempt: int) -> Run:
    pk = parse_uuid(run_id)
    run = Run.objects.select_related("study").filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound("no such run")
    _check_token(_bearer(request), run, attempt)
    return run


def _run_checked(request, run_id, attempt: int) -> Run:
    """As _run_for, reading only what the check needs: for services that lock and read the
    run themselves."""
    pk = parse_uuid(run_id)
    fields = ("token_hash", "attempt", "state", "results_at")
    rows = list(Run.objects.filter(pk=pk).values_list(*fields)[:1]) if pk else []
    if not rows:
        raise NotFound("no such run")
    run = Run(pk=pk, **dict(zip(fields, rows[0], strict=True)))
    _check_token(_bearer(request), run, attempt)
    return run


def _bearer(request) -> str:
    return bearer_token(request.META.get("HTTP_AUTHORIZATION", ""))


def _check_token(token: str, run: Run, attempt: int) -> None:
    """Whether the caller's attempt still takes reports. The current attempt's token
    passes the attempt fence (409 for another attempt) and the end fence (409 once its final
    report is in); an earlier attempt's token (its agent, still alive) is told 409 to stop;
    any other caller 401, whatever the run and the attempt it names."""
    if token and run.token_hash and hmac.compare_digest(hash_run_token(token), run.token_hash):
        if run.attempt != attempt:
            raise StaleAttempt()
        if run.state in TERMINAL_STATES and run.results_at is not None:
            raise RunEnded(run.state)
        return
    if (
        token
        and 0 < attempt <= run.attempt
        and run_token_is_of(token, run_id=run.pk, attempt=int(attempt))
    ):
        raise StaleAttempt()  # that attempt is over (superseded, requeued or failed)
    raise RunTokenRefused()


AGENT_MESSAGES = Path(__file__).resolve().parents[1] / "schemas" / "agent-messages.json"
ANSWER = {200: component_ref("AgentAnswer")}
_ATTEMPT_TEXT = (
    "the attempt the agent was started for (run.json's attempt), whose token the request "
    "carries: the portal authenticates the caller from it and the token before it reads the "
    "body"
)
ATTEMPT = OpenApiParameter(
    "attempt",
    int,
    description=f"{_ATTEMPT_TEXT} (agents before 1.2 name it in the body only)",
)
ATTEMPT_REQUIRED = OpenApiParameter("attempt", int, required=True, description=_ATTEMPT_TEXT)


def message_of(data: Any, definition: str) -> dict[str, Any]:
    """A report's body, checked by the agent messages' schema (ingest/schemas/
    agent-messages.json, `$defs/<definition>`): a 400 naming the field. Its series and log
    lines, up to 200,000 points and 5,000 lines, are checked in bulk (telemetry.batches)."""
    envelope = data
    if isinstance(data, dict):
        envelope = dict(data)
        if isinstance(envelope.get("series"), dict):
            envelope["series"] = {}
        if isinstance(envelope.get("log"), list):
            check_log_lines(envelope["log"])
            envelope["log"] = []
    if definition == "TelemetryBatch" and plain_telemetry_batch(envelope):
        return data  # the common batch: valid by the schema too, without walking it
    validate(AGENT_MESSAGES, envelope, definition=definition, what=f"the {definition} message")
    return data


def _request(definition: str) -> dict[str, Any]:
    return {"application/json": component_ref(definition)}


class OrjsonParser(JSONParser):
    """JSON bodies parsed by orjson: telemetry batches carry up to 200,000 points."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return orjson.loads(stream.read())
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


# who calls is known (authenticate) and the body's declared length checked before anything
# reads the body (request.data); no docstrings here: the API schema would show them
class _IngestView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    parser_classes = [OrjsonParser]
    message = ""  # the request body's $defs name in the agent messages' schema
    endpoint = ""  # the URL's last part (ingest.auth.body_limit)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.authenticate(request, **kwargs)
        body_length(
            declared=request.META.get("CONTENT_LENGTH"),
            method=request.method,
            limit=body_limit(self.endpoint),
            action=self.endpoint,
        )

    def authenticate(self, request, **kwargs) -> None:
        raise NotImplementedError

    def _validated(self, request) -> dict[str, Any]:
        return message_of(request.data, self.message)


class _RunView(_IngestView):
    attempt: int  # a call of a run's agent: the attempt its token is of

    def authenticate(self, request, **kwargs) -> None:
        named = attempt_named(request.query_params.get("attempt"))
        self.attempt = run_caller(run_id=kwargs["run_id"], token=_bearer(request), attempt=named)

    def _validated(self, request) -> dict[str, Any]:
        data = super()._validated(request)
        reported_attempt_check(reported=data["attempt"], attempt=self.attempt)
        return data


class IngestStateView(_RunView):
    message = "StateReport"
    endpoint = "state"

    @extend_schema(
        request=_request(message), responses=ANSWER, parameters=[ATTEMPT], tags=["ingest"]
    )
    def post(self, request, run_id):
        try:
            data = self._validated(request)
            batch = None
            if data["state"] != RunState.RUNNING:
                batch = telemetry_check_batch(
                    series=data.get("series") or {}, log=data.get("log") or []
                )
        except ApplicationError as exc:
            if exc.status == 400:  # for what it holds (not for whose it is)
                _final_report_refused(request, run_id, exc)
            raise
        pk, token = parse_uuid(run_id), _bearer(request)
        if batch is None:
            if pk and token:  # one statement, usually
                stop = run_report_running(
                    run_id=pk, attempt=data["attempt"], token_hash=hash_run_token(token)
                )
                if stop is not None:
                    return Response({"stop": stop, "interval": telemetry_interval(pk)})
            run = _run_checked(request, run_id, data["attempt"])  # 404, 401, 409, or a repeat
            stop = run_report_state(run=run, attempt=data["attempt"], state=data["state"])
            return Response({"stop": bool(stop), "interval": telemetry_interval(run.pk)})
        # the solver is done: the token and the attempt are checked, then the cores (on the
        # portal's own machines), the last points and the state go in one transaction
        run = _run_checked(request, run_id, data["attempt"])
        duplicate = services.final_report(
            run_id=run.pk,
            attempt=data["attempt"],
            state=data["state"],
            batch=batch,
            exit_code=data.get("exit_code"),
            reason=data.get("reason", ""),
            message=data.get("message", "").replace("\x00", ""),  # a log's NULs, dropped
            solver_converged=data.get("solver_converged", False),
            iterations=data.get("iterations"),
            last_time=data.get("last_time"),
            provenance=data.get("provenance"),
            disk_bytes=data.get("disk_bytes"),
            peak_memory_bytes=data.get("peak_memory_bytes"),
            cpu_seconds=data.get("cpu_seconds"),
            batch_seq=data.get("batch_seq"),
            writes=data.get("writes"),
        )
        return Response({"stop": False, "duplicate": True} if duplicate else {"stop": False})


def _final_report_refused(request, run_id, problem: ApplicationError) -> None:
    """A final report refused for what it holds (a 400), from its run's agent: when the
    run's cores went back early (its archiving heartbeat), the attempt ends, failed, rather
    than run on counted as free (runs.services.run_end_on_refused_report)."""
    body = request.data if isinstance(request.data, dict) else {}
    attempt, pk, token = body.get("attempt"), parse_uuid(run_id), _bearer(request)
    if body.get("state") not in TERMINAL_STATES or not (pk and token):
        return
    if type(attempt) is not int or not 1 <= attempt <= MAX_ATTEMPT:
        return
    run_end_on_refused_report(
        run_id=pk, attempt=attempt, token_hash=hash_run_token(token), problem=problem.message
    )


class IngestHeartbeatView(_RunView):
    message = "Heartbeat"
    endpoint = "heartbeat"

    @extend_schema(
        request=_request(message), responses=ANSWER, parameters=[ATTEMPT], tags=["ingest"]
    )
    def post(self, request, run_id):
        data = self._validated(request)
        pk, token = parse_uuid(run_id), _bearer(request)
        if pk and token:  # one statement in the common case
            stop = run_heartbeat_fenced(
                run_id=pk,
                attempt=data["attempt"],
                token_hash=hash_run_token(token),
                phase=data.get("phase", ""),
                resources=data.get("resources"),
            )
            if stop is not None:
                return Response({"stop": stop, "interval": telemetry_interval(pk)})
        # the slow path tells apart what the fence refused (404, 401, 409, a run that ended)
        run = _run_for(request, run_id, data["attempt"])
        stop = run_heartbeat(
            run=run,
            attempt=data["attempt"],
            phase=data.get("phase", ""),
            resources=data.get("resources"),
        )
        return Response({"stop": stop, "interval": telemetry_interval(run.pk)})


class IngestTelemetryView(_RunView):
    message = "TelemetryBatch"
    endpoint = "telemetry"

    @extend_schema(
        request=_request(message), responses=ANSWER, parameters=[ATTEMPT], tags=["ingest"]
    )
    def post(self, request, run_id):
        data = self._validated(request)
        pk, token = parse_uuid(run_id), _bearer(request)
        if pk and token:
            # asked once: whether the batch is published, and the pace the agent is told (a
            # subscriber marking the run meanwhile repairs the gap from the next event's seq)
            watched = is_watched(pk)
            stop = services.telemetry_report_fenced(
                run_id=pk,
                attempt=data["attempt"],
                token_hash=hash_run_token(token),
                series=data.get("series") or {},
                log=data.get("log") or [],
                watched=watched,
                status=batch_status(data),
                batch_seq=data.get("batch_seq"),
            )
            if stop is not None:
                return Response({"stop": stop, "interval": interval_for(watched=watched)})
        # the slow path tells apart what the fence refused (404, 401, 409, a run that ended, a
        # batch sent again)
        run = _run_for(request, run_id, data["attempt"])
        taken = services.telemetry_report(
            run=run,
            attempt=data["attempt"],
            series=data.get("series") or {},
            log=data.get("log") or [],
            status=batch_status(data),
            batch_seq=data.get("batch_seq"),
        )
        answer = {"stop": taken.stop, "interval": telemetry_interval(run.pk)}
        return Response({**answer, "duplicate": True} if taken.duplicate else answer)


class IngestArchiveView(_RunView):
    endpoint = "archive"

    @extend_schema(
        request={"application/gzip": bytes},
        responses={200: None},
        parameters=[ATTEMPT_REQUIRED],
        tags=["ingest"],
    )
    def put(self, request, run_id):
        attempt = attempt_required(request.query_params.get("attempt"))
        run = _run_for(request, run_id, attempt)
        size = archives.run_store_archive(
            run=run, attempt=attempt, stream=request._request, max_bytes=body_limit("archive")
        )
        return Response({"bytes": size})


class IngestCaseView(_RunView):
    """The case source as tar.gz, for agents on machines without the portal's files (VMs)."""

    endpoint = "case"

    @extend_schema(
        responses={(200, "application/gzip"): bytes}, parameters=[ATTEMPT_REQUIRED], tags=["ingest"]
    )
    def get(self, request, run_id):
        attempt = attempt_required(request.query_params.get("attempt"))
        run = _run_for(request, run_id, attempt)
        path = archives.run_case_archive(run=run, attempt=attempt)
        handle = path.open("rb")
        path.unlink()  # the open handle keeps the data until the response is sent
        return file_download(handle, filename="case.tar.gz", content_type="application/gzip")


# --- warm pools: a worker's pilot (docs/pools.md) ------------------------------------------


def _worker(request, worker_id) -> Any:
    pk = parse_uuid(worker_id)
    if pk is None:
        raise pilots.WorkerAuth()
    return pilots.worker_authenticated(worker_id=pk, token=_bearer(request))


PILOT_ANSWER = {200: component_ref("PilotAnswer")}


class _PilotView(_IngestView):
    endpoint = "pilot"

    def authenticate(self, request, **kwargs) -> None:
        self.worker = _worker(request, kwargs["worker_id"])

    def post(self, request, worker_id):
        return Response(self.act(self.worker, self._validated(request)))

    def act(self, worker, data: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


def _run_ref(item: dict[str, Any], field: str) -> tuple[str, int]:
    pk = parse_uuid(item["run_id"])
    if pk is None:
        name = f"{field}.run_id" if field else "run_id"
        raise ApplicationError(f"{name} must be a run's id (a UUID)", field=name)
    return str(pk), int(item["attempt"])


class PilotRegisterView(_PilotView):
    message = "PilotRegister"

    @extend_schema(request=_request(message), responses=PILOT_ANSWER, tags=["ingest"])
    def post(self, request, worker_id):
        return super().post(request, worker_id)

    def act(self, worker, data):
        return pilots.worker_register(
            worker=worker, cores=data.get("cores"), cache=data.get("cache")
        )


class PilotLeaseView(_PilotView):
    message = "PilotLease"

    @extend_schema(request=_request(message), responses=PILOT_ANSWER, tags=["ingest"])
    def post(self, request, worker_id):
        return super().post(request, worker_id)

    def act(self, worker, data):
        return pilots.worker_lease(worker=worker, free_cores=data["free_cores"])


class PilotHeartbeatView(_PilotView):
    message = "PilotHeartbeat"

    @extend_schema(request=_request(message), responses=PILOT_ANSWER, tags=["ingest"])
    def post(self, request, worker_id):
        return super().post(request, worker_id)

    def act(self, worker, data):
        runs = [_run_ref(x, f"runs[{i}]") for i, x in enumerate(data["runs"])]
        return pilots.worker_heartbeat(worker=worker, runs=runs, cache=data.get("cache"))


class PilotReleaseView(_PilotView):
    message = "PilotRelease"

    @extend_schema(request=_request(message), responses=PILOT_ANSWER, tags=["ingest"])
    def post(self, request, worker_id):
        return super().post(request, worker_id)

    def act(self, worker, data):
        run_id, attempt = _run_ref(data, "")
        return pilots.worker_release(
            worker=worker, run_id=run_id, attempt=attempt, exit_code=data.get("exit_code")
        )
