"""Websocket routes (Channels): live streams of runs and studies (docs/live.md)."""

from django.urls import path

from telemetry.consumers import RunConsumer, StudyConsumer

websocket_urlpatterns = [
    path("ws/runs/<str:pk>/", RunConsumer.as_asgi()),
    path("ws/studies/<str:pk>/", StudyConsumer.as_asgi()),
]
