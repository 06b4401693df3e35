"""Catalog tasks. `build_image` is the one long task (a build takes a minute or two): see
catalog/images.py for why that is safe (advisory lock, idempotent, redelivery rebuilds)."""

from celery import shared_task

from catalog import images


@shared_task(name="catalog.build_image", ignore_result=True)
def build_image(image_id: int, force: bool = False) -> None:
    images.image_build(image_id=image_id, force=force)
