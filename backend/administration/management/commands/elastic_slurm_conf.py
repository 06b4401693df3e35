from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog.models import Backend
from compute.backends import elastic_files
from core.exceptions import ApplicationError


class Command(BaseCommand):
    help = (
        "Render what a Slurm backend's elastic partition needs on the controller: the "
        "slurm.conf lines (nodes, partition, power saving), the power programs' config (the "
        "cloud by its clouds.yaml name, no secrets) and their wrappers. Prints them, or "
        "writes them under --out."
    )

    def add_arguments(self, parser):
        parser.add_argument("backend", help="the Slurm backend's name")
        parser.add_argument("--out", help="write the files under this directory instead")

    def handle(self, *args, **options):
        backend = Backend.objects.filter(name=options["backend"]).first()
        if backend is None:
            raise CommandError(f"no backend named {options['backend']!r}")
        try:
            files = elastic_files(backend=backend)
        except ApplicationError as exc:
            raise CommandError(f"{exc.field}: {exc}") from exc
        for path, text in files.items():
            if options["out"]:
                target = Path(options["out"]) / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
                # the programs' config names the cloud only, but stays the SlurmUser's
                mode = (
                    0o600 if path.endswith(".json") else 0o644 if path.endswith(".conf") else 0o755
                )
                target.chmod(mode)
                self.stdout.write(f"wrote {target}")
            else:
                self.stdout.write(f"# ---- {path}\n{text}")
