"""Django admin pages that need more than their records' app: what runs hold (derived
usage) beside the quotas, the image builds' actions beside the images."""

from django.contrib import admin, messages
from django.utils.html import format_html

from catalog import images
from catalog.models import Image
from core.exceptions import ApplicationError
from images import builds
from quotas.models import Quota
from studies.usage import usage_for_tenant


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = [
        "tenant",
        "cores",
        "memory_gb",
        "max_nodes",
        "max_runs",
        "max_queued_runs",
        "storage_gb",
        "cores_in_use",
    ]

    @admin.display(description="cores in use")
    def cores_in_use(self, obj) -> int:
        return usage_for_tenant(tenant_id=obj.tenant_id).cores


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "kind",
        "status",
        "progress_percent",
        "digest",
        "size_bytes",
        "built_at",
    ]
    list_filter = ["kind", "status"]
    readonly_fields = [
        "digest",
        "closure",
        "solvers",
        "progress_percent",
        "build_started_at",
        "built_at",
        "size_bytes",
        "references",
        "error",
        "log_tail",
        "recipe",
    ]
    exclude = ["build_log", "progress"]
    actions = ["rebuild", "retire"]

    @admin.display(description="progress")
    def progress_percent(self, obj: Image) -> str:
        return f"{obj.progress:.0%}"

    @admin.display(description="build log (last 300 lines; reload to follow)")
    def log_tail(self, obj: Image) -> str:
        return format_html(
            "<pre style='max-height:40em;overflow:auto'>{}</pre>",
            "\n".join(images.image_log_tail(obj, 300)),
        )

    @admin.action(description="Rebuild the selected images")
    def rebuild(self, request, queryset):
        for image in queryset:
            try:
                images.image_rebuild(image=image)
                self.message_user(request, f"{images.image_label(image)}: rebuild started")
            except ApplicationError as exc:
                self.message_user(request, f"{image}: {exc.message}", level=messages.ERROR)

    @admin.action(description="Retire the selected images")
    def retire(self, request, queryset):
        for image in queryset:
            try:
                builds.image_retire(image=image)
                self.message_user(request, f"{images.image_label(image)}: retired")
            except ApplicationError as exc:
                self.message_user(request, f"{image}: {exc.message}", level=messages.ERROR)
