"""Django settings, read from the environment through the strict helpers in config.env.

With no environment at all the project runs on its embedded defaults: SQLite (WAL) in ./var and kombu's
filesystem transport as the broker, so a fresh clone works on a bare machine. DATABASE_URL=postgres://...
and CELERY_BROKER_URL=amqp://... switch to PostgreSQL and RabbitMQ (production and CI).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from common.address import site_url
from config.env import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("REMINDERS_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DJANGO_DEBUG", False)
# Without DJANGO_SECRET_KEY the process runs with a development key; `check --deploy` reports it, so a
# production deployment cannot pass its checks on it.
SECRET_KEY = env_str(
    "DJANGO_SECRET_KEY", "django-insecure-development-key-set-DJANGO_SECRET_KEY-in-production"
)
# Earlier keys, still accepted when verifying signatures (answer links already sent) while a new
# DJANGO_SECRET_KEY takes over; drop one once the longest link it signed has expired (90 days).
SECRET_KEY_FALLBACKS = env_list("DJANGO_SECRET_KEY_FALLBACKS", [])
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "anymail",  # email providers behind Django's email framework, and webhooks (delivery/channels/email/)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "django_celery_beat",
    "common",
    "reminders",
    "trainings",
    "delivery",  # the push gateway, its channels and its tables (delivery/api.py is its door)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # The request's language from Accept-Language (no URL prefixes); a signed-in coach's admin is in their
    # own (trainings/admin/language.py, below). After CommonMiddleware: answer-link API calls skip it.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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


def _database(url: str) -> dict[str, Any]:
    url, hosts = _several_hosts(url)
    config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    if hosts:
        # libpq's multi-host form: psycopg gets host="h1,h2" and port="p1,p2" and tries them in order,
        # keeping the first that satisfies target_session_attrs (read-write: the primary, wherever it is).
        config["HOST"] = ",".join(host for host, _ in hosts)
        config["PORT"] = ",".join(port or "5432" for _, port in hosts) if any(p for _, p in hosts) else ""
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # WAL lets the web, the worker and beat read while one of them writes; IMMEDIATE takes the write
        # lock at BEGIN so two writers queue on the busy timeout instead of failing with "database is locked".
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        }
    return config


_HOST_PORT = re.compile(r"^(\[[^\]]*\]|[^:\[\]]*)(?::(\d*))?$")


def _several_hosts(url: str) -> tuple[str, list[tuple[str, str]]]:
    """`postgres://u@h1:5432,h2:5432/db?...` (libpq's failover list, which dj-database-url cannot parse):
    the URL with its first host only, and every (host, port) in order; ([]) for a URL with one host."""
    scheme, sep, rest = url.partition("://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    userinfo, at, hostlist = netloc.rpartition("@")
    if not sep or "," not in hostlist or not scheme.startswith("postgres"):
        return url, []
    hosts = []
    for item in hostlist.split(","):
        match = _HOST_PORT.match(item)
        if not match or not match.group(1):
            raise ImproperlyConfigured(f"DATABASE_URL: {item!r} in its host list is not host[:port]")
        hosts.append((match.group(1).strip("[]"), match.group(2) or ""))
    first = userinfo + at + hostlist.split(",", 1)[0]
    return f"{scheme}://{first}{rest[len(netloc) :]}", hosts


DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
# The languages the service speaks: a catalog each in locale/ (docs/development.md, "Languages"). A person
# chooses one of these; a stored value outside them reads as its base language or English (common/i18n.py).
LANGUAGES = [
    ("de", "Deutsch"),
    ("en", "English"),
    ("es", "Español"),
    ("fr", "Français"),
    ("it", "Italiano"),
    ("nl", "Nederlands"),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Dates as people read them in the admin: one format, with the zone (config/formats/en/formats.py).
FORMAT_MODULE_PATH = ["config.formats"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Security (production values come from the environment) -------------------------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", False)

# --- API ---------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "reminders.http.token_auth.TokenAuthentication",  # DRF's, its lookup one prepared statement
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's parsers, with the JSON one turning over-deep nesting and lone surrogates into a 400.
    "DEFAULT_PARSER_CLASSES": [
        "common.http.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # drf-spectacular's, with the input rules it leaves out (reminders/http/openapi.py).
    "DEFAULT_SCHEMA_CLASS": "reminders.http.openapi.ServerRulesSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # A JSON 400 where Django's parsing refuses a body (more than DATA_UPLOAD_MAX_NUMBER_FIELDS fields).
    "EXCEPTION_HANDLER": "reminders.http.limits.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Reminders API",
    "DESCRIPTION": "A durable scheduler: one-off and recurring reminders delivered to RabbitMQ, HTTP or "
    "in-process handlers, and the trainings reminders built on it.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request bodies advertised as JSON only: the API parses forms too (the browsable API's), but a client
    # generated from a schema offering three encodings sent multipart with every field twice.
    "PARSER_WHITELIST": ["common.http.parsers.StrictJSONParser"],
    # Every error answer each operation can give, and request bodies that take no other keys
    # (reminders/http/openapi.py), after the default enum hook.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "reminders.http.openapi.error_responses",
        "reminders.http.openapi.strict_request_bodies",
    ],
}

# --- Celery ------------------------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # kombu's exchange table (default ./control, an untracked folder in the checkout).
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Several brokers (a cluster's nodes) in one URL setting: `amqp://u:p@a:5672/v;amqp://u:p@b:5672/v`.
# Celery, beat and every publisher of the project's own move to the next when theirs dies.
CELERY_BROKER_FAILOVER_STRATEGY = "round-robin"
# classic: a queue lives on one node; quorum: replicated over the cluster (docs/operations/cluster.md).
# Every queue the service declares follows it: Celery's (Celery's own quorum support: no global QoS,
# publisher confirms), the push queue, its dead letters, the engine's `rabbitmq` callback queues.
# After a cluster node's loss the publishers wait this long before publishing on another node
# (common/amqp/publisher.py: RabbitMQ 3.10 drops what reaches a quorum queue before its new leader).
REMINDERS_BROKER_FAILOVER_SETTLE_SECONDS = env_float(
    "REMINDERS_BROKER_FAILOVER_SETTLE_SECONDS", 5.0, minimum=0.0
)
REMINDERS_QUEUE_TYPE = env_str("REMINDERS_QUEUE_TYPE", "classic").strip().lower()
if REMINDERS_QUEUE_TYPE not in ("classic", "quorum"):
    raise ImproperlyConfigured(f"REMINDERS_QUEUE_TYPE={REMINDERS_QUEUE_TYPE!r} is not one of classic, quorum")
if REMINDERS_QUEUE_TYPE == "quorum" and not CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_TASK_DEFAULT_QUEUE_TYPE = "quorum"
    CELERY_WORKER_DETECT_QUORUM_QUEUES = True  # Celery's default; said here: the worker's QoS is per consumer
    CELERY_BROKER_TRANSPORT_OPTIONS = {"confirm_publish": True}
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Lets several deployments (or test runs) share one broker vhost without taking each other's kicks.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")

# --- Reminders engine (see reminders/conf.py for what each one means) --------------------------------
REMINDERS_CALLBACK_BROKER_URL = env_str("REMINDERS_CALLBACK_BROKER_URL", CELERY_BROKER_URL)
REMINDERS_BATCH_SIZE = env_int("REMINDERS_BATCH_SIZE", 1000, minimum=1, maximum=20000)
REMINDERS_LEASE_SECONDS = env_int("REMINDERS_LEASE_SECONDS", 60, minimum=5)
REMINDERS_EARLY_SECONDS = env_int("REMINDERS_EARLY_SECONDS", 0, minimum=0, maximum=3600)
REMINDERS_MAX_ATTEMPTS = env_int("REMINDERS_MAX_ATTEMPTS", 10, minimum=1, maximum=100)
REMINDERS_RETRY_BASE_SECONDS = env_float("REMINDERS_RETRY_BASE_SECONDS", 5.0, minimum=0.0)
REMINDERS_RETRY_MAX_SECONDS = env_float("REMINDERS_RETRY_MAX_SECONDS", 3600.0, minimum=0.0)
REMINDERS_SCAN_SECONDS = env_float("REMINDERS_SCAN_SECONDS", 1.0, minimum=0.0)
REMINDERS_POLL_SECONDS = env_float("REMINDERS_POLL_SECONDS", 0.05, minimum=0.001)
# Precise firing (PostgreSQL): the scan claims rows due within this many seconds, holds them under its
# lease and publishes each at its instant (at most a quarter of the lease is used); SQLite polls (0).
# reminders/engine/lookahead.py, docs/engine.md "Firing on time".
REMINDERS_LOOKAHEAD_SECONDS = env_float(
    "REMINDERS_LOOKAHEAD_SECONDS",
    2.0 if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" else 0.0,
    minimum=0.0,
)
REMINDERS_RETENTION_DAYS = env_int("REMINDERS_RETENTION_DAYS", 7, minimum=0)
REMINDERS_PURGE_BATCH = env_int("REMINDERS_PURGE_BATCH", 5000, minimum=1)
REMINDERS_MAX_SCHEDULES = env_int("REMINDERS_MAX_SCHEDULES", 1000, minimum=1)
REMINDERS_MAX_BULK_JOBS = env_int("REMINDERS_MAX_BULK_JOBS", 10000, minimum=1)
REMINDERS_MAX_BULK_INSTANTS = env_int("REMINDERS_MAX_BULK_INSTANTS", 200000, minimum=1)
REMINDERS_MAX_PAYLOAD_BYTES = env_int("REMINDERS_MAX_PAYLOAD_BYTES", 65536, minimum=1)
REMINDERS_PAST_TOLERANCE_SECONDS = env_int("REMINDERS_PAST_TOLERANCE_SECONDS", 86400, minimum=0)
# Schedules, batches, throttling, priority (reminders/schedules/lifecycle.py, throttling.py, claiming.py).
REMINDERS_MAX_BATCH_SIZE = env_int("REMINDERS_MAX_BATCH_SIZE", 10000, minimum=1, maximum=100000)
REMINDERS_PREVIEW_MAX = env_int("REMINDERS_PREVIEW_MAX", 100, minimum=1)
# A schedule's point claimed late after later points came due is a misfire; under `skip`, the latest of
# them is still sent if it came due less than this ago (it is on time, not stale).
# reminders/schedules/lifecycle.py.
REMINDERS_MISFIRE_GRACE_SECONDS = env_float("REMINDERS_MISFIRE_GRACE_SECONDS", 5.0, minimum=0.0)
REMINDERS_PRIORITY_AGING_SECONDS = env_float("REMINDERS_PRIORITY_AGING_SECONDS", 60.0, minimum=0.0)
REMINDERS_PRIORITY_AGED_SHARE = env_float("REMINDERS_PRIORITY_AGED_SHARE", 0.1, minimum=0.0)
if REMINDERS_PRIORITY_AGED_SHARE > 1:
    raise ImproperlyConfigured("REMINDERS_PRIORITY_AGED_SHARE is a fraction of a batch, between 0 and 1")
REMINDERS_HTTP_SIGNING_SECRET = env_str("REMINDERS_HTTP_SIGNING_SECRET", "")
REMINDERS_HTTP_ALLOW_PRIVATE = env_bool("REMINDERS_HTTP_ALLOW_PRIVATE", False)
REMINDERS_HTTP_CONNECT_TIMEOUT = env_float("REMINDERS_HTTP_CONNECT_TIMEOUT", 3.0, minimum=0.1)
REMINDERS_HTTP_READ_TIMEOUT = env_float("REMINDERS_HTTP_READ_TIMEOUT", 10.0, minimum=0.1)
REMINDERS_HTTP_CONCURRENCY = env_int("REMINDERS_HTTP_CONCURRENCY", 16, minimum=1, maximum=256)
# HTTP chunks out at once per worker process on the lane beside its scan (reminders/engine/lane.py);
# 0 delivers them inside the scan, as before the lane.
REMINDERS_HTTP_LANE_CHUNKS = env_int("REMINDERS_HTTP_LANE_CHUNKS", 4, minimum=0, maximum=64)

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    # Answer-link and unsubscribe tokens are credentials: every handler redacts them from the message, the
    # traceback and the structured fields (reminders/ops/logfilters.py; gunicorn's access log:
    # reminders/ops/accesslog.py).
    "filters": {"redact_tokens": {"()": "reminders.ops.logfilters.TokenRedaction"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact_tokens"]},
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["redact_tokens"],
        },
    },
    # LOG_LEVEL: DEBUG, INFO (default), WARNING or ERROR for every process (docs/operations/monitoring.md).
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # The scan runs every second: Celery's per-task "received"/"succeeded" lines would drown everything
    # else. The scan logs its own summary when it claimed something.
    "loggers": {
        # Django's own handlers (DEFAULT_LOGGING: a DEBUG-only console and mail_admins, which sends nothing
        # without ADMINS, and the service sets none) replaced: its records (django.request, django.security,
        # ...) go to the root's redacting console. runserver's request lines keep their own format.
        "django": {"handlers": [], "level": "INFO"},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
        **{
            name: {"level": env_str("CELERY_TASK_LOG_LEVEL", "WARNING")}
            for name in ("celery.app.trace", "celery.worker.strategy", "celery.beat")
        },
        # The push providers' protocol libraries write whole header blocks and token responses at DEBUG
        # (the APNs JWT, the FCM access token): whatever LOG_LEVEL says, they log warnings and errors only.
        **{
            name: {"level": "WARNING"}
            for name in ("hpack", "h2", "httpx", "httpcore", "google.auth", "urllib3")
        },
    },
}

# --- Trainings (trainings/: reminders for questionnaires and invitations, push gateway) -----------------
# Durable queue the reminder handler publishes the JSON pushes to, one per player, several to a message
# (delivery/gateway/queue.py).
TRAININGS_PUSH_QUEUE = env_str("TRAININGS_PUSH_QUEUE", "trainings.push")
# Push gateway provider: "logging" (default, writes each push to the log) or "webhook" (POST to a URL).
TRAININGS_PUSH_PROVIDER = env_str("TRAININGS_PUSH_PROVIDER", "logging")
TRAININGS_PUSH_WEBHOOK_URL = env_str("TRAININGS_PUSH_WEBHOOK_URL", "")
TRAININGS_PUSH_WEBHOOK_SECRET = env_str("TRAININGS_PUSH_WEBHOOK_SECRET", "")
TRAININGS_PUSH_WEBHOOK_TIMEOUT = env_float("TRAININGS_PUSH_WEBHOOK_TIMEOUT", 10.0, minimum=0.1)
# First retry delay of a push a provider throttled or failed (doubles per attempt, capped at 5 min; a
# provider's Retry-After is the floor).
TRAININGS_GATEWAY_RETRY_SECONDS = env_float("TRAININGS_GATEWAY_RETRY_SECONDS", 5.0, minimum=0.0)
# Pushes the gateway takes from the queue ahead of its rounds (RabbitMQ's prefetch counts messages: a batch
# of TRAININGS_PUSH_MESSAGE_PUSHES pushes counts as that many here).
TRAININGS_GATEWAY_PREFETCH = env_int("TRAININGS_GATEWAY_PREFETCH", 1000, minimum=1, maximum=5000)
# Pushes per message on the push queue: a fired reminder's pushes travel in messages of up to this many, so
# the gateway's cost per message (decode, ack, waking its threads) is paid once for them all; the gateway
# still records, retries and dead-letters each push on its own. 1: a message per push.
TRAININGS_PUSH_MESSAGE_PUSHES = env_int("TRAININGS_PUSH_MESSAGE_PUSHES", 100, minimum=1, maximum=1000)

# --- Events back to the platform (trainings/webhooks/: signed HTTP callbacks of the engine) ----------
# Who subscribes to an event is read at most this often per process (an answer link is one statement).
TRAININGS_WEBHOOK_CACHE_SECONDS = env_float("TRAININGS_WEBHOOK_CACHE_SECONDS", 5.0, minimum=0.0)
# A subscription whose deliveries have all failed for this long is disabled (checked every 10 minutes).
TRAININGS_WEBHOOK_DISABLE_AFTER_HOURS = env_float("TRAININGS_WEBHOOK_DISABLE_AFTER_HOURS", 24.0, minimum=0.0)

# --- Push delivery to phones (delivery/: FCM HTTP v1, APNs over HTTP/2) --------------------------
# A provider whose credentials are unset is off; TRAININGS_PUSH_PROVIDER stands in for its devices.
PUSH_FCM_BASE_URL = env_str("PUSH_FCM_BASE_URL", "https://fcm.googleapis.com")
PUSH_FCM_CREDENTIALS_FILE = env_str("PUSH_FCM_CREDENTIALS_FILE", "")  # service-account JSON
PUSH_APNS_BASE_URL = env_str("PUSH_APNS_BASE_URL", "https://api.push.apple.com")
PUSH_APNS_KEY_FILE = env_str("PUSH_APNS_KEY_FILE", "")  # the .p8 (PEM) token signing key
PUSH_APNS_KEY_ID = env_str("PUSH_APNS_KEY_ID", "")
PUSH_APNS_TEAM_ID = env_str("PUSH_APNS_TEAM_ID", "")
PUSH_APNS_TOPIC = env_str("PUSH_APNS_TOPIC", "")  # the app's bundle id, unless a device names its own
PUSH_TLS_CA_FILE = env_str("PUSH_TLS_CA_FILE", "")  # extra CA bundle (a staging peer); empty: system's
PUSH_HTTP_TIMEOUT = env_float("PUSH_HTTP_TIMEOUT", 10.0, minimum=0.1)
# Provider quotas: the sends a minute every gateway together makes to one FCM project (Google's default
# quota: 600,000) and to one APNs team (Apple publishes none: 0 is no pacing), spread second by second
# and shared through the database (delivery/gateway/quota.py, docs/push.md#provider-quotas).
PUSH_FCM_QUOTA_PER_MINUTE = env_int("PUSH_FCM_QUOTA_PER_MINUTE", 600_000, minimum=0)
PUSH_APNS_QUOTA_PER_MINUTE = env_int("PUSH_APNS_QUOTA_PER_MINUTE", 0, minimum=0)
# httpx logs every request at INFO (with the device token in APNs paths): thousands a second.
LOGGING["loggers"]["httpx"] = {"level": "WARNING"}
# Sends in flight at once (HTTP/2 streams on the one APNs connection, FCM requests).
TRAININGS_GATEWAY_IN_FLIGHT = env_int("TRAININGS_GATEWAY_IN_FLIGHT", 100, minimum=1, maximum=1000)
# Messages taken from the queue per round of sends.
TRAININGS_GATEWAY_BATCH = env_int("TRAININGS_GATEWAY_BATCH", 500, minimum=1, maximum=5000)
# AMQP heartbeat of the gateway's broker connection: a gateway whose host is cut off stops beating, and
# RabbitMQ closes its connection after two missed beats and gives its unacked pushes to another gateway
# (without one, a silent connection holds them until TCP gives up, hours later). 0 turns it off.
TRAININGS_GATEWAY_HEARTBEAT_SECONDS = env_int(
    "TRAININGS_GATEWAY_HEARTBEAT_SECONDS", 30, minimum=0, maximum=600
)
# Bounded retries: after this many attempts, or this long after the push's fire time, a push still not
# delivered goes to the dead-letter queue `<TRAININGS_PUSH_QUEUE>.dead` (`manage.py push_dead_letters`).
# The age stays well under RabbitMQ's consumer_timeout (30 min): a retrying push is held unacked.
TRAININGS_GATEWAY_MAX_ATTEMPTS = env_int("TRAININGS_GATEWAY_MAX_ATTEMPTS", 8, minimum=1)
# A training moved by less than this keeps the reminders its players already had (no "90 min before"
# twice); players already reminded get one "training moved" push. A bigger move reminds them again.
TRAININGS_MOVE_REPEAT_MINUTES = env_int("TRAININGS_MOVE_REPEAT_MINUTES", 120, minimum=0)
# A "training moved" notice fires this long after the last move of a burst: a later move within it
# replaces the pending notice, so 14 quick edits reach each player once (docs/quiet-hours.md).
TRAININGS_MOVED_NOTICE_DELAY_SECONDS = env_int(
    "TRAININGS_MOVED_NOTICE_DELAY_SECONDS", 5, minimum=0, maximum=600
)
# A push still held this long after its release is released (or skipped, with the reason) by the hourly
# check and counted in trainings_held_pushes_overdue_total (docs/quiet-hours.md).
TRAININGS_HELD_GRACE_SECONDS = env_int("TRAININGS_HELD_GRACE_SECONDS", 300, minimum=0)
# A guardian's reminders of one minute that fire in different chunks wait this long after the minute's
# last one to go as one push (trainings/reminding/family_gather.py, docs/escalation.md); 0: no waiting.
TRAININGS_FAMILY_GATHER_SECONDS = env_int("TRAININGS_FAMILY_GATHER_SECONDS", 5, minimum=0, maximum=120)
# The post-training questionnaire closes this long after the training ends: a POST push later is stale.
TRAININGS_POST_QUESTIONNAIRE_HOURS = env_int("TRAININGS_POST_QUESTIONNAIRE_HOURS", 24, minimum=1)
TRAININGS_GATEWAY_MAX_AGE_SECONDS = env_int("TRAININGS_GATEWAY_MAX_AGE_SECONDS", 900, minimum=1, maximum=1500)
# Engine priority of reminder jobs, and how late a reminder may still go out (a "75 min before" push
# that is more than 15 min late would land after the next one).
TRAININGS_REMINDER_PRIORITY = env_int("TRAININGS_REMINDER_PRIORITY", 5, minimum=0, maximum=9)
TRAININGS_REMINDER_DEADLINE_SECONDS = env_int("TRAININGS_REMINDER_DEADLINE_SECONDS", 900, minimum=1)
# Answer links (trainings/answers/links.py): the site's public address that every link in a push or an
# email starts with, and how often one link may be followed ("<n>/<s|m|h|d>", per link, beside the
# per-address API limit).
# Default: where `make run` serves (ADDR, or the running stack's: common/address.py).
TRAININGS_PUBLIC_URL = env_str("TRAININGS_PUBLIC_URL", site_url(""))
if not TRAININGS_PUBLIC_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured("TRAININGS_PUBLIC_URL must be an http(s) URL")
# --- Email, the second channel (delivery/channels/email/) -------------------------------------------------
# How mail leaves: SMTP by default (EMAIL_HOST, EMAIL_PORT, ...), the console under `make run` (DEBUG), or a
# provider through django-anymail, e.g. DJANGO_EMAIL_BACKEND=anymail.backends.mailgun.EmailBackend with
# MAILGUN_API_KEY and MAILGUN_SENDER_DOMAIN (docs/email.md).
EMAIL_BACKEND = env_str(
    "DJANGO_EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)  # STARTTLS (port 587)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)  # implicit TLS (port 465)
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Reminders <reminders@localhost>")
# The domain of each email's Message-ID (<uuid of the push and address>@domain).
TRAININGS_EMAIL_DOMAIN = env_str("TRAININGS_EMAIL_DOMAIN", "reminders.localhost")
# Emails in flight at once per gateway: SMTP connections kept open (threads, for a backend that is not SMTP).
TRAININGS_EMAIL_CONNECTIONS = env_int("TRAININGS_EMAIL_CONNECTIONS", 8, minimum=1, maximum=100)
# How long an email's one-click unsubscribe link works, in days after it was signed (at most an hour before
# its email went out); an older one answers 410 saying so. A token is a credential for the person's
# preferences: it does not live for ever. At least 30 (the US CAN-SPAM Act wants an opt-out to work for 30
# days after the email was sent); 90 by default, as long as an answer link may live.
TRAININGS_EMAIL_UNSUBSCRIBE_DAYS = env_int("TRAININGS_EMAIL_UNSUBSCRIBE_DAYS", 90, minimum=30)
# django-anymail: the provider's credentials and the key its tracking webhook is signed with
# (POST /email/anymail/mailgun/tracking/: bounces and complaints disable the address).
ANYMAIL = {
    "MAILGUN_API_KEY": env_str("MAILGUN_API_KEY", ""),
    "MAILGUN_SENDER_DOMAIN": env_str("MAILGUN_SENDER_DOMAIN", ""),
    "MAILGUN_API_URL": env_str("MAILGUN_API_URL", "https://api.mailgun.net/v3"),
    "MAILGUN_WEBHOOK_SIGNING_KEY": env_str("MAILGUN_WEBHOOK_SIGNING_KEY", ""),
}
API_THROTTLE_ANSWER_LINK_RATE = env_str("API_THROTTLE_ANSWER_LINK_RATE", "20/m")
if not re.fullmatch(r"\d+/(s|m|h|d)", API_THROTTLE_ANSWER_LINK_RATE):
    raise ImproperlyConfigured(
        f"API_THROTTLE_ANSWER_LINK_RATE={API_THROTTLE_ANSWER_LINK_RATE!r} is not '<n>/<s|m|h|d>'"
    )
# Trainings rescheduled per task run after a rule changes.
TRAININGS_RESCHEDULE_BATCH = env_int("TRAININGS_RESCHEDULE_BATCH", 500, minimum=1, maximum=10000)
# Distinct OpenAPI enum names: three choice sets (occurrence, invitation, response) share the name `status`.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    **SPECTACULAR_SETTINGS.get("ENUM_NAME_OVERRIDES", {}),  # type: ignore[dict-item]
    "OccurrenceStatusEnum": "reminders.models.OccurrenceStatus",
    "InvitationStatusEnum": "trainings.models.InvitationStatus",
    "InvitationResponseStatusEnum": [("ACCEPTED", "ACCEPTED"), ("DENIED", "DENIED")],
    # A rule's kind: the players' kinds and the coaches' (trainings/planning/kinds.py);
    # "kind" elsewhere is a player's.
    "RuleKindEnum": "trainings.planning.kinds.any_rule_choices",
    # A webhook subscription's state (trainings/webhooks/serializers.py).
    "WebhookStatusEnum": [("active", "active"), ("disabled", "disabled")],
}

# --- Operations: metrics, health, abuse limits, log format (reminders/ops/: metrics.py, health.py,
# views.py, logformat.py; reminders/http/limits.py; docs/operations/monitoring.md) ------------------------
# prometheus-client's multiprocess mode (scripts/run-all.sh sets it): every process writes its samples there.
# Created here, before any metric exists, since a missing directory would fail every process at import.
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
# /metrics: without a token only direct requests from loopback/private addresses; with one, only it.
METRICS_BEARER_TOKEN = env_str("METRICS_BEARER_TOKEN", "")
# The scrape-time backlog gauge counts at most this many due rows per priority level (bounds the query).
REMINDERS_METRICS_BACKLOG_CAP = env_int("REMINDERS_METRICS_BACKLOG_CAP", 100000, minimum=1)
# /health/ready and `manage.py healthcheck`: some worker must have finished a scan this recently.
REMINDERS_HEALTH_MAX_SCAN_AGE_SECONDS = env_float("REMINDERS_HEALTH_MAX_SCAN_AGE_SECONDS", 30.0, minimum=1.0)
REMINDERS_HEALTH_TIMEOUT_SECONDS = env_float("REMINDERS_HEALTH_TIMEOUT_SECONDS", 3.0, minimum=0.1)
# /health/ready tells its checks' detail only to whoever /metrics serves and to operators (staff holding
# this permission); anyone else reads its status alone, at most this often per client address,
# "<n>/<s|m|h|d>" (each check opens a broker connection).
REMINDERS_OPERATOR_PERMISSION = "trainings.manage_all_teams"
REMINDERS_HEALTH_READY_RATE = env_str("REMINDERS_HEALTH_READY_RATE", "60/m")
if not re.fullmatch(r"\d+/(s|m|h|d)", REMINDERS_HEALTH_READY_RATE):
    raise ImproperlyConfigured(
        f"REMINDERS_HEALTH_READY_RATE={REMINDERS_HEALTH_READY_RATE!r} is not '<n>/<s|m|h|d>'"
    )
# The push gateway in /health/ready: "auto" (checked once a gateway has written a heartbeat), "on", "off".
TRAININGS_HEALTH_GATEWAY = env_str("TRAININGS_HEALTH_GATEWAY", "auto")
if TRAININGS_HEALTH_GATEWAY not in ("auto", "on", "off"):
    raise ImproperlyConfigured("TRAININGS_HEALTH_GATEWAY must be 'auto', 'on' or 'off'")
# Its heartbeat (every 5 s while it runs) turns amber on the status page past the first age, red (and
# /health/ready fails) past the second.
TRAININGS_GATEWAY_AMBER_SECONDS = env_float("TRAININGS_GATEWAY_AMBER_SECONDS", 15.0, minimum=1.0)
TRAININGS_GATEWAY_RED_SECONDS = env_float("TRAININGS_GATEWAY_RED_SECONDS", 60.0, minimum=1.0)
# Probes and scrapers speak plain HTTP inside the network even when the site redirects to HTTPS.
SECURE_REDIRECT_EXEMPT = [r"^metrics$", r"^health/"]

# Admin login lockout (django-axes): AXES_FAILURE_LIMIT wrong passwords for one username from one address
# lock that pair out for AXES_COOLOFF_HOURS, the right password included.
INSTALLED_APPS += ["axes"]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]  # last, as django-axes requires
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, with a user's permissions read in one statement (one per coach API request).
    "reminders.http.permissions_backend.OneQueryModelBackend",
]
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_HOURS", 1.0, minimum=0.0) or None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "reminders.http.limits.client_ip"

# Rate limits, each "<n>/<s|m|h|d>": per API token (or session user) and per client address. Every count
# is a row of the service's own database (reminders/http/counts.py), shared by every process and host.
API_THROTTLE_RATES = {
    "token": env_str("API_THROTTLE_TOKEN_RATE", "100/s"),
    "ip": env_str("API_THROTTLE_IP_RATE", "300/s"),
}
for _scope, _rate in API_THROTTLE_RATES.items():  # fail at start-up, not on the first request
    if not re.fullmatch(r"\s*\d+\s*/\s*(s|sec|second|m|min|minute|h|hour|d|day)\s*", _rate):
        raise ImproperlyConfigured(f"API throttle rate {_scope}={_rate!r} is not '<n>/<s|m|h|d>'")
# How many reverse proxies in front append to X-Forwarded-For; 0 trusts only REMOTE_ADDR.
API_NUM_PROXIES = env_int("API_NUM_PROXIES", 0, minimum=0)
# The per-address limit is a middleware: it must count requests before authentication refuses them. It
# counts every request under these paths: the API, the email answer and unsubscribe pages, the email
# provider's webhook (delivery/channels/email/urls.py).
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["reminders.http.limits.TokenRateThrottle"]
ADDRESS_LIMITED_PATHS = ["/api/", "/answer/", "/email/"]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Request bodies: one limit for every request, answered with a JSON 413 on the API. 16 MiB holds the
# documented bulk maximum (200,000 instants, about 5.6 MB in the canonical form, plus 10,000 jobs).
REMINDERS_MAX_REQUEST_BYTES = env_int("REMINDERS_MAX_REQUEST_BYTES", 16 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = REMINDERS_MAX_REQUEST_BYTES
MIDDLEWARE.insert(0, "reminders.http.limits.RequestBodyLimitMiddleware")
MIDDLEWARE.insert(0, "reminders.http.limits.AddressThrottleMiddleware")
# Paths whose views take their credential from the URL (a signed answer link) skip the browser middleware
# after CommonMiddleware: sessions, CSRF, authentication, messages and the rest do nothing for them
# (common/http/session_free.py). Only views marked `session_free` are called this way.
SESSION_FREE_PATHS = ["/api/answer-links/"]
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.middleware.common.CommonMiddleware") + 1,
    "common.http.session_free.SessionFreeMiddleware",
)

# LOG_FORMAT=json: one JSON object per line (reminders/ops/logformat.py); "text" (default) for people.
LOG_FORMAT = env_str("LOG_FORMAT", "text")
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured("LOG_FORMAT must be 'text' or 'json'")
LOGGING["formatters"]["json"] = {"()": "reminders.ops.logformat.JsonFormatter"}
LOGGING["handlers"]["console"]["formatter"] = "json" if LOG_FORMAT == "json" else "plain"
if LOG_FORMAT == "json":
    LOGGING["handlers"]["django.server"]["formatter"] = "json"

# Retention of trainings bookkeeping (trainings/retention.py, hourly task "trainings: purge old pushes").
TRAININGS_PUSH_RETENTION_DAYS = env_int("TRAININGS_PUSH_RETENTION_DAYS", 30, minimum=1)
TRAININGS_RUN_RETENTION_DAYS = env_int("TRAININGS_RUN_RETENTION_DAYS", 90, minimum=1)

# --- Admin for coaches and operators --------------------------------------------------------------------
# Project templates (admin index with the status link, the status page, a friendly 403) come first.
TEMPLATES[0]["DIRS"] = [BASE_DIR / "templates"]
# Swagger UI from our own static files (no CDN), so /api/docs/ renders offline.
INSTALLED_APPS += ["drf_spectacular_sidecar"]
SPECTACULAR_SETTINGS.update(
    {"SWAGGER_UI_DIST": "SIDECAR", "SWAGGER_UI_FAVICON_HREF": "SIDECAR", "REDOC_DIST": "SIDECAR"}
)
# Each signed-in person reads and types times in their chosen zone (reminders.UserPreference).
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "reminders.admin.middleware.user_time_zone",
)
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "trainings.admin.language.coach_language",
)
# A coach opening an operator page is refused with a page, not a traceback in the log.
LOGGING.setdefault("filters", {})["forbidden_quietly"] = {
    "()": "reminders.ops.logfilters.ForbiddenWithoutTraceback"
}
LOGGING["loggers"].setdefault("django.request", {}).setdefault("filters", []).append("forbidden_quietly")

# --- Audit history (common/history.py) ---------------------------------------------------------------
# Who changed a job, schedule, throttle policy, rule, template or training: django-simple-history rows,
# attributed to the request's user (admin session or API token), shown on each object's History page.
INSTALLED_APPS += ["simple_history"]
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
    "simple_history.middleware.HistoryRequestMiddleware",
)
# History is a record, not an editor: reverting from it would bypass the services that reschedule.
SIMPLE_HISTORY_REVERT_DISABLED = True
# Purged by the hourly purge task past this age.
REMINDERS_HISTORY_RETENTION_DAYS = env_int("REMINDERS_HISTORY_RETENTION_DAYS", 365, minimum=1)
# How long an API caller's Idempotency-Key replays its first answer (common/idempotency.py); the hourly
# purge deletes older keys.
IDEMPOTENCY_KEY_TTL_HOURS = env_int("IDEMPOTENCY_KEY_TTL_HOURS", 24, minimum=1)
