from django.urls import path

from administration.api.operations import AdminRunStopView, AdminRunsView
from administration.api.pools import AdminPoolDetailView, AdminPoolListView
from administration.api.tenants import (
    AdminTenantDetailView,
    AdminTenantMembersView,
    AdminTenantMemberView,
    AdminTenantQuotaView,
    AdminTenantsView,
)
from administration.api.views import AdminOverviewView

urlpatterns = [
    path("tenants/", AdminTenantsView.as_view(), name="admin-tenants"),
    path("tenants/<slug:name>/", AdminTenantDetailView.as_view(), name="admin-tenant"),
    path("tenants/<slug:name>/quota/", AdminTenantQuotaView.as_view(), name="admin-tenant-quota"),
    path(
        "tenants/<slug:name>/members/",
        AdminTenantMembersView.as_view(),
        name="admin-tenant-members",
    ),
    path(
        "tenants/<slug:name>/members/<int:user_id>/",
        AdminTenantMemberView.as_view(),
        name="admin-tenant-member",
    ),
    path("overview/", AdminOverviewView.as_view(), name="admin-overview"),
    path("pools/", AdminPoolListView.as_view(), name="admin-pools"),
    path("pools/<slug:name>/", AdminPoolDetailView.as_view(), name="admin-pool"),
    path("runs/", AdminRunsView.as_view(), name="admin-runs"),
    path("runs/<str:run_id>/stop/", AdminRunStopView.as_view(), name="admin-run-stop"),
]
