"""Image tasks. `build_image` is the one long task (a build takes a minute or two): see
images/builds.py for why that is safe (advisory lock, idempotent, redelivery rebuilds)."""

from celery import shared_task

from images.builds import image_build
from images.vm import vm_bake_step


@shared_task(name="images.build_image", ignore_result=True)
def build_image(image_id: int, force: bool = False) -> None:
    image_build(image_id=image_id, force=force)


@shared_task(name="images.bake_vm_image", ignore_result=True)
def bake_vm_image(image_id: int, backend_id: int, force: bool = False, chain: str = "") -> None:
    """One step of a VM image bake on a cloud backend (images/vm.py); it enqueues the next
    step with the countdown the step asks for, until the bake is over."""
    step = vm_bake_step(image_id=image_id, backend_id=backend_id, force=force, chain=chain)
    if step is not None:
        bake_vm_image.apply_async(
            (image_id, backend_id), {"chain": step.chain}, countdown=step.delay
        )
