from django.contrib import admin, messages
from django.shortcuts import redirect
from django.urls import reverse

from catalog import images
from catalog.models import Backend, CaseTemplate, Package
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
