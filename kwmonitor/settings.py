"""Django settings, read from the environment (django-environ).

Every setting read from the environment is listed, with its default, in
``docker/.env.example`` (a test keeps the two in step). The defaults work on
a fresh machine: a SQLite file under ``var/``, Redis on localhost, Spark
``local[2]``. Production behaviour is the default: ``DEBUG`` is off, a
``SECRET_KEY`` is then required, and HTTPS hardening is on unless ``HTTPS`` is
turned off (``make run`` does so in ``var/.env`` for the local demo on http).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


class _Env(environ.Env):
    """``environ.Env`` that records the names read (``ENV_SETTINGS``: what ``make run`` writes to the env file)."""

    def __init__(self, **scheme) -> None:
        super().__init__(**scheme)
        self.names: list[str] = []

    def get_value(self, var, *args, **kwargs):
        if var not in self.names:
            self.names.append(var)
        return super().get_value(var, *args, **kwargs)


env = _Env()
# A local env file (written by `make run` / `make test`: kwmonitor/envfile.py); real environment variables win.
ENV_FILE = Path(env.str("ENV_FILE", default=str(BASE_DIR / "var" / ".env")))
if ENV_FILE.is_file():
    environ.Env.read_env(ENV_FILE, overwrite=False)


def _path(name: str, default: str) -> Path:
    """A directory setting; relative paths are taken from the project root."""
    value = Path(env.str(name, default=default))
    return value if value.is_absolute() else BASE_DIR / value


DEBUG = env.bool("DEBUG", default=False)

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is required when DEBUG is off: set it in the environment or in var/.env "
            "(`make run` writes one)."
        )
    SECRET_KEY = "django-insecure-development-only-key-never-used-with-debug-off"

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS hardening (on by default; `make run` serves plain http on localhost and turns it off).
HTTPS = env.bool("HTTPS", default=True)
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
# Deployments put daphne behind a TLS-terminating proxy that sets this header (never expose daphne directly).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "kwmonitor.catalog",
    "kwmonitor.queries",
    "kwmonitor.streams",
    "kwmonitor.accounts",
    "kwmonitor.dashboard",
    "kwmonitor.ingest",
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
    "csp.middleware.CSPMiddleware",
]

# Content-Security-Policy (django-csp): scripts, styles and everything else from this site only; no inline
# script or style (pages keep their JavaScript in static/, their data in json_script blocks), no framing.
# connect-src 'self' covers the websocket feeds of the same host and port.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

ROOT_URLCONF = "kwmonitor.urls"
WSGI_APPLICATION = "kwmonitor.wsgi.application"
ASGI_APPLICATION = "kwmonitor.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Where the local state lives (SQLite default, landing files, checkpoints, logs).
VAR_DIR = _path("VAR_DIR", "var")
DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default is shared by web, worker and beat processes. WAL lets readers run beside the
    # writer; IMMEDIATE transactions take the write lock at BEGIN, so two read-then-write transactions never
    # deadlock on the lock upgrade (SQLite answers that with an immediate "database is locked", whatever the
    # timeout), they queue for up to `timeout` seconds instead.
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    })
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# Served by WhiteNoise from the finders, so no collectstatic step is needed to run.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Redis: the bus between evaluators and the web tier (the live feeds follow its streams, no channel layer:
# benchmarks/results/README.md, "Live feeds") and the Celery broker.
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Beat writes a heartbeat to Redis at every tick (kwmonitor.beat), so the dashboards can tell it runs.
CELERY_BEAT_SCHEDULER = "kwmonitor.beat:HeartbeatScheduler"
CELERY_BEAT_MAX_LOOP_INTERVAL = 2.0
# Each periodic task expires after one period: a round queued while no worker ran is worth nothing once
# the next one is due, so a worker that comes back runs at most one of each instead of a burst.
CELERY_BEAT_SCHEDULE = {
    name: {"task": f"kwmonitor.streams.tasks.{task}", "schedule": period, "options": {"expires": period}}
    for name, task, period in (
        ("supervise-evaluators", "supervise", 3.0),
        ("persist-history", "persist_history", 5.0),
        ("prune-landing-archives", "prune_landing_archives", 600.0),
        ("watch-capture-slots", "watch_capture_slots", 15.0),
    )
}

# Evaluators.
SPARK_MASTER = env.str("SPARK_MASTER", default="local[2]")
LANDING_DIR = _path("LANDING_DIR", str(VAR_DIR / "landing"))
CHECKPOINT_DIR = _path("CHECKPOINT_DIR", str(VAR_DIR / "checkpoints"))
# Period of the ASC dropping monitor (tuples of a relation per period; a rearrangement is considered at the end
# of each). Size it to the stream's rate: `make run` sets it to about ten seconds of the demo's products.
ASC_MONITOR_PERIOD = env.int("ASC_MONITOR_PERIOD", default=10_000)
# Committed landing files are archived; beat deletes those older than this (0: never).
LANDING_ARCHIVE_HOURS = env.float("LANDING_ARCHIVE_HOURS", default=24.0)
# Largest body the ingest endpoint accepts (bytes of NDJSON per request).
INGEST_MAX_BYTES = env.int("INGEST_MAX_BYTES", default=8 * 1024 * 1024)
# Command line of one evaluator process; placeholders {python} (this interpreter) {evaluator} {stream}
# {redis_url} {checkpoint_dir} (this evaluator's) {master} {asc_period}.
EVALUATOR_COMMAND = shlex.split(
    env.str(
        "EVALUATOR_COMMAND",
        default="{python} -m streaming.spark --evaluator {evaluator} --redis-url {redis_url} "
        "--checkpoint-dir {checkpoint_dir} --master {master} --asc-period {asc_period}",
    )
)
# Command line of a stream's pre-processor (docs/scaling.md); same placeholders, with {plan_evaluator}
# (the stream's primary evaluator, whose plan gives the needs) and {out} (the derived landing directory).
PREPROCESSOR_COMMAND = shlex.split(
    env.str(
        "PREPROCESSOR_COMMAND",
        default="{python} -m streaming.spark.preprocessor --evaluator {evaluator} --plan-evaluator {plan_evaluator} "
        "--redis-url {redis_url} --checkpoint-dir {checkpoint_dir} --out {out} --master {master}",
    )
)
# Command line of the capture of a stream whose source is a PostgreSQL publication (docs/sources.md); placeholders
# {python} {evaluator} (the capture's own id) {plan_evaluator} {redis_url} {dsn_env} (the name of the environment
# variable holding the DSN, never the DSN) {publication} {slot} {landing} (the stream's landing directory) {state}.
CAPTURE_COMMAND = shlex.split(
    env.str(
        "CAPTURE_COMMAND",
        default="{python} -m streaming.capture --evaluator {evaluator} --plan-evaluator {plan_evaluator} "
        "--redis-url {redis_url} --dsn-env {dsn_env} --publication {publication} --slot {slot} "
        "--landing {landing} --state {state}",
    )
)
# Seconds without a heartbeat after which a running evaluator is taken as dead (and restarted).
EVALUATOR_HEARTBEAT_TIMEOUT = 15.0
# Seconds without a heartbeat after which the dashboards show an evaluator as unresponsive (it beats every 2 s).
EVALUATOR_UNRESPONSIVE_SECONDS = 6.0
# Seconds a running evaluator may apply no batch while input waits (and its apply loop holds one op, or none)
# before the pages say "stalled" and the supervisor restarts it (docs/ops.md, "Stalls and poison ops").
EVALUATOR_STALL_SECONDS = 10.0
# Failures (stalls or crashes) at the same op after which the supervisor sets that op aside as a dead letter.
EVALUATOR_POISON_FAILURES = 2
# Seconds a new evaluator process has to write its first heartbeat (it does so before it starts Spark).
EVALUATOR_FIRST_HEARTBEAT_SECONDS = 20.0
# Seconds without beat's heartbeat (written every 2 s) after which the dashboards say beat is down.
BEAT_UNRESPONSIVE_SECONDS = 10.0
# How long a worker ping's answer is reused, and how long a ping waits for a worker.
WORKER_PING_CACHE_SECONDS = 5
WORKER_PING_TIMEOUT_SECONDS = 1.0
# The input rate of a stream is measured over this many seconds; a stream with no op in them is idle.
INPUT_RATE_WINDOW_SECONDS = 10.0
# Seconds a new process has to write its first heartbeat (a Spark driver starts slowly).
EVALUATOR_START_GRACE_SECONDS = 120.0
# Seconds of healthy running after which earlier failures no longer lengthen the backoff.
EVALUATOR_STABLE_SECONDS = 60.0
# Seconds between SIGTERM and SIGKILL when stopping.
EVALUATOR_STOP_TIMEOUT_SECONDS = 20.0
# Restart backoff: first delay, doubled each consecutive failure, capped.
EVALUATOR_BACKOFF_SECONDS = 2.0
EVALUATOR_BACKOFF_MAX_SECONDS = 120.0
EVALUATOR_LOG_DIR = VAR_DIR / "log"

# Admin preview of a query's CN count: above this many CNs the admin warns.
QUERY_CN_WARNING = 2000

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    "loggers": {"django": {"handlers": ["console"], "level": "INFO", "propagate": False}},
}

# Every setting read from the environment above, in order (`manage.py save_run_settings` writes those set).
ENV_SETTINGS = tuple(env.names)
