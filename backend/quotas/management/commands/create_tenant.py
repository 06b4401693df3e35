from django.core.management.base import BaseCommand, CommandError

from core.exceptions import ApplicationError
from quotas.services import tenant_provision
from tenancy.choices import Role


class Command(BaseCommand):
    help = "Create a tenant with a user and its quota, or update them."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--user", dest="username")
        parser.add_argument("--password")
        parser.add_argument("--role", choices=[r.value for r in Role], default=Role.ADMIN.value)
        parser.add_argument("--cores", type=int)
        parser.add_argument("--memory-gb", type=float)
        parser.add_argument("--max-runs", type=int)
        parser.add_argument("--max-nodes", type=int)
        parser.add_argument(
            "--max-queued-runs", type=int, help="runs queued or running at once (default 1000)"
        )
        parser.add_argument("--storage-gb", type=float)

    def handle(self, *args, **o):
        try:
            tenant = tenant_provision(
                name=o["name"],
                username=o["username"],
                password=o["password"],
                role=Role(o["role"]),
                quota={
                    "cores": o["cores"],
                    "memory_gb": o["memory_gb"],
                    "max_runs": o["max_runs"],
                    "max_nodes": o["max_nodes"],
                    "max_queued_runs": o["max_queued_runs"],
                    "storage_gb": o["storage_gb"],
                },
            )
        except ApplicationError as exc:
            raise CommandError(str(exc)) from exc
        q = tenant.quota
        self.stdout.write(
            f"tenant {tenant.name}: {q.cores} cores, {q.memory_gb:g} GB, {q.max_runs} concurrent runs, "
            f"{q.max_queued_runs} queued or running"
            + (f"; user {o['username']}" if o["username"] else "")
        )
