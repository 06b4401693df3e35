"""Settings shared by every environment. 12-factor: everything variable comes from env."""

from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from config.env import BACKEND_DIR, ROOT_DIR, env

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# the local and production settings refuse a missing or publicly known key (config.keys)
SECRET_KEY = env("SECRET_KEY", default="")
# older keys that still verify signatures while a new SECRET_KEY takes over (sessions, …)
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    # the project's apps, lowest layer first (docs/development/layers.md)
    "core",
    "tenancy",
    "catalog",
    "compute",
    "pools",
    "quotas",
    "studies",
    "telemetry",
    "runs",
    "images",
    "scheduler",
    "dispatch",
    "ingest",
    "administration",
    "notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BACKEND_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": env.db("DATABASE_URL")}
# A psycopg connection pool per process (uvicorn runs each request's sync code in a thread of
# its own, so thread-local persistent connections would mean a new connection per request).
# DB_POOL=0 falls back to Django's per-thread connections kept DB_CONN_MAX_AGE seconds.
DB_POOL = env.bool("DB_POOL", default=True)
if DB_POOL:
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": env.int("DB_POOL_MAX_SIZE", default=12),
        "timeout": 30,
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env("REDIS_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
}
# Live events go through Redis pub/sub: a group send is one PUBLISH, however many clients
# watch (the list-based layer ran a script per message and member). Delivery is at most once,
# which the live protocol expects anyway: the database is the record, clients repair gaps
# from REST (docs/live.md). Pub/sub channels ignore Redis database numbers, so the prefix
# carries it: test and benchmark stacks on other databases never hear each other.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [REDIS_URL],
            "prefix": "wt-live-db" + (urlsplit(REDIS_URL).path.strip("/") or "0"),
        },
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = ROOT_DIR / ".data" / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [d for d in [ROOT_DIR / "frontend" / "dist"] if d.exists()]

# Where uploads, run work directories and result archives live.
DATA_DIR = Path(env("WINDTUNNEL_DATA_DIR", default=str(ROOT_DIR / ".data" / "files")))
MEDIA_ROOT = DATA_DIR
UPLOAD_DIR = DATA_DIR / "uploads"
RUNS_DIR = DATA_DIR / "runs"
ARCHIVE_DIR = DATA_DIR / "archives"
FILE_UPLOAD_TEMP_DIR = None
DATA_UPLOAD_MAX_MEMORY_SIZE = 20 * 1024 * 1024  # JSON bodies (telemetry batches)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenancy.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["tenancy.permissions.IsTenantMember"],
    # JSON nested past a sane depth is a 400, not a RecursionError (core/parsers.py)
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "core.exceptions.exception_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Windtunnel API",
    "DESCRIPTION": "Parametric simulation studies on local, Slurm and OpenStack compute.",
    "VERSION": "1.0.0",
    # OpenAPI 3.1: its schemas are JSON Schema 2020-12, so the study spec's and the agent
    # messages' schemas (<app>/schemas/*.json) are published as they are (core.schemas)
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.schemas.add_components",
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # served locally: no CDN needed
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RunStateEnum": "studies.choices.RunState",
        "EndReasonEnum": "studies.choices.EndReason",
        "StudyStateEnum": "studies.choices.StudyState",
        "BackendKindEnum": "catalog.choices.BackendKind",
        "ImageKindEnum": "catalog.choices.ImageKind",
        "ImageStatusEnum": "catalog.choices.ImageStatus",
        "NotificationEventEnum": "notifications.choices.EventType",
        "SubscribableEventEnum": "notifications.choices.SUBSCRIBABLE_CHOICES",
        "WebhookScopeEnum": "notifications.choices.WebhookScope",
        "EmailScopeEnum": "notifications.choices.EmailScope",
        "DeliveryStateEnum": "notifications.choices.DeliveryState",
        "PlotModeEnum": ["points", "binned", "heatmap"],
    },
}

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 4
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_QUEUE", default="windtunnel")
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 300}
CELERY_BEAT_TICK = env.float("WINDTUNNEL_TICK_SECONDS", default=10.0)
# OpenStack backends: how often the project's limits are read and leaked servers reaped
CLOUD_REFRESH_SECONDS = env.float("WINDTUNNEL_CLOUD_REFRESH_SECONDS", default=60.0)
# warm pools (docs/pools.md): how often the autoscaler decides; a worker whose pilot has not
# heartbeated for POOL_WORKER_TIMEOUT s is lost (its runs requeued, its server deleted)
POOL_AUTOSCALE_SECONDS = env.float("WINDTUNNEL_POOL_AUTOSCALE_SECONDS", default=5.0)
POOL_WORKER_TIMEOUT = env.float("WINDTUNNEL_POOL_WORKER_TIMEOUT", default=60.0)
# a pilot that cannot reach the portal for this long stops its runs and exits
POOL_PILOT_GRACE = env.float("WINDTUNNEL_POOL_PILOT_GRACE", default=120.0)
# placement (docs/pools.md, Placement): a worker that has not asked for runs for this long
# counts as full, so runs placed on it go to others; image_aware's owner takes runs of its
# images while its load (busy cores / cores) is at most the threshold
POOL_PLACEMENT_HOLD = env.float("WINDTUNNEL_POOL_PLACEMENT_HOLD", default=5.0)
POOL_PLACEMENT_THRESHOLD = env.float("WINDTUNNEL_POOL_PLACEMENT_THRESHOLD", default=0.8)

