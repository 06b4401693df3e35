from django.urls import path
from rest_framework.routers import SimpleRouter

from notifications.api.views import EmailPreferenceView, WebhookViewSet

router = SimpleRouter()
router.register("webhooks", WebhookViewSet, basename="webhook")

urlpatterns = [path("email/", EmailPreferenceView.as_view()), *router.urls]
