from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ApplicationError, NotFound
from core.ids import parse_uuid
from core.parsers import YAML_PARSERS
from studies import (
    continuation,
    deletion,
    extension,
    front,
    plot,
    preview,
    results,
    run_query,
    selectors,
    sensitivity,
    services,
    state,
    surrogate_map,
    uploads,
)
from studies.api import serializers as s
from studies.api.continuation import ContinuedSerializer, StudyContinueSerializer
from studies.api.front import FrontSerializer
from studies.api.pagination import study_runs_pagination
from studies.api.plots import PlotQuerySerializer, PlotSerializer, SurrogateSerializer
from studies.api.preview import PreviewSerializer
from studies.api.results import ResultsSerializer
from studies.api.sensitivity import SensitivitySerializer
from studies.choices import RunState, StudyState, Trust
from studies.models import Run, Study, Upload
from studies.objectives_edit import study_objectives_update
from tenancy.selectors import tenant_for_member, tenant_for_user
from tenancy.throttle import tenant_rate_check


class StudyFilter(django_filters.FilterSet):
    # distinct=False: django-filter's MultipleChoiceFilter adds a DISTINCT by default (for
    # filters across joins); a DISTINCT over every column of 100,000 runs took 1.4 s
    # a study being deleted is in no list (its progress: GET /studies/deletions/)
    state = django_filters.MultipleChoiceFilter(
        choices=[c for c in StudyState.choices if c[0] != StudyState.DELETING], distinct=False
    )
    search = django_filters.CharFilter(field_name="name", lookup_expr="icontains")
    template = django_filters.CharFilter(field_name="template__name")

    class Meta:
        model = Study
        fields = ["state", "search", "template"]


class RunFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(  # no DISTINCT: see StudyFilter
        choices=RunState.choices, distinct=False
    )
    trust = django_filters.MultipleChoiceFilter(
        choices=[(t.value, t.label) for t in Trust if t.value], distinct=False
    )
    study = django_filters.UUIDFilter(field_name="study_id")
    backend = django_filters.CharFilter(field_name="backend__name")

    class Meta:
        model = Run
        fields = ["state", "trust", "study", "backend"]


#: the query parameters of a runs list beyond RunFilter's columns (run_query.py), for the schema
RUN_QUERY_PARAMETERS = [
    OpenApiParameter("state", OpenApiTypes.STR, many=True, enum=RunState.values),
    OpenApiParameter(
        "trust", OpenApiTypes.STR, many=True, enum=[t.value for t in Trust if t.value]
    ),
    OpenApiParameter(
        "param",
        OpenApiTypes.STR,
        many=True,
        description="a parameter's range `NAME:LOW..HIGH` (either bound may be left out) or "
        "value `NAME:VALUE`; repeat for several",
    ),
    OpenApiParameter(
        "objective",
        OpenApiTypes.STR,
        many=True,
        description="an objective's range `NAME:LOW..HIGH` or value `NAME:VALUE`",
    ),
    OpenApiParameter(
        "ordering",
        OpenApiTypes.STR,
        description="comma-separated sort keys, a leading `-` for descending: "
        + ", ".join(run_query.ORDER_COLUMNS)
        + ", param.NAME, objective.NAME",
    ),
]


#: the query parameters that filter or sort a runs list
FILTERS_AND_ORDER = ("state", "trust", "param", "objective", "ordering", "study", "backend")


def runs_query(queryset: Any, request: Any, *, study: Study | None = None) -> Any:
    """Parameter and objective ranges, and the sort order, of a runs list (400s name mistakes).

    With a study, the names are checked against its parameters and objectives."""
    params = request.query_params
    names_needed = params.getlist("param") or "param." in params.get("ordering", "")
    parameters = (  # a look at every run's parameters (study_parameter_names): only if asked
        list(results.study_parameter_names(study)) if study is not None and names_needed else None
    )
    objectives = list((study.objectives or {}).keys()) if study is not None else None
    terms = run_query.run_terms_parse(params.getlist("param"), field="param", known=parameters)
    terms += run_query.run_terms_parse(
        params.getlist("objective"), field="objective", known=objectives
    )
    queryset = run_query.run_terms_apply(queryset, terms)
    return run_query.run_ordering_apply(
        queryset, params.get("ordering"), parameters=parameters, objectives=objectives
    )


