from __future__ import annotations

import django_filters
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from core.exceptions import ApplicationError, NotFound
from core.http import file_download
from studies import selectors, services, uploads
from studies.api import serializers as s
from studies.choices import RunState, StudyState
from studies.models import Simulation, Study, Upload
from telemetry.selectors import log_since, log_tail, series_names, series_read
from tenancy.selectors import tenant_for_user


class StudyFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=StudyState.choices)
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    template = django_filters.CharFilter(field_name="template__name")

    class Meta:
        model = Study
        fields = ["state", "search", "template"]


class RunFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=RunState.choices)

    class Meta:
        model = Simulation
        fields = ["state"]


def _runs_page(view, queryset, request):
    page = view.paginate_queryset(queryset)
    items = page if page is not None else list(queryset)
    tenant = tenant_for_user(user=request.user)
    positions = selectors.queue_positions(
        tenant_id=tenant.id, run_ids=[r.id for r in items if r.state == RunState.PENDING]
    )
    data = s.RunSerializer(items, many=True, context={"positions": positions}).data
    return view.get_paginated_response(data) if page is not None else Response(data)


class StudyViewSet(viewsets.GenericViewSet):
    queryset = Study.objects.none()  # for the schema; get_queryset() scopes to the tenant
    serializer_class = s.StudySerializer
    filterset_class = StudyFilter
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Study.objects.none()
        return selectors.study_list_visible_to(user=self.request.user)

    def get_object(self) -> Study:
        return selectors.study_get(user=self.request.user, study_id=self.kwargs["pk"])

    @extend_schema(responses=s.StudySerializer(many=True))
    def list(self, request):
        qs = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(qs)
        return self.get_paginated_response(s.StudySerializer(page, many=True).data)

    @extend_schema(request=s.StudyCreateSerializer, responses={201: s.StudySerializer})
    def create(self, request):
        ser = s.StudyCreateSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        study = services.study_create(
            tenant=tenant_for_user(user=request.user),
            owner=request.user,
            spec=ser.to_spec(),
            submit=not ser.validated_data.get("draft", False),
        )
        return Response(
            s.StudySerializer(self.get_object_for(study)).data, status=status.HTTP_201_CREATED
        )

    def get_object_for(self, study: Study) -> Study:
        return selectors.study_get(user=self.request.user, study_id=study.pk)

    @extend_schema(responses=s.StudySerializer)
    def retrieve(self, request, pk=None):
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=s.StudySpecSerializer, responses=s.StudySerializer)
    def update(self, request, pk=None):
        study = self.get_object()
        ser = s.StudySpecSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        services.study_update(study=study, spec=ser.to_spec())
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        services.study_delete(study=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=s.StudySpecSerializer, responses=s.PreviewSerializer)
    @action(detail=False, methods=["post"])
    def preview(self, request):
        """What a spec would make: run count, first rows, quota impact. Creates nothing."""
        ser = s.StudySpecSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        tenant = tenant_for_user(user=request.user)
        return Response(services.study_preview(tenant=tenant, spec=ser.to_spec()))

    @extend_schema(responses=s.PreviewSerializer, operation_id="studies_preview_saved")
    @action(detail=True, methods=["get"], url_path="preview")
    def preview_saved(self, request, pk=None):
        """The preview of a saved study (e.g. a draft): run count, first rows, quota impact."""
        study = self.get_object()
        return Response(services.study_preview(tenant=study.tenant, spec=study.spec))

    @extend_schema(request=None, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        services.study_submit(study=self.get_object())
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=None, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        services.study_cancel(study=self.get_object(), by=request.user)
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=s.StudyExtendSerializer, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        ser = s.StudyExtendSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        services.study_extend(study=self.get_object(), parameters=ser.validated_data["parameters"])
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=s.StudyCloneSerializer, responses={201: s.StudySerializer})
    @action(detail=True, methods=["post"])
    def clone(self, request, pk=None):
        ser = s.StudyCloneSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        clone = services.study_clone(
            study=self.get_object(), owner=request.user, name=ser.validated_data.get("name")
        )
        return Response(
            s.StudySerializer(self.get_object_for(clone)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        responses=s.RunSerializer(many=True),
        parameters=[OpenApiParameter("state", OpenApiTypes.STR, many=True, enum=RunState.values)],
    )
    @action(detail=True, methods=["get"])
    def runs(self, request, pk=None):
        study = self.get_object()
        qs = RunFilter(
            request.query_params, queryset=study.runs.select_related("backend").order_by("index")
        ).qs
        return _runs_page(self, qs, request)

    @extend_schema(responses=s.ResultsSerializer)
    @action(detail=True, methods=["get"])
    def results(self, request, pk=None):
        study = self.get_object()
        return Response(
            {
                "study": str(study.id),
                "parameters": list((study.spec.get("parameters") or {}).keys()),
                "objectives": list((study.objectives or {}).keys()),
                "rows": selectors.study_results(study=study),
                "last_seq": study.event_seq,
            }
        )

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"], url_path="results-csv")
    def results_csv(self, request, pk=None):
        study = self.get_object()
        response = HttpResponse(
            selectors.study_results_csv(study=study), content_type="text/csv; charset=utf-8"
        )
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in study.name)[:60] or "study"
        # any Unicode name, as RFC 6266's filename* (a raw UTF-8 header is garbled by browsers)
        response["Content-Disposition"] = content_disposition_header(True, f"{safe}-results.csv")
        return response


