from django.core.management.base import BaseCommand

from catalog.services import catalog_sync


class Command(BaseCommand):
    help = "Sync solver packages (packages/), case templates (templates/) and the local backend."

    def handle(self, *args, **options):
        counts = catalog_sync()
        self.stdout.write(f"synced {counts['packages']} packages, {counts['templates']} templates")
