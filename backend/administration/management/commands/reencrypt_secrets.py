from django.core.management.base import BaseCommand

from administration.backends import backends_reencrypt_secrets


class Command(BaseCommand):
    help = (
        "Encrypt every backend's stored secrets again with the current key "
        "(WINDTUNNEL_SECRETS_KEY), from any older key that still decrypts them."
    )

    def handle(self, *args, **options):
        done, failed = backends_reencrypt_secrets()
        if done and options["verbosity"] >= 1:
            self.stdout.write(f"secrets of {len(done)} backend(s) encrypted with the current key")
        for name in failed:
            self.stderr.write(
                f"backend {name}: no configured key decrypts its secrets; enter them again "
                f"(PATCH /api/v1/admin/backends/{name}/) or add the old key to "
                "WINDTUNNEL_SECRETS_KEY_FALLBACKS or WINDTUNNEL_LEGACY_SECRET_KEYS"
            )
