from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.response import Response

from catalog.api.serializers import BackendSerializer, PackageSerializer, TemplateSerializer
from catalog.models import Backend, CaseTemplate, Package
from core.exceptions import NotFound
from tenancy.selectors import tenant_for_user


class TemplateViewSet(viewsets.GenericViewSet):
    serializer_class = TemplateSerializer
    queryset = CaseTemplate.objects.filter(retired=False).order_by("name")
    pagination_class = None

    @extend_schema(responses=TemplateSerializer(many=True))
    def list(self, request):
        return Response(TemplateSerializer(self.get_queryset(), many=True).data)

    @extend_schema(responses=TemplateSerializer)
    def retrieve(self, request, pk=None):
        # a NUL (%00) is in no name, and PostgreSQL's text cannot even hold one
        template = None if "\x00" in pk else self.get_queryset().filter(name=pk).first()
        if template is None:
            raise NotFound(f"No template named {pk!r}.")
        return Response(TemplateSerializer(template).data)


class PackageViewSet(viewsets.GenericViewSet):
    serializer_class = PackageSerializer
    queryset = Package.objects.filter(retired=False).order_by("name")
    pagination_class = None

    @extend_schema(responses=PackageSerializer(many=True))
    def list(self, request):
        return Response(PackageSerializer(self.get_queryset(), many=True).data)


class BackendViewSet(viewsets.GenericViewSet):
    queryset = Backend.objects.none()
    serializer_class = BackendSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Backend.objects.none()
        tenant = tenant_for_user(user=self.request.user)
        return [
            b
            for b in Backend.objects.filter(enabled=True)
            .prefetch_related("tenants")
            .order_by("name")
            if not b.tenants.all() or tenant in b.tenants.all()
        ]

    @extend_schema(responses=BackendSerializer(many=True))
    def list(self, request):
        return Response(BackendSerializer(self.get_queryset(), many=True).data)
