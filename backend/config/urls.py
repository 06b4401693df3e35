from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.db import connection
from django.http import JsonResponse
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from administration.api.backends import (
    AdminBackendCheckView,
    AdminBackendDetailView,
    AdminBackendElasticFilesView,
    AdminBackendElasticView,
    AdminBackendListView,
)
from administration.api.metrics import metrics_view
from administration.spa import SPA_PATH_REGEX, spa_index
from catalog.api.views import BackendViewSet, PackageViewSet, TemplateViewSet
from images.api.views import ImageViewSet
from images.api.vm import AdminImageRegisterView, AdminImageUploadView
from ingest.api import views as ingest
from runs.api.views import RunViewSet
from studies.api.analysis import StudyMeshIndependenceCsvView, StudyMeshIndependenceView
from studies.api.quota import QuotaView
from studies.api.views import StudyObjectivesView, StudyViewSet, UploadViewSet
from tenancy.api.tokens import ApiTokenDetailView, ApiTokenListView
from tenancy.api.views import CsrfView, LoginView, LogoutView, MeView, TokenView
from tenancy.signout import sign_out_closes_websockets
from tenancy.throttle import login_throttled

router = DefaultRouter()
router.register("templates", TemplateViewSet, basename="template")
router.register("packages", PackageViewSet, basename="package")
router.register("backends", BackendViewSet, basename="backend")
router.register("images", ImageViewSet, basename="image")
router.register("uploads", UploadViewSet, basename="upload")
router.register("studies", StudyViewSet, basename="study")
router.register("runs", RunViewSet, basename="run")


def healthz(request):
    """Liveness + readiness: the database and the broker answer."""
    checks = {}
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 — report, don't crash
        checks["database"] = f"error: {exc}"
    try:
        import redis
        from django.conf import settings

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
        checks["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["redis"] = f"error: {exc}"
    ok = all(v == "ok" for v in checks.values())
    return JsonResponse({"status": "ok" if ok else "degraded", **checks}, status=200 if ok else 503)


def api_not_found(request, exception=None):
    """An unknown path under /api/ answers like the API does (JSON with a code); the rest of
    the site keeps Django's page."""
    from django.views.defaults import page_not_found

    if request.path.startswith("/api/"):
        return JsonResponse(
            {
                "code": "not_found",
                "message": f"no API endpoint at {request.path}; see /api/docs/ for the list",
                "field": None,
                "details": None,
            },
            status=404,
        )
    return page_not_found(request, exception)


handler404 = api_not_found

ingest_urls = [
    path("runs/<str:run_id>/state/", ingest.IngestStateView.as_view()),
    path("runs/<str:run_id>/heartbeat/", ingest.IngestHeartbeatView.as_view()),
    path("runs/<str:run_id>/telemetry/", ingest.IngestTelemetryView.as_view()),
    path("runs/<str:run_id>/archive/", ingest.IngestArchiveView.as_view()),
    path("runs/<str:run_id>/case/", ingest.IngestCaseView.as_view()),
    path("workers/<str:worker_id>/register/", ingest.PilotRegisterView.as_view()),
    path("workers/<str:worker_id>/lease/", ingest.PilotLeaseView.as_view()),
    path("workers/<str:worker_id>/heartbeat/", ingest.PilotHeartbeatView.as_view()),
    path("workers/<str:worker_id>/release/", ingest.PilotReleaseView.as_view()),
]

urlpatterns = [
    path("healthz", healthz),
    path("metrics", metrics_view),  # Prometheus, with the scrape token (docs/metrics.md)
    # the login forms of the admin and of the browsable API, under the sign-in limits of the
    # API's own sign-in (tenancy.throttle); matched before the includes that also name them
    path("admin/login/", login_throttled(admin.site.login)),
    path(
        "api-auth/login/",
        login_throttled(auth_views.LoginView.as_view(template_name="rest_framework/login.html")),
    ),
    # the sign-outs of the admin and of the browsable API close the sign-in's websockets, as
    # the dashboard's does (tenancy.signout)
    path("admin/logout/", sign_out_closes_websockets(admin.site.logout)),
    path("api-auth/logout/", sign_out_closes_websockets(auth_views.LogoutView.as_view())),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI with its start script as a file of its own: no inline script (core.csp)
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/v1/auth/token/", TokenView.as_view()),
    path("api/v1/auth/csrf/", CsrfView.as_view()),
    path("api/v1/auth/login/", LoginView.as_view()),
    path("api/v1/auth/logout/", LogoutView.as_view()),
    path("api/v1/admin/backends/", AdminBackendListView.as_view()),
    path("api/v1/admin/backends/<slug:name>/", AdminBackendDetailView.as_view()),
    path("api/v1/admin/backends/<slug:name>/check/", AdminBackendCheckView.as_view()),
    path("api/v1/admin/backends/<slug:name>/elastic/", AdminBackendElasticView.as_view()),
    path(
        "api/v1/admin/backends/<slug:name>/elastic/files/", AdminBackendElasticFilesView.as_view()
    ),
    path("api/v1/admin/images/<int:pk>/upload/", AdminImageUploadView.as_view()),
    path("api/v1/admin/images/<int:pk>/register/", AdminImageRegisterView.as_view()),
    path("api/v1/admin/", include("administration.api.urls")),
    path("api/v1/me/", MeView.as_view()),
    path("api/v1/tokens/", ApiTokenListView.as_view()),
    path("api/v1/tokens/<str:pk>/", ApiTokenDetailView.as_view()),
    path("api/v1/quota/", QuotaView.as_view()),
    path("api/v1/ingest/", include(ingest_urls)),
    path("api/v1/notifications/", include("notifications.api.urls")),
    path("api/v1/studies/<str:pk>/results.csv", StudyViewSet.as_view({"get": "results_csv"})),
    path("api/v1/studies/<str:pk>/objectives/", StudyObjectivesView.as_view()),
    path("api/v1/studies/<str:pk>/mesh-independence/", StudyMeshIndependenceView.as_view()),
    path("api/v1/studies/<str:pk>/mesh-independence.csv", StudyMeshIndependenceCsvView.as_view()),
    path("api/v1/", include(router.urls)),
    path("api-auth/", include("rest_framework.urls")),
    re_path(SPA_PATH_REGEX, spa_index),  # the web UI; keep last
]
