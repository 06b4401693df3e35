from django.contrib import admin

from studies.models import Run, Study, Upload


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "tenant", "state", "template", "solver", "run_count", "created_at"]
    list_filter = ["state", "tenant", "template"]
    search_fields = ["name"]
    readonly_fields = ["id", "created_at", "submitted_at", "finished_at"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "__str__",
        "tenant",
        "state",
        "attempt",
        "wait_reason",
        "end_reason",
        "heartbeat_at",
    ]
    list_filter = ["state", "tenant", "end_reason"]
    readonly_fields = ["id", "token_hash", "handle"]
    list_select_related = ["study", "tenant"]


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ["filename", "tenant", "size_bytes", "files_count", "created_at"]
