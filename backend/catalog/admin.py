from django.contrib import admin, messages
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html

from catalog import images
from catalog.models import Backend, CaseTemplate, Image, Package
from core.exceptions import ApplicationError


@admin.register(Package)
class PackageAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "retired", "updated_at"]
    list_filter = ["retired"]
    search_fields = ["name", "description"]
    actions = ["compose_image"]

    @admin.action(description="Compose a container image from the selected packages")
    def compose_image(self, request, queryset):
        try:
            image, created = images.image_compose(
                packages=sorted(queryset.values_list("name", flat=True)), user=request.user
            )
        except ApplicationError as exc:
            self.message_user(request, exc.message, level=messages.ERROR)
            return None
        verb = "composed; its build started" if created else "already exists"
        self.message_user(request, f"{images.image_label(image)} {verb} ({image.status})")
        return redirect(reverse("admin:catalog_image_change", args=[image.pk]))


@admin.register(CaseTemplate)
class CaseTemplateAdmin(admin.ModelAdmin):
    list_display = ["name", "title", "solver", "retired"]


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "cores", "memory_gb", "max_nodes", "enabled"]
    list_filter = ["kind", "enabled"]
    filter_horizontal = ["tenants"]
    exclude = ["secrets"]  # encrypted; set through the API/CLI, never shown


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
                images.image_retire(image=image)
                self.message_user(request, f"{images.image_label(image)}: retired")
            except ApplicationError as exc:
                self.message_user(request, f"{image}: {exc.message}", level=messages.ERROR)
