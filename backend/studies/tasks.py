"""Thin, idempotent tasks: take ids, call one service."""

from celery import shared_task

from studies import services


@shared_task(name="studies.dispatch_runs", ignore_result=True)
def dispatch_runs(run_ids: list[str]) -> None:
    services.runs_dispatch(run_ids=run_ids)


@shared_task(name="studies.kill_run", ignore_result=True)
def kill_run(run_id: str, attempt: int, handle: str) -> None:
    services.run_kill(run_id=run_id, attempt=attempt, handle=handle)


@shared_task(name="studies.refresh_study", ignore_result=True)
def refresh_study(study_id: str) -> None:
    services.study_refresh_state(study_id=study_id)


@shared_task(name="studies.reap", ignore_result=True)
def reap() -> None:
    services.runs_reap()


@shared_task(name="studies.release_run", ignore_result=True)
def release_run(run_id: str, attempt: int, handle: str) -> None:
    services.run_release(run_id=run_id, attempt=attempt, handle=handle)


@shared_task(name="studies.delete_run_files", ignore_result=True)
def delete_run_files(run_ids: list[str]) -> None:
    services.run_files_delete(run_ids=run_ids)
