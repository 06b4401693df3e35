"""Django admin pages: the image actions an operator runs from the images' list."""

from django.test import Client

from catalog.choices import ImageStatus
from catalog.models import Image


def _admin_client(api) -> Client:
    user = api.tenant.user
    user.is_staff = user.is_superuser = True
    user.save(update_fields=["is_staff", "is_superuser"])
    client = Client()
    client.force_login(user)
    return client


def test_the_retire_action_retires_the_selected_images(api, builds):
    image_id = api.post("/api/v1/images/", {"packages": ["pisofoam"]}, format="json").json()["id"]
    Image.objects.filter(pk=image_id).update(status=ImageStatus.FAILED)
    r = _admin_client(api).post(
        "/admin/catalog/image/", {"action": "retire", "_selected_action": [image_id]}
    )
    assert r.status_code == 302
    assert Image.objects.get(pk=image_id).status == ImageStatus.RETIRED


def test_the_retire_action_says_why_an_image_being_built_stays(api, builds):
    image_id = api.post("/api/v1/images/", {"packages": ["pisofoam"]}, format="json").json()["id"]
    Image.objects.filter(pk=image_id).update(status=ImageStatus.BUILDING)
    r = _admin_client(api).post(
        "/admin/catalog/image/",
        {"action": "retire", "_selected_action": [image_id]},
        follow=True,
    )
    assert "being built right now" in r.content.decode()
    assert Image.objects.get(pk=image_id).status == ImageStatus.BUILDING
