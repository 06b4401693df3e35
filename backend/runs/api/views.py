"""A tenant's runs: list, detail, cancel, telemetry (downsampled or gap repair), log, the
result archive, the flow fields."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.api.params import int_param
from core.exceptions import ApplicationError, ErrorCode, NotFound
from core.http import file_download
from orchestration.results.fields.reading import field_data, fields_index
from runs import archives
from runs.flow_fields import run_fields
from studies import continuation, selectors
from studies.api import serializers as s
from studies.api.continuation import ContinueSerializer
from studies.api.results import (
    LogSerializer,
    RunFieldDataSerializer,
    RunFieldsSerializer,
    TelemetrySerializer,
)
from studies.api.views import RUN_QUERY_PARAMETERS, RunFilter, runs_page, runs_query
from studies.choices import RunState
from studies.models import Run
from studies.transitions import run_cancel
from telemetry.selectors import log_since, log_tail, series_names, series_read

# the query parameters of a runs list that leave every run in it
UNFILTERED = frozenset({"page", "page_size", "ordering", "format"})


class RunViewSet(viewsets.GenericViewSet):
    queryset = Run.objects.none()
    serializer_class = s.RunSerializer
    filterset_class = RunFilter
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        return selectors.run_list_visible_to(user=self.request.user).order_by("-queued_at", "index")

    def get_object(self) -> Run:
        return selectors.run_get(user=self.request.user, run_id=self.kwargs["pk"])

    @extend_schema(
        responses=s.RunSerializer(many=True),
        parameters=[
            *RUN_QUERY_PARAMETERS,
            OpenApiParameter("study", OpenApiTypes.UUID, description="one study's runs"),
            OpenApiParameter("backend", OpenApiTypes.STR, description="a backend's name"),
        ],
    )
    def list(self, request):
        """The tenant's runs across studies (newest first), filtered and sorted as a study's."""
        queryset = runs_query(self.filter_queryset(self.get_queryset()), request)
        if set(request.query_params) <= UNFILTERED:  # all of them: counted from the studies
            queryset.known_count = selectors.run_count_visible_to(user=request.user)
        return runs_page(self, queryset, request)

    @extend_schema(responses=s.RunDetailSerializer)
    def retrieve(self, request, pk=None):
        run = self.get_object()
        positions = (
            selectors.queue_positions(tenant_id=run.tenant_id, runs=[run])
            if run.state == RunState.PENDING
            else {}
        )
        return Response(s.RunDetailSerializer(run, context={"positions": positions}).data)

    @extend_schema(request=None, responses=s.RunDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        if not run_cancel(run=run, by=request.user):
            raise ApplicationError(
                f"the run already ended ({run.state})", status=409, code=ErrorCode.STATE
            )
        return Response(s.RunDetailSerializer(self.get_object()).data)

    @extend_schema(request=ContinueSerializer, responses={202: s.RunDetailSerializer})
    @action(detail=True, methods=["post"], url_path="continue")
    def continue_(self, request, pk=None):
        """Go on from one of the run's writes: `iterations` more time steps from its latest
        (continue), or from an earlier `time` with changed `settings` (restart). The run is
        queued again as a new attempt; its series go on from the write."""
        ser = ContinueSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        asked = continuation.resume_request(
            iterations=data.get("iterations"), time=data.get("time"), settings=data.get("settings")
        )
        run = continuation.run_continue(run=self.get_object(), by=request.user, request=asked)
        return Response(s.RunDetailSerializer(run).data, status=202)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "series",
                OpenApiTypes.STR,
                description="comma-separated series names; empty = list them",
            ),
            OpenApiParameter(
                "max_points",
                OpenApiTypes.INT,
                description="downsample each series to at most this many points (default 2000)",
            ),
            OpenApiParameter("attempt", OpenApiTypes.INT),
            OpenApiParameter(
                "since_seq",
                OpenApiTypes.INT,
                description="gap repair: every point and log line of live events after this seq",
            ),
        ],
        responses=TelemetrySerializer,
    )
    @action(detail=True, methods=["get"])
    def telemetry(self, request, pk=None):
        shown = self.get_object()
        run = selectors.run_results_source(run=shown)  # a reused run shows its source's
        attempt = int_param(request, "attempt", run.attempt, low=0, high=10_000)
        max_points = int_param(request, "max_points", 2000, low=4, high=1_000_000)
        names_raw = request.query_params.get("series", "")
        available = series_names(run=run, attempt=attempt)
        names = [n for n in names_raw.split(",") if n in available] if names_raw else []
        last_seq = run.event_seq  # read before the chunks: later events are the client's to apply
        since = request.query_params.get("since_seq")
        body = {
            "run": str(shown.id),
            "attempt": attempt,
            "last_seq": last_seq,
            "available": available,
        }
        if since not in (None, ""):
            since_seq = int_param(request, "since_seq", 0, low=0, high=2**62)
            # gap repair: every point of the missed events, not downsampled
            body["series"] = series_read(
                run=run,
                attempt=attempt,
                names=names or available,
                max_points=10**9,
                since_seq=since_seq,
                max_seq=last_seq,
            )
            body["log"] = log_since(run=run, attempt=attempt, since_seq=since_seq, max_seq=last_seq)
        else:
            body["series"] = series_read(
                run=run, attempt=attempt, names=names, max_points=max_points, max_seq=last_seq
            )
        return Response(body)

    @extend_schema(
        parameters=[OpenApiParameter("lines", OpenApiTypes.INT)], responses=LogSerializer
    )
    @action(detail=True, methods=["get"])
    def log(self, request, pk=None):
        shown = self.get_object()
        run = selectors.run_results_source(run=shown)
        lines = int_param(request, "lines", 200, low=1, high=20_000)
        return Response(
            {"run": str(shown.id), "attempt": run.attempt, "lines": log_tail(run=run, lines=lines)}
        )

    @extend_schema(responses={(200, "application/gzip"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"])
    def archive(self, request, pk=None):
        run = self.get_object()
        path = archives.run_archive_file(run=selectors.run_results_source(run=run))
        if path is None:
            raise NotFound("This run has no result archive yet; it is made when the run ends.")
        name = f"{run.study.name}-run{run.index:04d}.tar.gz".replace("/", "-").replace(" ", "-")
        return file_download(path.open("rb"), filename=name, content_type="application/gzip")

    @extend_schema(responses=RunFieldsSerializer)
    @action(detail=True, methods=["get"], url_path="fields")
    def flow_fields(self, request, pk=None):
        """The run's flow fields (a completed run's final fields on a plane, and Cp along
        its force patches): what there is, on which grids; `available` false when none,
        `preparing` true while they are being made (a completed run's first view asks for
        them: ask again in a second)."""
        run = self.get_object()
        found = run_fields(run=selectors.run_results_source(run=run))
        return Response(
            fields_index(
                run_id=str(run.id),
                artifact=found.artifact,
                preparing=found.preparing,
                notes=[found.problem] if found.problem else [],
            )
        )

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "field", OpenApiTypes.STR, required=True, description="a name from fields/"
            ),
            OpenApiParameter(
                "region",
                OpenApiTypes.STR,
                description="a region from fields/ (default: the first, the whole domain)",
            ),
        ],
        responses=RunFieldDataSerializer,
    )
    @action(detail=True, methods=["get"], url_path="fields/data")
    def flow_field_data(self, request, pk=None):
        """One field's values on one region's grid (row by row, null outside the mesh),
        with the outline of the walls to draw over them."""
        run = self.get_object()
        artifact = run_fields(run=selectors.run_results_source(run=run), make=False).artifact
        if artifact is None:
            raise NotFound(
                "This run has no flow fields (yet): a completed run's are made when its fields/"
                " are first asked for."
            )
        names = list(artifact["fields"])
        regions = [r["name"] for r in artifact["regions"]]
        field = request.query_params.get("field", "")
        if field not in names:
            raise ApplicationError(
                f"field must be one of {', '.join(names)}"
                + (f", got {field[:80]!r}" if field else " (it is required)"),
                field="field",
            )
        region = request.query_params.get("region") or regions[0]
        if region not in regions:
            raise ApplicationError(
                f"region must be one of {', '.join(regions)}, got {region[:80]!r}",
                field="region",
            )
        return Response(
            {
                "run": str(run.id),
                **field_data(artifact=artifact, field=field, region=region),
            }
        )
