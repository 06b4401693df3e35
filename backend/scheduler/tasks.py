from celery import shared_task

from scheduler import services
from telemetry.events import publish_runs_changed

INLINE_DISPATCH = 8  # admitted runs this task starts itself (a crash: the reaper redispatches)


@shared_task(name="scheduler.schedule_tenant", ignore_result=True)
def schedule_tenant(tenant_id: int) -> None:
    # the few runs one ending run makes room for start from this task: no second task
    # round trip (and no `admitted` event, which their `provisioning` one follows at once);
    # a larger admission goes out as parallel dispatch tasks
    admitted = services.schedule_tenant(tenant_id=tenant_id, dispatch=False, publish=False)
    if len(admitted) > INLINE_DISPATCH:
        publish_runs_changed(admitted)
    services.dispatch_admitted(admitted, inline=INLINE_DISPATCH)


@shared_task(name="scheduler.tick", ignore_result=True)
def tick() -> None:
    services.schedule_all()
