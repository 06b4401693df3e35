"""Solver images.

GET  /api/v1/images/                 ready images and their solvers (staff: every image;
                                     ?kind=container|vm, ?status=… for staff)
POST /api/v1/images/                 compose {packages: [...], kind?}: 201 new (its build
                                     starts), 200 the existing image of the same digest
GET  /api/v1/images/{id}/            status, progress, log tail (?log_lines=200)
GET  /api/v1/images/{id}/log/        the build log from ?offset=N (poll it while building)
GET  /api/v1/images/{id}/recipe/     the Containerfile / cloud-init user data (text/plain)
POST /api/v1/images/{id}/rebuild/    staff: build the same digest again
POST /api/v1/images/{id}/retire/     staff: no new studies; removed from local storage
"""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from catalog import images as svc
from catalog.choices import ImageKind, ImageStatus
from catalog.models import Image
from core.api.fields import SchemaField
from images import builds
from tenancy.permissions import IsStaff, IsTenantMember


class ClosurePackageSerializer(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()


class ImageSerializer(serializers.ModelSerializer):
    display = serializers.SerializerMethodField()
    packages = SchemaField(
        {"type": "array", "items": {"type": "string"}},
        read_only=True,
        help_text="the packages asked for",
    )
    closure = SchemaField(
        ClosurePackageSerializer(many=True),
        read_only=True,
        help_text="the resolved dependency closure",
    )
    solvers = SchemaField({"type": "array", "items": {"type": "string"}}, read_only=True)

    class Meta:
        model = Image
        fields = [
            "id",
            "name",
            "display",
            "kind",
            "digest",
            "status",
            "progress",
            "packages",
            "closure",
            "solvers",
            "size_bytes",
            "built_at",
            "created_at",
        ]

    def get_display(self, obj: Image) -> str:
        return svc.image_label(obj)


class ImageDetailSerializer(ImageSerializer):
    log_tail = serializers.SerializerMethodField()
    references = serializers.SerializerMethodField()
    admin_url = serializers.SerializerMethodField(
        help_text="staff: the image's Django admin change form (null for others)"
    )

    class Meta(ImageSerializer.Meta):
        fields = [
            *ImageSerializer.Meta.fields,
            "error",
            "build_started_at",
            "references",
            "log_tail",
            "admin_url",
        ]

    def get_log_tail(self, obj: Image) -> list[str]:
        return svc.image_log_tail(obj, self.context.get("log_lines", 200))

    @extend_schema_field(
        serializers.DictField(
            child=serializers.CharField(),
            help_text="staff: per backend, the image's reference there (a registry ref, a "
            "Glance id); {} for others",
        )
    )
    def get_references(self, obj: Image) -> dict:
        request = self.context.get("request")
        return dict(obj.references or {}) if request and request.user.is_staff else {}

    def get_admin_url(self, obj: Image) -> str | None:
        request = self.context.get("request")
        if not (request and request.user.is_staff):
            return None
        return reverse("admin:catalog_image_change", args=[obj.pk])


class ImageComposeSerializer(serializers.Serializer):
    packages = serializers.ListField(
        child=serializers.CharField(max_length=100), min_length=1, max_length=100
    )
    kind = serializers.ChoiceField(choices=ImageKind.choices, default=ImageKind.CONTAINER)


class ImageLogSerializer(serializers.Serializer):
    status = serializers.CharField()
    progress = serializers.FloatField()
    offset = serializers.IntegerField()
    next_offset = serializers.IntegerField()
    text = serializers.CharField()


class ImageViewSet(viewsets.GenericViewSet):
    queryset = Image.objects.none()
    serializer_class = ImageSerializer
    pagination_class = None

    def get_permissions(self):
        if self.action in ("rebuild", "retire"):
            return [IsStaff()]
        return [IsTenantMember()] if not self.request.user.is_staff else [IsStaff()]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Image.objects.none()
        return svc.image_list_visible_to(
            user=self.request.user, kind=self.request.query_params.get("kind") or None
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", OpenApiTypes.STR, enum=ImageKind.values),
            OpenApiParameter("status", OpenApiTypes.STR, enum=ImageStatus.values),
        ],
        responses=ImageSerializer(many=True),
    )
    def list(self, request):
        qs = self.get_queryset()
        wanted = request.query_params.get("status")
        if wanted and request.user.is_staff:
            qs = qs.filter(status=wanted)
        return Response(ImageSerializer(qs, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("log_lines", OpenApiTypes.INT)],
        responses=ImageDetailSerializer,
    )
    def retrieve(self, request, pk=None):
        image = svc.image_get(user=request.user, image_id=pk)
        try:
            lines = int(request.query_params.get("log_lines", 200))
        except ValueError:
            lines = 200
        context = {"request": request, "log_lines": lines}
        return Response(ImageDetailSerializer(image, context=context).data)

    @extend_schema(
        request=ImageComposeSerializer,
        responses={200: ImageDetailSerializer, 201: ImageDetailSerializer},
    )
    def create(self, request):
        ser = ImageComposeSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        image, created = svc.image_compose(
            packages=ser.validated_data["packages"],
            kind=ser.validated_data["kind"],
            user=request.user,
        )
        data = ImageDetailSerializer(image, context={"request": request}).data
        return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(
        parameters=[OpenApiParameter("offset", OpenApiTypes.INT)], responses=ImageLogSerializer
    )
    @action(detail=True, methods=["get"])
    def log(self, request, pk=None):
        image = svc.image_get(user=request.user, image_id=pk)
        try:
            offset = max(0, int(request.query_params.get("offset", 0)))
        except ValueError:
            offset = 0
        text = image.build_log[offset:] if offset <= len(image.build_log) else image.build_log
        return Response(
            {
                "status": image.status,
                "progress": image.progress,
                "offset": offset if offset <= len(image.build_log) else 0,
                "next_offset": len(image.build_log),
                "text": text,
            }
        )

    @extend_schema(responses={(200, "text/plain"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"])
    def recipe(self, request, pk=None):
        image = svc.image_get(user=request.user, image_id=pk)
        return HttpResponse(image.recipe, content_type="text/plain; charset=utf-8")

    @extend_schema(request=None, responses=ImageDetailSerializer)
    @action(detail=True, methods=["post"])
    def rebuild(self, request, pk=None):
        image = svc.image_rebuild(image=svc.image_get(user=request.user, image_id=pk))
        return Response(ImageDetailSerializer(image, context={"request": request}).data)

    @extend_schema(request=None, responses=ImageDetailSerializer)
    @action(detail=True, methods=["post"])
    def retire(self, request, pk=None):
        image = builds.image_retire(image=svc.image_get(user=request.user, image_id=pk))
        return Response(ImageDetailSerializer(image, context={"request": request}).data)
