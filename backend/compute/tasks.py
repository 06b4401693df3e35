"""Thin, idempotent tasks: take ids, call one service."""

from celery import shared_task

from compute import cloud


@shared_task(name="compute.cloud_limits", ignore_result=True)
def refresh_cloud_limits() -> None:
    cloud.cloud_limits_refresh_all()
