from django.contrib import admin

from catalog.models import Backend, CaseTemplate, Image, Package


@admin.register(Package)
class PackageAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "retired", "updated_at"]
    list_filter = ["retired"]
    search_fields = ["name", "description"]


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
    list_display = ["name", "kind", "status", "digest", "size_bytes", "built_at"]
    list_filter = ["kind", "status"]
    readonly_fields = ["digest", "closure", "build_log", "built_at"]
