"""Operator API for VM images in an OpenStack backend's Glance (staff only; docs/images.md).

    POST /api/v1/admin/images/{id}/upload/?backend=<name>[&disk_format=qcow2|raw]
         the disk as the raw body (Content-Type: application/octet-stream) or as the
         multipart form field `file`; disk_format defaults to what the file is
    POST /api/v1/admin/images/{id}/register/   {"backend": name, "glance_image": id or name}

Both answer with the image (now ready, with the backend's Glance id in `references`).
Problems with the input are 400s naming the field; an unreachable cloud is a 503 and a cloud
that refuses is a 502, with the backend's message.
"""

from __future__ import annotations

from django.core.files.uploadedfile import UploadedFile
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.parsers import FileUploadParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import Image
from core.exceptions import ApplicationError, ErrorCode, NotFound
from images import vm
from images.api.views import ImageDetailSerializer
from tenancy.permissions import IsStaff


class RawDiskParser(FileUploadParser):
    """The whole body is the disk (streamed to a temporary file by Django's upload handlers)."""

    media_type = "application/octet-stream"

    def get_filename(self, stream, media_type, parser_context):
        return super().get_filename(stream, media_type, parser_context) or "disk.img"


class RegisterSerializer(serializers.Serializer):
    backend = serializers.CharField(max_length=64)
    glance_image = serializers.CharField(max_length=255)


def _image(pk: int) -> Image:
    image = Image.objects.filter(pk=pk).first()
    if image is None:
        raise NotFound(f"No image with id {pk!r}.")
    return image


class AdminImageUploadView(APIView):
    permission_classes = [IsStaff]
    parser_classes = [RawDiskParser, MultiPartParser]

    @extend_schema(
        parameters=[
            OpenApiParameter("backend", OpenApiTypes.STR, required=True),
            OpenApiParameter("disk_format", OpenApiTypes.STR, enum=list(vm.DISK_FORMATS)),
        ],
        request={
            "application/octet-stream": OpenApiTypes.BINARY,
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
            },
        },
        responses=ImageDetailSerializer,
    )
    def post(self, request, pk: int):
        image = _image(pk)
        length = request.META.get("CONTENT_LENGTH") or "0"
        limit = vm.upload_max_bytes()
        if length.isdigit() and int(length) > limit + 64 * 1024:  # + room for form headers
            raise ApplicationError(
                f"file: {length} bytes is over the limit of {limit} "
                "(WINDTUNNEL_VM_IMAGE_UPLOAD_MAX_BYTES); upload it to Glance directly and "
                "register it",
                field="file",
                code=ErrorCode.UPLOAD,
                status=413,
            )
        upload = request.data.get("file")
        if not isinstance(upload, UploadedFile):
            raise ApplicationError(
                "file: send the disk as the body (Content-Type: application/octet-stream) or "
                "as the multipart form field file",
                field="file",
                code=ErrorCode.UPLOAD,
            )
        params = request.query_params

        def param(name: str):
            return params.get(name) or request.data.get(name) or None

        try:
            image = vm.vm_image_upload(
                image=image,
                backend_name=param("backend"),
                data=upload,
                size=upload.size or 0,
                disk_format=param("disk_format"),
            )
        finally:
            upload.close()
        return Response(ImageDetailSerializer(image, context={"request": request}).data)


class AdminImageRegisterView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(request=RegisterSerializer, responses=ImageDetailSerializer)
    def post(self, request, pk: int):
        image = _image(pk)
        data = RegisterSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        image = vm.vm_image_register(
            image=image,
            backend_name=data.validated_data["backend"],
            glance_image=data.validated_data["glance_image"],
        )
        return Response(ImageDetailSerializer(image, context={"request": request}).data)
