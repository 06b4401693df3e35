from django.urls import path

from administration.api.views import AdminOverviewView, AdminTenantsView

urlpatterns = [
    path("tenants/", AdminTenantsView.as_view(), name="admin-tenants"),
    path("overview/", AdminOverviewView.as_view(), name="admin-overview"),
]
