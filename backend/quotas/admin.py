from django.contrib import admin

from quotas.models import Quota
from quotas.selectors import usage_for_tenant


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = [
        "tenant",
        "cores",
        "memory_gb",
        "max_nodes",
        "max_runs",
        "storage_gb",
        "cores_in_use",
    ]

    @admin.display(description="cores in use")
    def cores_in_use(self, obj) -> int:
        return usage_for_tenant(tenant_id=obj.tenant_id).cores
