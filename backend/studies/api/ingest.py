"""The ingest API the run agents report to (docs/agent-protocol.md).

Authenticated by the per-run bearer token; every call is fenced by the attempt number.
"""

from __future__ import annotations

import hmac

import orjson
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ApplicationError, ErrorCode, NotFound
from core.http import file_download
from studies import services
from studies.choices import RunState
from studies.models import Simulation
from studies.selectors import _uuid
from telemetry.services import (
    telemetry_check_batch,
    telemetry_final_batch,
    telemetry_ingest,
    telemetry_ingest_fenced,
)
from telemetry.watch import interval_for, is_watched, telemetry_interval


class _Auth(ApplicationError):
    status = 401

    def __init__(self) -> None:
        super().__init__("missing or wrong run token", code=ErrorCode.UNAUTHENTICATED)


def _run_for(request, run_id, attempt: int) -> Simulation:
    pk = _uuid(run_id)
    try:
        run = Simulation.objects.select_related("study").get(pk=pk) if pk else None
    except Simulation.DoesNotExist:
        run = None
    if run is None:
        raise NotFound("no such run")
    _check_token(request, run.token_hash, run.attempt, attempt)
    return run


def _run_checked(request, run_id, attempt: int) -> Simulation:
    """As _run_for, reading only what the check needs: for services that lock and read the
    run themselves."""
    pk = _uuid(run_id)
    row = Simulation.objects.filter(pk=pk).values_list("token_hash", "attempt")[:1] if pk else []
    if not row:
        raise NotFound("no such run")
    _check_token(request, row[0][0], row[0][1], attempt)
    return Simulation(pk=pk)


def _bearer(request) -> str:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    return header[7:] if header.lower().startswith("bearer ") else ""


def _check_token(request, token_hash: str, run_attempt: int, attempt: int) -> None:
    token = _bearer(request)
    if run_attempt != attempt:
        raise services.StaleAttempt()
    if (
        not token
        or not token_hash
        or not hmac.compare_digest(services.hash_run_token(token), token_hash)
    ):
        raise _Auth()


def _attempt_param(request) -> int:
    try:
        return int(request.query_params.get("attempt", ""))
    except ValueError:
        raise ApplicationError("give ?attempt=N", field="attempt") from None


class AttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(min_value=1)


class HeartbeatSerializer(AttemptSerializer):
    phase = serializers.CharField(required=False, allow_blank=True, max_length=40)
    resources = serializers.DictField(required=False)


class _LogLines(serializers.ListField):
    """A list of log lines, checked in one pass (a CharField per line cost more than storing
    the batch); lines are cut to their first 2,000 characters when stored."""

    child = serializers.CharField(allow_blank=True, trim_whitespace=False)

    def to_internal_value(self, data):
        if not isinstance(data, list) or not all(isinstance(line, str) for line in data):
            raise serializers.ValidationError("log must be a list of strings (the new lines)")
        text = "".join(data)
        if "\x00" in text:
            raise serializers.ValidationError("log lines must not contain NUL characters")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise serializers.ValidationError(
                "log lines must be valid Unicode (no lone surrogates)"
            ) from None
        return data


class TelemetryInSerializer(AttemptSerializer):
    # name → [[x, y], …]; the points are checked once, by telemetry_ingest (a DRF field per
    # point would cost more than storing them)
    series = serializers.DictField(required=False, default=dict)
    log = _LogLines(required=False, default=list)


class StateSerializer(AttemptSerializer):
    state = serializers.ChoiceField(
        choices=[RunState.RUNNING, RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED]
    )
    exit_code = serializers.IntegerField(required=False, allow_null=True)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=40)
    message = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    solver_converged = serializers.BooleanField(required=False, default=False)
    iterations = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text="the solver's time steps"
    )
    last_time = serializers.FloatField(
        required=False, allow_null=True, help_text="the solver's last time (or iteration)"
    )
    # a final state may carry the attempt's last telemetry batch (one request less per run)
    series = serializers.DictField(
        required=False, default=dict, help_text="with a final state: the last telemetry batch"
    )
    log = _LogLines(required=False, default=list)


class StopSerializer(serializers.Serializer):
    stop = serializers.BooleanField()
    interval = serializers.FloatField(
        required=False,
        help_text="seconds between telemetry batches from now on: short while someone watches "
        "the run live, long while nobody does",
    )