LOGIN_URL = "/admin/login/"
LOGIN_REDIRECT_URL = "/api/v1/"

# --- Windtunnel ---------------------------------------------------------------
WINDTUNNEL = {
    # URL the run agents report to (the ingest API). Must be reachable from compute nodes.
    "PUBLIC_URL": env(
        "WINDTUNNEL_PUBLIC_URL", default=f"http://127.0.0.1:{env.int('PORT', default=8000)}"
    ),
    "MAX_RUNS_PER_STUDY": env.int("WINDTUNNEL_MAX_RUNS_PER_STUDY", default=1_000_000),
    "MAX_RETRIES": env.int("WINDTUNNEL_MAX_RETRIES", default=2),
    # the order in which admission considers a tenant's queued runs (scheduler/policies.py)
    "ADMISSION_POLICY": env("WINDTUNNEL_ADMISSION_POLICY", default="fifo"),
    "HEARTBEAT_INTERVAL": env.float("WINDTUNNEL_HEARTBEAT_INTERVAL", default=5.0),
    "HEARTBEAT_TIMEOUT": env.float("WINDTUNNEL_HEARTBEAT_TIMEOUT", default=60.0),
    "DISPATCH_TIMEOUT": env.float("WINDTUNNEL_DISPATCH_TIMEOUT", default=60.0),
    # while someone watches its run live an agent sends a new line at once when its link
    # is idle, at most one batch per TELEMETRY_INTERVAL (Nagle-style: what arrives while a
    # batch is in flight goes in the next); every TELEMETRY_IDLE_INTERVAL while nobody
    # watches (telemetry/watch.py). On 2 cores, 20 watched runs: p95 333 ms at 0.25 s,
    # 203 ms at 0.1 s (288 ms with a core busy elsewhere), 634 ms at 0.05 s (the fan-out
    # falls behind the batches): docs/live.md
    "TELEMETRY_INTERVAL": env.float("WINDTUNNEL_TELEMETRY_INTERVAL", default=0.1),
    "TELEMETRY_IDLE_INTERVAL": env.float("WINDTUNNEL_TELEMETRY_IDLE_INTERVAL", default=2.0),
    # an open websocket's credential (token, sign-in, its user's access) is checked again
    # this often by its web process, all of the process's sockets in one go: what closes it
    # when the order to close it was lost (tenancy.sockets; docs/live.md)
    "WEBSOCKET_RECHECK_SECONDS": env.float("WINDTUNNEL_WEBSOCKET_RECHECK_SECONDS", default=3.0),
    # after a cancel or a policy stop, the agent ends cleanly on its next report; the backend
    # kill follows after this many seconds as a safety net
    "STOP_GRACE": env.float("WINDTUNNEL_STOP_GRACE", default=30.0),
    # on a backend of the portal's own cores (local), a run hands its cores to the next run
    # this many seconds before its last step is foreseen to end; the next run's agent
    # prepares meanwhile and starts the moment the step is over (orchestration/agent/
    # handover.py); 0: the cores go back with the final report
    "HANDOVER_LEAD": env.float("WINDTUNNEL_HANDOVER_LEAD", default=0.5),
    # a run's agent stops a solver that makes no progress (no new time step) for
    # max(STALL_SECONDS, STALL_FACTOR x its longest gap between time steps so far), or before
    # its first time step for max(STALL_SECONDS, STALL_STARTUP_SECONDS); a backend's or a
    # study's stall_seconds replaces STALL_SECONDS (orchestration/agent/watchdog.py)
    "STALL_SECONDS": env.float("WINDTUNNEL_STALL_SECONDS", default=120.0),
    "STALL_FACTOR": env.float("WINDTUNNEL_STALL_FACTOR", default=10.0),
    "STALL_STARTUP_SECONDS": env.float("WINDTUNNEL_STALL_STARTUP_SECONDS", default=600.0),
    # a backend that cannot take a run (unreachable) gets it again after 5, 10, … 60 s; this
    # many times before the run fails (30: about 25 minutes)
    "DISPATCH_RETRIES": env.int("WINDTUNNEL_DISPATCH_RETRIES", default=30),
    # cases may run shell commands and compile code (OpenFOAM's allowSystemOperations): only
    # where every user is trusted with the compute hosts (orchestration/environment.py)
    "CASE_SYSTEM_OPERATIONS": env.bool("WINDTUNNEL_CASE_SYSTEM_OPERATIONS", default=False),
    # every step of a case runs in a sandbox (docs/security.md); "off" only where every user
    # is trusted with the compute hosts. Its limits: orchestration/agent/sandbox.py
    "CASE_SANDBOX": env.str("WINDTUNNEL_CASE_SANDBOX", default="on"),
    "CASE_LIMITS": {
        "address_space_gb": env.int("WINDTUNNEL_CASE_ADDRESS_SPACE_GB", default=0),
        "cpu_hours": env.int("WINDTUNNEL_CASE_CPU_HOURS", default=0),
        "file_size_gb": env.int("WINDTUNNEL_CASE_FILE_SIZE_GB", default=64),
        "processes": env.int("WINDTUNNEL_CASE_PROCESSES", default=1024),
    },
    # where runs' cgroups are made (a delegated cgroup; "": beside the agent's own, see
    # orchestration/agent/cgroups.py)
    "CGROUP_PARENT": env.str("WINDTUNNEL_CGROUP_PARENT", default=""),
    # the disk a run's directory may take (GB; its agent ends the run past it), capped by
    # its tenant's storage quota (quotas.fit.run_disk_gb); 0: no budget but the quota
    "RUN_DISK_GB": env.float("WINDTUNNEL_RUN_DISK_GB", default=50.0),
    "UPLOAD_MAX_BYTES": env.int("WINDTUNNEL_UPLOAD_MAX_BYTES", default=200 * 1024 * 1024),
    "UPLOAD_MAX_ENTRIES": env.int("WINDTUNNEL_UPLOAD_MAX_ENTRIES", default=20_000),
    "UPLOAD_MAX_UNPACKED_BYTES": env.int(
        "WINDTUNNEL_UPLOAD_MAX_UNPACKED_BYTES", default=2 * 1024**3
    ),
    "UPLOAD_MAX_RATIO": env.float("WINDTUNNEL_UPLOAD_MAX_RATIO", default=200.0),
    "ARCHIVE_MAX_MB": env.int("WINDTUNNEL_ARCHIVE_MAX_MB", default=512),
    # VM disk images uploaded through the admin API into an OpenStack backend's Glance
    "VM_IMAGE_UPLOAD_MAX_BYTES": env.int(
        "WINDTUNNEL_VM_IMAGE_UPLOAD_MAX_BYTES", default=20 * 1024**3
    ),
    # Sign-in throttling (tenancy/throttle.py). The client address of a request is
    # REMOTE_ADDR unless that is one of these proxies (addresses or networks, e.g.
    # 10.0.0.0/8): then X-Forwarded-For is read, from the right, past them.
    "TRUSTED_PROXIES": env.list("WINDTUNNEL_TRUSTED_PROXIES", default=[]),
    # attempts per client address and minute, whatever the usernames (0: no limit)
    "LOGIN_ATTEMPTS_PER_MINUTE": env.int("WINDTUNNEL_LOGIN_ATTEMPTS_PER_MINUTE", default=30),
    # failures in a row a username may have, from anywhere, before it is locked for 15 s,
    # then 30 s, 1 min, … up to the maximum; a success starts it afresh
    "LOGIN_FAILURES_BEFORE_BACKOFF": env.int("WINDTUNNEL_LOGIN_FAILURES_BEFORE_BACKOFF", default=5),
    "LOGIN_BACKOFF_MAX_SECONDS": env.int("WINDTUNNEL_LOGIN_BACKOFF_MAX_SECONDS", default=900),
    # study previews per tenant and minute, all its members and tokens together (0: no
    # limit): the wizard asks one at each pause in typing (tenancy/throttle.py)
    "PREVIEWS_PER_MINUTE": env.int("WINDTUNNEL_PREVIEWS_PER_MINUTE", default=60),
    "LOCAL_CORES": env.int("WINDTUNNEL_LOCAL_CORES", default=0),  # 0 = os.cpu_count()
    "LOCAL_MEMORY_GB": env.float("WINDTUNNEL_LOCAL_MEMORY_GB", default=0.0),  # 0 = all RAM
    "OPENFOAM_DIR": env("WM_PROJECT_DIR", default="/usr/share/openfoam"),
    # the Fernet key that encrypts stored backend credentials (core.crypto); scripts/bootstrap
    # makes one per installation. Unset, a key derived from SECRET_KEY does (as before it
    # existed), which check --deploy warns about.
    "SECRETS_KEY": env("WINDTUNNEL_SECRETS_KEY", default=""),
    # older Fernet keys, and older SECRET_KEYs whose derived key encrypted credentials: they
    # still decrypt until `manage.py reencrypt_secrets` moves everything to SECRETS_KEY
    "SECRETS_KEY_FALLBACKS": env.list("WINDTUNNEL_SECRETS_KEY_FALLBACKS", default=[]),
    "LEGACY_SECRET_KEYS": env.list("WINDTUNNEL_LEGACY_SECRET_KEYS", default=[]),
    # notifications (docs/notifications.md): webhooks to private, loopback or link-local
    # addresses are refused unless this is set (local and test settings set it: a
    # self-hosted portal's receivers are often on its own network)
    "WEBHOOK_ALLOW_PRIVATE": env.bool("WINDTUNNEL_WEBHOOK_ALLOW_PRIVATE", default=False),
    "WEBHOOK_TIMEOUT": env.float("WINDTUNNEL_WEBHOOK_TIMEOUT", default=10.0),
    # seconds before each retry of a failed delivery: 6 attempts over about 7 hours
    "WEBHOOK_RETRY_DELAYS": env.list(
        "WINDTUNNEL_WEBHOOK_RETRY_DELAYS", cast=float, default=[30, 120, 600, 3600, 21600]
    ),
    # run.failed / run.diverged events per study; past it they are counted in the study's
    # end event (data.run_events_suppressed)
    "NOTIFY_RUN_EVENTS_PER_STUDY": env.int("WINDTUNNEL_NOTIFY_RUN_EVENTS_PER_STUDY", default=10),
    # /metrics for Prometheus (docs/metrics.md): answered only with this bearer token (unset:
    # 404); the web and worker processes count into files under METRICS_DIR
    # (prometheus-client's multiprocess mode), which every process of the portal must share
    "METRICS_TOKEN": env("WINDTUNNEL_METRICS_TOKEN", default=""),
    # beside the data directory, not in it: backups and restores of the data directory leave
    # it alone (every process of the portal, even a management command, opens it)
    "METRICS_DIR": Path(
        env("WINDTUNNEL_METRICS_DIR", default=str(DATA_DIR.with_name(DATA_DIR.name + "-metrics")))
    ),
    "TEMPLATES_DIR": Path(env("WINDTUNNEL_TEMPLATES_DIR", default=str(ROOT_DIR / "templates"))),
    "PACKAGES_DIR": Path(env("WINDTUNNEL_PACKAGES_DIR", default=str(ROOT_DIR / "packages"))),
    # the deployment's build (a commit, an image tag), shown with the portal's version in
    # every run's provenance (studies.provenance)
    "BUILD": env("WINDTUNNEL_BUILD", default=""),
}
if WINDTUNNEL["WEBSOCKET_RECHECK_SECONDS"] <= 0:
    raise ImproperlyConfigured(
        f"WINDTUNNEL_WEBSOCKET_RECHECK_SECONDS={WINDTUNNEL['WEBSOCKET_RECHECK_SECONDS']}: give a "
        "number of seconds above 0 (3 by default: an open websocket whose credential ended is "
        "closed within that time even when the order to close it was lost)"
    )
if WINDTUNNEL["CASE_SANDBOX"] not in ("on", "off"):
    raise ImproperlyConfigured(
        f"WINDTUNNEL_CASE_SANDBOX={WINDTUNNEL['CASE_SANDBOX']!r}: use on (the default) or off "
        "(only where every user is trusted with the compute hosts)"
    )

if WINDTUNNEL["RUN_DISK_GB"] < 0:
    raise ImproperlyConfigured(
        f"WINDTUNNEL_RUN_DISK_GB={WINDTUNNEL['RUN_DISK_GB']:g}: give the GB a run's directory "
        "may take (50 by default), or 0 for no budget but the tenant's storage quota"
    )

# E-mail (notifications): SMTP when EMAIL_HOST is set, else printed on the console
EMAIL_HOST = env("EMAIL_HOST", default="")
EMAIL_BACKEND = env(
    "EMAIL_BACKEND",
    default="django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=30)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="Windtunnel <windtunnel@localhost>")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # once, through our handler (Django's default config adds a console handler of its own)
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # paramiko logs the known_hosts lines it rejects: pasted in by mistake, that could be
        # a private key
        "paramiko.hostkeys": {"level": "CRITICAL"},
    },
}
