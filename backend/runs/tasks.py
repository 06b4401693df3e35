"""Thin, idempotent tasks: take ids, call one service."""

from celery import shared_task

from runs import archives, flow_fields, services


@shared_task(name="runs.kill_run", ignore_result=True)
def kill_run(run_id: str, attempt: int, handle: str) -> None:
    services.run_kill(run_id=run_id, attempt=attempt, handle=handle)


@shared_task(name="runs.release_run", ignore_result=True)
def release_run(run_id: str, attempt: int, handle: str) -> None:
    services.run_release(run_id=run_id, attempt=attempt, handle=handle)


@shared_task(name="runs.delete_run_files", ignore_result=True)
def delete_run_files(run_ids: list[str]) -> None:
    archives.run_files_delete(run_ids=run_ids)


@shared_task(name="runs.make_fields", ignore_result=True)
def make_fields(run_id: str, attempt: int) -> None:
    flow_fields.run_make_fields(run_id=run_id, attempt=attempt)