class OrjsonParser(JSONParser):
    """JSON bodies parsed by orjson: telemetry batches carry up to 200,000 points."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return orjson.loads(stream.read())
        except orjson.JSONDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


class _IngestView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    parser_classes = [OrjsonParser]
    input_serializer: type[serializers.Serializer] = AttemptSerializer

    def _validated(self, request) -> dict:
        ser = self.input_serializer(data=request.data)
        ser.is_valid(raise_exception=True)
        return ser.validated_data


class IngestStateView(_IngestView):
    input_serializer = StateSerializer

    @extend_schema(request=StateSerializer, responses=StopSerializer, tags=["ingest"])
    def post(self, request, run_id):
        data = self._validated(request)
        pk, token = _uuid(run_id), _bearer(request)
        if data["state"] == RunState.RUNNING and pk and token:  # one statement, usually
            stop = services.run_report_running_fenced(
                run_id=pk, attempt=data["attempt"], token_hash=services.hash_run_token(token)
            )
            if stop is not None:
                return Response({"stop": stop, "interval": telemetry_interval(pk)})
        if data["state"] != RunState.RUNNING:
            # the solver is done: cores on the portal's own machines go back to the queue
            # first (in the statement that reads the token to check), then the last points
            # are stored, then the state and the objectives
            batch = telemetry_check_batch(series=data["series"], log=data["log"])
            found = (
                services.run_check_and_release_cores(
                    run_id=pk, attempt=data["attempt"], token_hash=services.hash_run_token(token)
                )
                if pk and token
                else None
            )
            if found is None:
                run = _run_checked(request, run_id, data["attempt"])  # says why: 404, 401
            else:
                _check_token(request, found[1], found[0], data["attempt"])
                run = Simulation(pk=pk)
            telemetry_final_batch(run_id=run.pk, attempt=data["attempt"], batch=batch)
        else:
            run = _run_checked(request, run_id, data["attempt"])
        stop = services.run_report_state(
            run=run,
            attempt=data["attempt"],
            state=data["state"],
            exit_code=data.get("exit_code"),
            reason=data.get("reason", ""),
            message=data.get("message", ""),
            solver_converged=data.get("solver_converged", False),
            iterations=data.get("iterations"),
            last_time=data.get("last_time"),
        )
        if data["state"] == RunState.RUNNING:
            return Response({"stop": bool(stop), "interval": telemetry_interval(run.pk)})
        return Response({"stop": bool(stop)})


class IngestHeartbeatView(_IngestView):
    input_serializer = HeartbeatSerializer

    @extend_schema(request=HeartbeatSerializer, responses=StopSerializer, tags=["ingest"])
    def post(self, request, run_id):
        data = self._validated(request)
        pk, token = _uuid(run_id), _bearer(request)
        if pk and token:  # one statement in the common case
            stop = services.run_heartbeat_fenced(
                run_id=pk,
                attempt=data["attempt"],
                token_hash=services.hash_run_token(token),
                phase=data.get("phase", ""),
                resources=data.get("resources"),
            )
            if stop is not None:
                return Response({"stop": stop, "interval": telemetry_interval(pk)})
        # the slow path tells apart what the fence refused (404, 401, 409, a run that ended)
        run = _run_for(request, run_id, data["attempt"])
        stop = services.run_heartbeat(
            run=run,
            attempt=data["attempt"],
            phase=data.get("phase", ""),
            resources=data.get("resources"),
        )
        return Response({"stop": stop, "interval": telemetry_interval(run.pk)})


class IngestTelemetryView(_IngestView):
    input_serializer = TelemetryInSerializer

    @extend_schema(request=TelemetryInSerializer, responses=StopSerializer, tags=["ingest"])
    def post(self, request, run_id):
        data = self._validated(request)
        pk, token = _uuid(run_id), _bearer(request)
        if pk and token:
            # asked once: whether the batch is published, and the pace the agent is told (a
            # subscriber marking the run meanwhile repairs the gap from the next event's seq)
            watched = is_watched(pk)
            done = telemetry_ingest_fenced(
                run_id=str(pk),
                attempt=data["attempt"],
                token_hash=services.hash_run_token(token),
                series=data.get("series") or {},
                log=data.get("log") or [],
                watched=watched,
            )
            if done is not None:
                return Response({"stop": done[1], "interval": interval_for(watched=watched)})
        # the slow path tells apart what the fence refused (404, 401, 409, a run that ended)
        run = _run_for(request, run_id, data["attempt"])
        _, stop = telemetry_ingest(
            run=run,
            attempt=data["attempt"],
            series=data.get("series") or {},
            log=data.get("log") or [],
            heartbeat=True,
        )
        return Response({"stop": stop, "interval": telemetry_interval(run.pk)})


class IngestArchiveView(_IngestView):
    @extend_schema(request={"application/gzip": bytes}, responses={200: None}, tags=["ingest"])
    def put(self, request, run_id):
        attempt = _attempt_param(request)
        run = _run_for(request, run_id, attempt)
        from django.conf import settings

        size = services.run_store_archive(
            run=run,
            attempt=attempt,
            stream=request._request,
            max_bytes=settings.WINDTUNNEL["ARCHIVE_MAX_MB"] * 1024 * 1024,
        )
        return Response({"bytes": size})


class IngestCaseView(_IngestView):
    """The case source as tar.gz, for agents on machines without the portal's files (VMs)."""

    @extend_schema(responses={(200, "application/gzip"): bytes}, tags=["ingest"])
    def get(self, request, run_id):
        attempt = _attempt_param(request)
        run = _run_for(request, run_id, attempt)
        path = services.run_case_archive(run=run, attempt=attempt)
        handle = path.open("rb")
        path.unlink()  # the open handle keeps the data until the response is sent
        return file_download(handle, filename="case.tar.gz", content_type="application/gzip")
