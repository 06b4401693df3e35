from django.contrib import admin

from tenancy.models import ApiToken, Membership, Tenant


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "user", "name", "created_at", "last_used_at", "expires_at"]
    readonly_fields = ["key_hash", "key_prefix"]
