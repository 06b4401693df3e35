"""The Django admin's pages for tenants, memberships, tokens and users. What ends access
there (a token or a membership deleted, a tenant or a user deactivated) closes the
websockets it opened, as the portal's own services do (tenancy.credentials)."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from tenancy.credentials import tenant_deactivated, token_ended, users_ended
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

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if change and "is_active" in form.changed_data and not obj.is_active:
            users_ended(
                user_ids=obj.memberships.values_list("user_id", flat=True),
                reason=tenant_deactivated(obj.name),
            )

    def delete_model(self, request, obj) -> None:
        users_ended(user_ids=obj.memberships.values_list("user_id", flat=True))
        super().delete_model(request, obj)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]

    def delete_model(self, request, obj) -> None:
        users_ended(user_ids=[obj.user_id])
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        users_ended(user_ids=queryset.values_list("user_id", flat=True))
        super().delete_queryset(request, queryset)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["key_prefix", "user", "name", "created_at", "last_used_at", "expires_at"]
    readonly_fields = ["key_hash", "key_prefix"]

    def delete_model(self, request, obj) -> None:
        token_ended(token_id=obj.pk)
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        for pk in queryset.values_list("pk", flat=True):
            token_ended(token_id=pk)
        super().delete_queryset(request, queryset)


class PortalUserAdmin(UserAdmin):
    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if change and "is_active" in form.changed_data and not obj.is_active:
            users_ended(user_ids=[obj.pk])

    def delete_model(self, request, obj) -> None:
        users_ended(user_ids=[obj.pk])
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset) -> None:
        users_ended(user_ids=queryset.values_list("pk", flat=True))
        super().delete_queryset(request, queryset)


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), PortalUserAdmin)
