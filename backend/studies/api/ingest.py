"""The ingest API the run agents report to (docs/agent-protocol.md).

Authenticated by the per-run bearer token; every call is fenced by the attempt number.
"""

from __future__ import annotations

import hmac

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ApplicationError, ErrorCode, NotFound
from studies import services
from studies.choices import RunState
from studies.models import Simulation
from studies.selectors import _uuid
from telemetry.services import telemetry_ingest


class _Auth(ApplicationError):
    status = 401

    def __init__(self) -> None:
        super().__init__("missing or wrong run token", code=ErrorCode.UNAUTHENTICATED)


def _run_for(request, run_id, attempt: int) -> Simulation:
    pk = _uuid(run_id)
    run = Simulation.objects.filter(pk=pk).select_related("study").first() if pk else None
    if run is None:
        raise NotFound("no such run")
    header = request.META.get("HTTP_AUTHORIZATION", "")
    token = header[7:] if header.lower().startswith("bearer ") else ""
    if run.attempt != attempt:
        raise services.StaleAttempt()
    if (
        not token
        or not run.token_hash
        or not hmac.compare_digest(services.hash_run_token(token), run.token_hash)
    ):
        raise _Auth()
    return run


class AttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField(min_value=1)


class StateSerializer(AttemptSerializer):
    state = serializers.ChoiceField(
        choices=[RunState.RUNNING, RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED]
    )
    exit_code = serializers.IntegerField(required=False, allow_null=True)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=40)
    message = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    solver_converged = serializers.BooleanField(required=False, default=False)


class HeartbeatSerializer(AttemptSerializer):
    phase = serializers.CharField(required=False, allow_blank=True, max_length=40)
    resources = serializers.DictField(required=False)


class TelemetryInSerializer(AttemptSerializer):
    series = serializers.DictField(child=serializers.ListField(), required=False, default=dict)
    log = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        default=list,
    )


class StopSerializer(serializers.Serializer):
    stop = serializers.BooleanField()


class _IngestView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
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
        run = _run_for(request, run_id, data["attempt"])
        stop = services.run_report_state(
            run=run,
            attempt=data["attempt"],
            state=data["state"],
            exit_code=data.get("exit_code"),
            reason=data.get("reason", ""),
            message=data.get("message", ""),
            solver_converged=data.get("solver_converged", False),
        )
        return Response({"stop": bool(stop)})


class IngestHeartbeatView(_IngestView):
    input_serializer = HeartbeatSerializer

    @extend_schema(request=HeartbeatSerializer, responses=StopSerializer, tags=["ingest"])
    def post(self, request, run_id):
        data = self._validated(request)
        run = _run_for(request, run_id, data["attempt"])
        stop = services.run_heartbeat(
            run=run,
            attempt=data["attempt"],
            phase=data.get("phase", ""),
            resources=data.get("resources"),
        )
        return Response({"stop": stop})


class IngestTelemetryView(_IngestView):
    input_serializer = TelemetryInSerializer

    @extend_schema(request=TelemetryInSerializer, responses=StopSerializer, tags=["ingest"])
    def post(self, request, run_id):
        data = self._validated(request)
        run = _run_for(request, run_id, data["attempt"])
        stop = services.run_heartbeat(run=run, attempt=data["attempt"])
        seq = telemetry_ingest(
            run=run,
            attempt=data["attempt"],
            series=data.get("series") or {},
            log=data.get("log") or [],
        )
        return Response({"stop": bool(stop or seq < 0)})


class IngestArchiveView(_IngestView):
    @extend_schema(request={"application/gzip": bytes}, responses={200: None}, tags=["ingest"])
    def put(self, request, run_id):
        try:
            attempt = int(request.query_params.get("attempt", ""))
        except ValueError:
            raise ApplicationError("give ?attempt=N", field="attempt") from None
        run = _run_for(request, run_id, attempt)
        from django.conf import settings

        size = services.run_store_archive(
            run=run,
            attempt=attempt,
            stream=request._request,
            max_bytes=settings.WINDTUNNEL["ARCHIVE_MAX_MB"] * 1024 * 1024,
        )
        return Response({"bytes": size})
