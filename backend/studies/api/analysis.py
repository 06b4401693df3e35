"""A study's engineering answers: mesh independence (the grid convergence index of each
objective over a refinement parameter, studies/gci.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from studies import selectors
from studies.gci import KINDS, mesh_independence_csv, study_mesh_independence
from studies.models import Study


class MeshIndependenceQuerySerializer(serializers.Serializer):
    parameter = serializers.CharField(
        max_length=100, help_text="the refinement parameter, e.g. cells"
    )
    kind = serializers.ChoiceField(
        choices=list(KINDS),
        default="per_direction",
        help_text="its value is cells per direction (h = 1/n), a total cell count "
        "(h = N^(-1/dims)) or the cell size itself",
    )
    dims = serializers.ChoiceField(
        choices=[1, 2, 3], default=3, help_text="kind total: the mesh's dimensions"
    )


class LevelSerializer(serializers.Serializer):
    value = serializers.FloatField(help_text="the refinement parameter's value")
    h = serializers.FloatField(help_text="its representative cell size")


class GciSerializer(serializers.Serializer):
    phi = serializers.ListField(child=serializers.FloatField(), help_text="fine, medium, coarse")
    h = serializers.ListField(child=serializers.FloatField())
    r21 = serializers.FloatField()
    r32 = serializers.FloatField()
    p = serializers.FloatField(help_text="the observed order of accuracy")
    phi_ext = serializers.FloatField(help_text="the extrapolated value (h → 0)")
    e_a = serializers.FloatField(help_text="approximate relative error, fine vs medium")
    e_ext = serializers.FloatField(help_text="extrapolated relative error of the fine level")
    gci_fine = serializers.FloatField(help_text="the fine-grid convergence index (a fraction)")
    gci_coarse = serializers.FloatField()
    asymptotic_ratio = serializers.FloatField(help_text="GCI32 / (r21^p GCI21): near 1")
    in_asymptotic_range = serializers.BooleanField()
    oscillatory = serializers.BooleanField(help_text="the values go up and down with h")


class MeshIndependenceSerializer(serializers.Serializer):
    parameter = serializers.CharField()
    kind = serializers.CharField()
    dims = serializers.IntegerField()
    levels = LevelSerializer(many=True, help_text="the three finest levels, fine to coarse")
    objectives = serializers.DictField(child=GciSerializer())
    refused = serializers.DictField(
        child=serializers.CharField(), help_text="objectives whose values allow no order, why"
    )


def mesh_independence_of(request: Any, pk: str) -> tuple[Study, dict[str, Any]]:
    """The study the user asks for (404 if not theirs) and its answer to the query."""
    study = selectors.study_get(user=request.user, study_id=pk)
    query = MeshIndependenceQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    q = query.validated_data
    answer = study_mesh_independence(
        study=study, parameter=q["parameter"], kind=q["kind"], dims=int(q["dims"])
    )
    return study, answer


class StudyMeshIndependenceView(APIView):
    """Mesh independence of a study's objectives (docs/api.md, "Mesh independence")."""

    @extend_schema(
        parameters=[MeshIndependenceQuerySerializer],
        responses=MeshIndependenceSerializer,
        operation_id="studies_mesh_independence",
    )
    def get(self, request, pk: str):
        _, answer = mesh_independence_of(request, pk)
        return Response(answer)


class StudyMeshIndependenceCsvView(APIView):
    """The same answer as CSV: one row per objective (docs/api.md, "Mesh independence")."""

    @extend_schema(
        parameters=[MeshIndependenceQuerySerializer],
        responses={(200, "text/csv"): OpenApiTypes.STR},
        operation_id="studies_mesh_independence_csv",
    )
    def get(self, request, pk: str):
        study, answer = mesh_independence_of(request, pk)
        response = HttpResponse(
            mesh_independence_csv(answer), content_type="text/csv; charset=utf-8"
        )
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in study.name)[:60] or "study"
        response["Content-Disposition"] = content_disposition_header(
            True, f"{safe}-mesh-independence.csv"
        )
        return response