class RunViewSet(viewsets.GenericViewSet):
    queryset = Simulation.objects.none()
    serializer_class = s.RunSerializer
    filterset_class = RunFilter
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Simulation.objects.none()
        return selectors.run_list_visible_to(user=self.request.user).order_by("-queued_at", "index")

    def get_object(self) -> Simulation:
        return selectors.run_get(user=self.request.user, run_id=self.kwargs["pk"])

    @extend_schema(responses=s.RunSerializer(many=True))
    def list(self, request):
        return _runs_page(self, self.filter_queryset(self.get_queryset()), request)

    @extend_schema(responses=s.RunDetailSerializer)
    def retrieve(self, request, pk=None):
        run = self.get_object()
        positions = (
            selectors.queue_positions(tenant_id=run.tenant_id, run_ids=[run.id])
            if run.state == RunState.PENDING
            else {}
        )
        return Response(s.RunDetailSerializer(run, context={"positions": positions}).data)

    @extend_schema(request=None, responses=s.RunDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        run = self.get_object()
        if not services.run_cancel(run=run, by=request.user):
            raise ApplicationError(
                f"the run already ended ({run.state})", status=409, code="invalid_state"
            )
        return Response(s.RunDetailSerializer(self.get_object()).data)

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
        responses=s.TelemetrySerializer,
    )
    @action(detail=True, methods=["get"])
    def telemetry(self, request, pk=None):
        run = self.get_object()
        attempt = _int_param(request, "attempt", run.attempt, low=0, high=10_000)
        max_points = _int_param(request, "max_points", 2000, low=4, high=1_000_000)
        names_raw = request.query_params.get("series", "")
        available = series_names(run=run, attempt=attempt)
        names = [n for n in names_raw.split(",") if n in available] if names_raw else []
        last_seq = run.event_seq  # read before the chunks: later events are the client's to apply
        since = request.query_params.get("since_seq")
        body = {
            "run": str(run.id),
            "attempt": attempt,
            "last_seq": last_seq,
            "available": available,
        }
        if since not in (None, ""):
            since_seq = _int_param(request, "since_seq", 0, low=0, high=2**62)
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
        parameters=[OpenApiParameter("lines", OpenApiTypes.INT)], responses=s.LogSerializer
    )
    @action(detail=True, methods=["get"])
    def log(self, request, pk=None):
        run = self.get_object()
        lines = _int_param(request, "lines", 200, low=1, high=20_000)
        return Response(
            {"run": str(run.id), "attempt": run.attempt, "lines": log_tail(run=run, lines=lines)}
        )

    @extend_schema(responses={(200, "application/gzip"): OpenApiTypes.BINARY})
    @action(detail=True, methods=["get"])
    def archive(self, request, pk=None):
        run = self.get_object()
        path = services.run_archive_file(run=run)
        if path is None:
            raise NotFound("This run has no result archive yet; it is made when the run ends.")
        name = f"{run.study.name}-run{run.index:04d}.tar.gz".replace("/", "-").replace(" ", "-")
        return file_download(path.open("rb"), filename=name, content_type="application/gzip")


def _int_param(request, name: str, default: int, *, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApplicationError(f"{name} must be a whole number, got {raw!r}", field=name) from None
    if not low <= value <= high:
        raise ApplicationError(f"{name} must be between {low} and {high}, got {value}", field=name)
    return value


class UploadViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    queryset = Upload.objects.none()
    serializer_class = s.UploadSerializer
    parser_classes = [MultiPartParser, FormParser]
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Upload.objects.none()
        return selectors.upload_list_visible_to(user=self.request.user)

    def _get(self, pk):
        upload = (
            self.get_queryset().filter(pk=selectors._uuid(pk)).first()
            if selectors._uuid(pk)
            else None
        )
        if upload is None:
            raise NotFound("No upload with that id in your tenant.")
        return upload

    @extend_schema(
        request={"multipart/form-data": s.UploadCreateSerializer},
        responses={201: s.UploadSerializer},
    )
    def create(self, request):
        file = request.FILES.get("file")
        if file is None:
            raise ApplicationError(
                "send the case archive as multipart form field 'file'", field="file"
            )
        upload = uploads.upload_create(
            tenant=tenant_for_user(user=request.user),
            owner=request.user,
            filename=file.name,
            fileobj=file,
            size=file.size,
        )
        return Response(s.UploadSerializer(upload).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses=s.UploadSerializer)
    def retrieve(self, request, pk=None):
        return Response(s.UploadSerializer(self._get(pk)).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        uploads.upload_delete(upload=self._get(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
