"""Settings shared by every environment. 12-factor: everything variable comes from env."""

from pathlib import Path
from urllib.parse import urlsplit

from config.env import BACKEND_DIR, ROOT_DIR, env

DEBUG = env.bool("DJANGO_DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY")
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
    "core",
    "tenancy",
    "quotas",
    "catalog",
    "studies",
    "scheduler",
    "telemetry",
    "administration",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
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
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # served locally: no CDN needed
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RunStateEnum": "studies.choices.RunState",
        "StudyStateEnum": "studies.choices.StudyState",
        "BackendKindEnum": "catalog.choices.BackendKind",
        "ImageKindEnum": "catalog.choices.ImageKind",
        "ImageStatusEnum": "catalog.choices.ImageStatus",
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

LOGIN_URL = "/admin/login/"
LOGIN_REDIRECT_URL = "/api/v1/"

# --- Windtunnel ---------------------------------------------------------------
WINDTUNNEL = {
    # URL the run agents report to (the ingest API). Must be reachable from compute nodes.
    "PUBLIC_URL": env(
        "WINDTUNNEL_PUBLIC_URL", default=f"http://127.0.0.1:{env.int('PORT', default=8000)}"
    ),
    "MAX_RUNS_PER_STUDY": env.int("WINDTUNNEL_MAX_RUNS_PER_STUDY", default=10_000),
    "MAX_RETRIES": env.int("WINDTUNNEL_MAX_RETRIES", default=2),
    "HEARTBEAT_INTERVAL": env.float("WINDTUNNEL_HEARTBEAT_INTERVAL", default=5.0),
    "HEARTBEAT_TIMEOUT": env.float("WINDTUNNEL_HEARTBEAT_TIMEOUT", default=60.0),
    "DISPATCH_TIMEOUT": env.float("WINDTUNNEL_DISPATCH_TIMEOUT", default=60.0),
    # an agent sends telemetry this often while someone watches its run live, and every
    # TELEMETRY_IDLE_INTERVAL while nobody does (telemetry/watch.py)
    "TELEMETRY_INTERVAL": env.float("WINDTUNNEL_TELEMETRY_INTERVAL", default=0.25),
    "TELEMETRY_IDLE_INTERVAL": env.float("WINDTUNNEL_TELEMETRY_IDLE_INTERVAL", default=2.0),
    # after a cancel or a policy stop, the agent ends cleanly on its next report; the backend
    # kill follows after this many seconds as a safety net
    "STOP_GRACE": env.float("WINDTUNNEL_STOP_GRACE", default=30.0),
    # a backend that cannot take a run (unreachable) gets it again after 5, 10, … 60 s; this
    # many times before the run fails (30: about 25 minutes)
    "DISPATCH_RETRIES": env.int("WINDTUNNEL_DISPATCH_RETRIES", default=30),
    # cases may run shell commands and compile code (OpenFOAM's allowSystemOperations): only
    # where every user is trusted with the compute hosts (orchestration/environment.py)
    "CASE_SYSTEM_OPERATIONS": env.bool("WINDTUNNEL_CASE_SYSTEM_OPERATIONS", default=False),
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
    "LOCAL_CORES": env.int("WINDTUNNEL_LOCAL_CORES", default=0),  # 0 = os.cpu_count()
    "LOCAL_MEMORY_GB": env.float("WINDTUNNEL_LOCAL_MEMORY_GB", default=0.0),  # 0 = all RAM
    "OPENFOAM_DIR": env("WM_PROJECT_DIR", default="/usr/share/openfoam"),
    "SECRETS_KEY": env("WINDTUNNEL_SECRETS_KEY", default=""),
    "TEMPLATES_DIR": Path(env("WINDTUNNEL_TEMPLATES_DIR", default=str(ROOT_DIR / "templates"))),
    "PACKAGES_DIR": Path(env("WINDTUNNEL_PACKAGES_DIR", default=str(ROOT_DIR / "packages"))),
}

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
