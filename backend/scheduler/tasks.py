from celery import shared_task

from scheduler import services


@shared_task(name="scheduler.schedule_tenant", ignore_result=True)
def schedule_tenant(tenant_id: int) -> None:
    services.schedule_tenant(tenant_id=tenant_id)


@shared_task(name="scheduler.tick", ignore_result=True)
def tick() -> None:
    services.schedule_all()