def runs_page(view: Any, queryset: Any, request: Any) -> Response:
    """A page of runs with the queue positions of those that wait (counted for this page only)."""
    page = view.paginate_queryset(queryset)
    items = page if page is not None else list(queryset)
    tenant = tenant_for_member(user=request.user)
    positions = selectors.queue_positions(
        tenant_id=tenant.id,
        runs=[  # a cancelled study's queued runs wait for nothing (they are being ended)
            r
            for r in items
            if r.state == RunState.PENDING and r.study.state != StudyState.CANCELLED
        ],
    )
    data = s.RunSerializer(items, many=True, context={"positions": positions}).data
    return view.get_paginated_response(data) if page is not None else Response(data)


def spec_body(by_type: dict[str, Any]) -> dict[str, Any]:
    """A spec body as JSON or as YAML (the same document; docs/study-spec.md)."""
    schema = by_type["application/json"]
    return {**by_type, **{parser.media_type: schema for parser in YAML_PARSERS}}


def _preview_throttle(tenant: Any) -> None:
    per_minute = settings.WINDTUNNEL["PREVIEWS_PER_MINUTE"]
    tenant_rate_check(tenant_id=tenant.pk, what="preview", per_minute=per_minute)


class StudyViewSet(viewsets.GenericViewSet):
    queryset = Study.objects.none()  # for the schema; get_queryset() scopes to the tenant
    serializer_class = s.StudySerializer
    filterset_class = StudyFilter
    lookup_value_regex = "[^/]+"

    # the actions whose body is a spec, which may come as YAML too (docs/study-spec.md)
    spec_actions = frozenset({"create", "update", "preview"})

    def get_parsers(self):
        parsers = super().get_parsers()
        method = getattr(getattr(self, "request", None), "method", None) or ""
        action = (getattr(self, "action_map", None) or {}).get(method.lower())
        if action in self.spec_actions:
            parsers += [parser() for parser in YAML_PARSERS]
        return parsers

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
        selectors.studies_count_runs(studies=page or [])
        return self.get_paginated_response(s.StudySerializer(page, many=True).data)

    @extend_schema(request=spec_body(s.CREATE_REQUEST), responses={201: s.StudySerializer})
    def create(self, request):
        study = services.study_create(
            tenant=tenant_for_user(user=request.user),
            owner=request.user,
            spec=s.spec_of(request.data),
            submit=not s.draft_of(request.data),
        )
        return Response(
            s.StudySerializer(self.get_object_for(study)).data, status=status.HTTP_201_CREATED
        )

    def get_object_for(self, study: Study) -> Study:
        return selectors.study_get(user=self.request.user, study_id=study.pk)

    @extend_schema(responses=s.StudySerializer)
    def retrieve(self, request, pk=None):
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=spec_body(s.SPEC_REQUEST), responses=s.StudySerializer)
    def update(self, request, pk=None):
        study = self.get_object()
        services.study_update(study=study, spec=s.spec_of(request.data))
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Delete a study that has no queued or running run (cancel it first), with its runs
        and their files: at once it is gone from every read (404) and list, and its runs and
        files are removed in the background (`GET /studies/deletions/` shows how far).
        Results of its runs that other studies' runs reuse are handed over to them first:
        those studies keep showing them (docs/reuse.md)."""
        deletion.study_delete(study=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=s.StudyDeletionSerializer(many=True))
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def deletions(self, request):
        """The tenant's studies being deleted and how far each is: runs removed of the runs
        it had. A study leaves this list once it is gone entirely."""
        tenant = tenant_for_user(user=request.user)
        if tenant is None:
            raise NotFound()
        studies = deletion.studies_deleting(tenant_id=tenant.pk)
        return Response(s.StudyDeletionSerializer(studies, many=True).data)

    @extend_schema(request=spec_body(s.SPEC_REQUEST), responses=PreviewSerializer)
    @action(detail=False, methods=["post"])
    def preview(self, request):
        """What a spec would make: run count, first rows, quota impact. Creates nothing.
        A tenant may ask for WINDTUNNEL_PREVIEWS_PER_MINUTE (60 by default) a minute; beyond,
        429 with Retry-After."""
        tenant = tenant_for_user(user=request.user)
        _preview_throttle(tenant)
        return Response(preview.study_preview(tenant=tenant, spec=s.spec_of(request.data)))

    @extend_schema(responses=PreviewSerializer, operation_id="studies_preview_saved")
    @action(detail=True, methods=["get"], url_path="preview")
    def preview_saved(self, request, pk=None):
        """The preview of a saved study (e.g. a draft): run count, first rows, quota impact.
        Counted with the tenant's other previews (429 beyond WINDTUNNEL_PREVIEWS_PER_MINUTE)."""
        study = self.get_object()
        _preview_throttle(study.tenant)
        return Response(preview.study_preview(tenant=study.tenant, spec=study.spec))

    @extend_schema(request=None, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request, pk=None):
        services.study_submit(study=self.get_object())
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=None, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        state.study_cancel(study=self.get_object(), by=request.user)
        return Response(s.StudySerializer(self.get_object()).data)

    @extend_schema(request=s.StudyExtendSerializer, responses=s.StudySerializer)
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        ser = s.StudyExtendSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        extension.study_extend(
            study=self.get_object(),
            parameters=ser.validated_data.get("parameters"),
            budget=ser.validated_data.get("budget"),
        )
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

    @extend_schema(request=StudyContinueSerializer, responses={202: ContinuedSerializer})
    @action(detail=True, methods=["post"], url_path="runs/continue")
    def runs_continue(self, request, pk=None):
        """Continue (or restart) a selection of the study's ended runs from their writes, as
        one run's `continue` does; the runs that cannot go on are listed with the reason."""
        ser = StudyContinueSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        data = ser.validated_data
        asked = continuation.resume_request(
            iterations=data.get("iterations"), time=data.get("time"), settings=data.get("settings")
        )
        done = continuation.runs_continue(
            study=self.get_object(), run_ids=data["runs"], by=request.user, request=asked
        )
        return Response(ContinuedSerializer(done).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=s.RunSerializer(many=True), parameters=RUN_QUERY_PARAMETERS)
    @action(detail=True, methods=["get"])
    def runs(self, request, pk=None):
        """The study's runs, a page at a time: filtered by state, trust, parameter and
        objective ranges, sorted by a column, a parameter or an objective (index by default)."""
        study = self.get_object()
        runs = RunFilter(
            request.query_params, queryset=study.runs.select_related("backend").order_by("index")
        )
        if not runs.is_valid():
            raise ValidationError(runs.errors)
        if study.state != StudyState.DRAFT and not any(
            request.query_params.getlist(name) for name in FILTERS_AND_ORDER
        ):
            # all the runs in index order: a page is an index range (studies/api/pagination)
            self._paginator = study_runs_pagination(study)
        return runs_page(self, runs_query(runs.qs, request, study=study), request)

    @extend_schema(
        parameters=[
            PlotQuerySerializer,
            *[p for p in RUN_QUERY_PARAMETERS if p.name != "ordering"],
        ],
        responses=PlotSerializer,
    )
    @action(detail=True, methods=["get"])
    def plot(self, request, pk=None):
        """The objective plot's data: every point up to `max_points` runs, above that a
        summary per x bin (count, mean, min, max), or with `mode=heatmap` the mean of z per
        cell of an x×y grid; the runs filtered as the runs list is (docs/api.md)."""
        study = self.get_object()
        query = PlotQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        names = {
            "parameters": list(results.study_parameter_names(study)),
            "objectives": list((study.objectives or {}).keys()),
        }
        axes = {
            name: plot.plot_axis_parse(q.get(name), field=name, **names)
            for name in ("x", "y", "color", "z")
            if name in ("x", "y") or q.get(name)
        }
        runs = RunFilter(request.query_params, queryset=study.runs.all())
        if not runs.is_valid():
            raise ValidationError(runs.errors)
        data = plot.study_plot(
            study=study,
            runs=runs_query(runs.qs, request, study=study),
            x=axes["x"],
            y=axes["y"],
            color=axes.get("color"),
            z=axes.get("z"),
            mode=q["mode"],
            max_points=q["max_points"],
            bins=q["bins"],
        )
        return Response(data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "grid.x", str, description="the map's x parameter (default: the first)"
            ),
            OpenApiParameter(
                "grid.y", str, description="the map's y parameter (default: the second)"
            ),
            OpenApiParameter("grid.size", int, description="cells a side, 2 to 60 (default 25)"),
            OpenApiParameter(
                "grid.objective",
                str,
                description="the objective whose best run holds the parameters off the map "
                "(default: the first the surrogate learns)",
            ),
        ],
        responses=SurrogateSerializer,
    )
    @action(detail=True, methods=["get"])
    def surrogate(self, request, pk=None):
        """An adaptive study's Gaussian-process surrogate. With no parameter: the mean and
        standard deviation of each objective on a grid over two sampled parameters, the runs'
        points and the batches' progress. With `?<param>=<value>` for every sampled
        parameter: the prediction there, with its standard deviation (docs/api.md)."""
        study = self.get_object()
        query = {k: v for k, v in request.query_params.items() if k != "format"}
        return Response(surrogate_map.study_surrogate(study=study, query=query))

    @extend_schema(
        parameters=[
            OpenApiParameter("objective", str, description="one objective (default: all)"),
            OpenApiParameter(
                "samples",
                int,
                description="the estimator's base samples, a power of two from 256 to 65536 "
                "(default 4096)",
            ),
        ],
        responses=SensitivitySerializer,
    )
    @action(detail=True, methods=["get"])
    def sensitivity(self, request, pk=None):
        """Which parameters each objective depends on: first-order and total Sobol indices
        with confidence intervals, on the surrogate fitted to the study's completed runs
        (docs/api.md, "Sensitivity")."""
        study = self.get_object()
        query = {k: v for k, v in request.query_params.items() if k != "format"}
        return Response(sensitivity.study_sensitivity(study=study, query=query))

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "objectives",
                str,
                description="two or three objectives with the way each is better, e.g. "
                "LD:max,Cd:min (default: an adaptive study's pareto goal's)",
            ),
            OpenApiParameter(
                "constraint",
                str,
                many=True,
                description="a range the runs must keep, e.g. Cl>=0.5 or Cd<=0.02; repeatable "
                "(default: the adaptive goal's)",
            ),
        ],
        responses=FrontSerializer,
    )
    @action(detail=True, methods=["get"])
    def pareto(self, request, pk=None):
        """The trade-off between two or three objectives: every completed run's values, which
        runs are on the Pareto front, and the front's hypervolume, after each batch for an
        adaptive study (docs/api.md, "Pareto front")."""
        study = self.get_object()
        return Response(
            front.study_front(
                study=study,
                objectives=request.query_params.get("objectives"),
                constraints=request.query_params.getlist("constraint"),
            )
        )

    @extend_schema(responses=ResultsSerializer)
    @action(detail=True, methods=["get"])
    def results(self, request, pk=None):
        study = self.get_object()
        return results.StreamedResponse(
            results.results_json_chunks(study=study), content_type="application/json"
        )

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"], url_path="results-csv")
    def results_csv(self, request, pk=None):
        study = self.get_object()
        response = results.StreamedResponse(
            results.results_csv_chunks(study=study), content_type="text/csv; charset=utf-8"
        )
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in study.name)[:60] or "study"
        # any Unicode name, as RFC 6266's filename* (a raw UTF-8 header is garbled by browsers)
        response["Content-Disposition"] = content_disposition_header(True, f"{safe}-results.csv")
        return response


class StudyObjectivesView(APIView):
    """Edit a study's objectives after its runs (docs/api.md, "Objectives after the fact")."""

    @extend_schema(
        request=s.StudyObjectivesSerializer,
        responses=s.StudySerializer,
        operation_id="studies_objectives_update",
    )
    def put(self, request, pk: str):
        study = selectors.study_get(user=request.user, study_id=pk)
        ser = s.StudyObjectivesSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        study_objectives_update(
            study=study,
            objectives=ser.validated_data["objectives"],
            trust=ser.validated_data.get("trust"),
        )
        return Response(s.StudySerializer(selectors.study_get(user=request.user, study_id=pk)).data)


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
        upload = self.get_queryset().filter(pk=parse_uuid(pk)).first() if parse_uuid(pk) else None
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
