"""Websocket routes (Channels). Live streams are added by the telemetry app."""

websocket_urlpatterns: list = []
