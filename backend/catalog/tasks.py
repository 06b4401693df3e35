"""Catalog tasks. `build_image` is the one long task (a build takes a minute or two): see
catalog/images.py for why that is safe (advisory lock, idempotent, redelivery rebuilds)."""

from celery import shared_task

from catalog import cloud, images


@shared_task(name="catalog.build_image", ignore_result=True)
def build_image(image_id: int, force: bool = False) -> None:
    images.image_build(image_id=image_id, force=force)


@shared_task(name="catalog.cloud_limits", ignore_result=True)
def refresh_cloud_limits() -> None:
    cloud.cloud_limits_refresh_all()


@shared_task(name="catalog.stack_events", ignore_result=True)
def sync_stack_events() -> None:
    cloud.stack_events_sync()


@shared_task(name="catalog.reap_leaks", ignore_result=True)
def reap_leaks() -> None:
    cloud.leaks_reap()


@shared_task(name="catalog.bake_vm_image", ignore_result=True)
def bake_vm_image(image_id: int, backend_id: int, force: bool = False, chain: str = "") -> None:
    """One step of a VM image bake on an OpenStack backend (catalog/vm.py); it enqueues the
    next step with the countdown the step asks for, until the bake is over."""
    from catalog.vm import vm_bake_step

    step = vm_bake_step(image_id=image_id, backend_id=backend_id, force=force, chain=chain)
    if step is not None:
        bake_vm_image.apply_async(
            (image_id, backend_id), {"chain": step.chain}, countdown=step.delay
        )
