"""Set up the demo tenant, its users and the demo study (idempotent), and print how to sign in."""

import json
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from catalog.models import CaseTemplate
from quotas.services import tenant_provision
from studies.models import Study
from studies.services import study_create
from tenancy.choices import Role
from tenancy.services import api_token_create

DEMO_STUDY = "Demo: airfoil lift vs angle of attack"


class Command(BaseCommand):
    help = "Create the demo tenant, user and study (once) and print the credentials."

    def add_arguments(self, parser):
        parser.add_argument("--no-study", action="store_true", help="do not submit the demo study")
        parser.add_argument("--url", default="http://127.0.0.1:8000")

    def handle(self, *args, **o):
        creds_file = Path(settings.DATA_DIR).parent / "demo-credentials.json"
        if creds_file.exists():
            creds = json.loads(creds_file.read_text())
        else:
            creds = {
                "username": "demo",
                "password": secrets.token_urlsafe(12),
                "admin_password": secrets.token_urlsafe(12),
            }
        tenant = tenant_provision(
            name="demo",
            username=creds["username"],
            password=creds["password"],
            role=Role.ADMIN,
            quota={"cores": 4, "memory_gb": 8, "max_runs": 4, "max_nodes": 4},
        )
        user_model = get_user_model()
        admin, _ = user_model.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        admin.is_staff = admin.is_superuser = True
        admin.set_password(creds["admin_password"])
        admin.save()
        tenant_provision(name="demo", username="admin", role=Role.ADMIN)
        if "token" not in creds:
            creds["token"] = api_token_create(
                user=user_model.objects.get(username=creds["username"]), name="demo"
            )
        creds_file.parent.mkdir(parents=True, exist_ok=True)
        creds_file.write_text(json.dumps(creds))
        creds_file.chmod(0o600)

        study = Study.objects.filter(tenant=tenant, name=DEMO_STUDY).first()
        if study is None and not o["no_study"]:
            template = CaseTemplate.objects.get(name="airfoil2d")
            demo = template.spec.get("demo") or {}
            spec = {
                "name": DEMO_STUDY,
                "template": "airfoil2d",
                "parameters": demo.get("parameters") or {"aoa": {"values": [-4, 0, 4, 8, 12]}},
                "combine": demo.get("combine", "grid"),
            }
            study = study_create(
                tenant=tenant,
                owner=user_model.objects.get(username=creds["username"]),
                spec=spec,
                submit=True,
            )
        url = o["url"].rstrip("/")
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Windtunnel is running at {url}/"))
        self.stdout.write(
            f"  sign in:      {url}/login   user {creds['username']}  password {creds['password']}"
        )
        self.stdout.write(
            f"  Django admin: {url}/admin/            user admin  password {creds['admin_password']}"
        )
        self.stdout.write(f"  API token:    {creds['token']}   (Authorization: Token …)")
        self.stdout.write(f"  API docs:     {url}/api/docs/")
        if study is not None:
            self.stdout.write(
                f"  demo study:   {url}/api/v1/studies/{study.id}/   results: {url}/api/v1/studies/{study.id}/results.csv"
            )
        self.stdout.write("")
