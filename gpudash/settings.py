"""Settings for gpudash, read from the environment.

DATABASE_URL  database (default: SQLite file in GPUDASH_DATA_DIR, the embedded default)
REDIS_URL     Redis for the channel layer and Celery; unset = in-memory layer, watchers in-process
SECRET_KEY    Django secret; unset = a random key generated once and kept in GPUDASH_DATA_DIR
"""

import json
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url

from mirror.envconfig import env_bool, env_number

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("GPUDASH_DATA_DIR", BASE_DIR / ".data"))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key():
    # Never a fixed default: a random key is made once per data directory and kept private.
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG")
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

# Behind a TLS-terminating proxy (README, "Configuration"): all off by default, so the demo and the
# tests run on plain http://127.0.0.1.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT")
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE")
SECURE_HSTS_SECONDS = env_number("SECURE_HSTS_SECONDS", 0, integer=True)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD")
# "X-Forwarded-Proto" (the header name as the proxy sends it): requests it marks "https" count as
# secure. Only set it when the proxy always sets (or strips) that header, or clients can forge it.
if os.environ.get("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = (
        "HTTP_" + os.environ["SECURE_PROXY_SSL_HEADER"].strip().upper().replace("-", "_"),
        "https",
    )
# Probes (kubelet) and the Prometheus scrape stay plain HTTP even with the redirect on.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

# Content-Security-Policy (django-csp): scripts and style sheets only from this origin, no inline
# script anywhere. Inline style *attributes* stay allowed (style-src-attr): the bars of the overview
# and the preview are widths computed per row, and attributes cannot run code.
from csp.constants import NONE, SELF, UNSAFE_INLINE  # noqa: E402

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],  # the live websocket is same-origin (CSP 3: 'self' covers ws:/wss:)
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

INSTALLED_APPS = [
    "daphne",
    "gpudash.apps.GpudashAdminConfig",  # django.contrib.admin, usable by the admin role (mirror/admin_site.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # intcomma: counts grouped in the page's language
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served locally: no CDN needed for /api/docs/
    "channels",
    "gpudash",
    "mirror",
    "inventory",
    "claims",
    "monitoring",
    "usage",
    "health",
    "ops",
    "devcluster",
    "accounts",
]

MIDDLEWARE = [
    "gpudash.middleware.ClientGoneMiddleware",  # tells a view waiting on a preview worker that its client left
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "gpudash.middleware.RejectNulMiddleware",  # before anything queries the database
    # Serves /static/ from the app itself (demo, tests and containers alike).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Picks the UI language: the nav's switch (a cookie), else Accept-Language (issue 14).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gpudash.urls"

TEMPLATES = [
    {
        # Django's backend, each rendering context emptied once written (a written page leaves no cycle).
        "BACKEND": "mirror.acyclic.AcyclicTemplates",
        "NAME": "django",
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

WSGI_APPLICATION = "gpudash.wsgi.application"
ASGI_APPLICATION = "gpudash.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'gpudash.sqlite3'}"),
        conn_max_age=env_number("DB_CONN_MAX_AGE", 0, integer=True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + a busy timeout let the in-process watchers write while pages read.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # Tests on SQLite use a file, like the embedded default: the in-memory shared-cache database
    # that Django would pick uses table locks that watcher threads cannot wait out.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-gpudash.sqlite3")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # PostgreSQL's JIT compiler spends longer compiling the fleet-wide GROUP BYs (their subplans inflate
    # the cost estimates past jit_above_cost) than they run, and never pays back on a dashboard's queries.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")
if os.environ.get("GPUDASH_TEST_DB_NAME"):
    # Lets several test runs share one PostgreSQL server without trampling each other.
    DATABASES["default"]["TEST"] = {"NAME": os.environ["GPUDASH_TEST_DB_NAME"]}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# The UI in English and Simplified Chinese; Kubernetes terms (ResourceClaim, DeviceClass) stay as
# Kubernetes writes them. The catalog lives in locale/ (make messages updates and compiles it).
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Django's zh_Hans groups digits by four with no separator (224000); Chinese consoles write counts as
# 224,000, so gpudash/formats/zh_Hans says so. Numbers are grouped only where a template asks
# (intcomma), never globally: ids and counts in attributes and URLs must stay plain digits.
FORMAT_MODULE_PATH = ["gpudash.formats"]
if os.environ.get("GPUDASH_LOCALE_DIR"):  # the catalog test extracts into a copy, never into the checkout
    LOCALE_PATHS = [Path(os.environ["GPUDASH_LOCALE_DIR"])]
LANGUAGE_COOKIE_NAME = "gpudash_language"
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
LANGUAGE_COOKIE_SAMESITE = "Lax"
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
# Without collectstatic (demo, tests) WhiteNoise finds files through the staticfiles finders.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

# Sign-in (issue 13): password and/or OIDC single sign-on, from the environment (accounts/config.py).
from accounts.config import sign_in_settings  # noqa: E402

globals().update(sign_in_settings(os.environ))
# The admin role holds every model permission in the Django admin (mirror/admin_site.py).
AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "mirror.admin_site.AdminRoleBackend"]  # noqa: F821

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    # Pub/sub: one PUBLISH per group message and one Redis subscription per server process, fanned
    # out in memory to that process's consumers. The list-based RedisChannelLayer polls one Redis
    # list per consumer (200 pages = 200 blocking pops, and "Too many connections" when they all
    # join at once); measured in docs/ui.md (Benchmark).
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # Redis pub/sub channels ignore the database number in REDIS_URL: without a prefix naming it,
            # two dashboards (or test runs) on one Redis server would receive each other's changes.
            "CONFIG": {"hosts": [REDIS_URL], "prefix": "gpudash.db" + (urlsplit(REDIS_URL).path.strip("/") or "0")},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Celery: only used when REDIS_URL is set; without it the watchers run in the web process.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = False
# Previews go to their own workers (`celery -A gpudash worker -Q preview`), never to the sync workers.
CELERY_TASK_ROUTES = {"claims.tasks.run_preview_job": {"queue": "preview"}}
from celery.schedules import crontab  # noqa: E402

CELERY_BEAT_SCHEDULE = {
    "ensure-watchers": {"task": "mirror.sync.tasks.ensure_watchers", "schedule": 15.0},
    "detect-stuck-claims": {"task": "claims.tasks.detect_stuck_claims", "schedule": 60.0},
    "poll-utilization": {
        "task": "monitoring.tasks.poll_utilization",
        "schedule": env_number("GPUDASH_UTILIZATION_POLL", 60.0, positive=True),
    },
    # Fleet history (monitoring/history.py): a sample per minute, pruned past GPUDASH_HISTORY_DAYS hourly.
    "sample-history": {"task": "monitoring.tasks.sample_history", "schedule": crontab()},
    "prune-history": {"task": "monitoring.tasks.prune_history", "schedule": 3600.0},
    # The allocation ledger (usage/ledger.py): intervals ended more than USAGE_RETENTION_DAYS ago, hourly.
    "prune-ledger": {"task": "usage.tasks.prune_ledger", "schedule": 3600.0},
    # Its queue of claim events is folded shortly after each sync batch; this catches a lost request.
    "fold-ledgers": {"task": "usage.tasks.fold_all_ledgers", "schedule": 60.0},
    # Usage reports' daily rollup and utilization sums (usage/rollup.py), every 10 minutes.
    "usage-rollup": {"task": "usage.report_tasks.roll_up", "schedule": 600.0},
    # The device health timeline (health/timeline.py), kept as long as the fleet history.
    "prune-health-timeline": {"task": "health.tasks.prune_timeline", "schedule": 3600.0},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's JSON, written by orjson (a fleet-wide preview's body of megabytes: mirror/api/renderers.py).
    "DEFAULT_RENDERER_CLASSES": ["mirror.api.renderers.JSONRenderer", "rest_framework.renderers.BrowsableAPIRenderer"],
    # DRF's JSON parser, also refusing over-deep bodies and lone surrogates (a 400, not a 500).
    "DEFAULT_PARSER_CLASSES": [
        "mirror.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "mirror.api.errors.exception_handler",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "gpudash API",
    "DESCRIPTION": "GPU inventory and DRA device claims mirrored from Kubernetes clusters.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "DeviceStateEnum": "inventory.querysets.DEVICE_STATES",
        "ClaimStateEnum": "claims.models.ResourceClaim.State",
    },
}

# Sync tuning (see mirror/sync).
GPUDASH_SYNC = {
    "LIST_PAGE_SIZE": env_number("GPUDASH_LIST_PAGE_SIZE", 500, integer=True, positive=True, unit="objects"),
    "WATCH_TIMEOUT_SECONDS": env_number("GPUDASH_WATCH_TIMEOUT", 300, integer=True, positive=True),
    "LEASE_SECONDS": env_number("GPUDASH_LEASE_SECONDS", 10.0, positive=True),
    "BACKOFF_MAX_SECONDS": env_number("GPUDASH_BACKOFF_MAX", 30.0),
    # How often each cluster's API discovery is re-read (a kind served later starts then).
    "DISCOVERY_INTERVAL_SECONDS": env_number("GPUDASH_DISCOVERY_INTERVAL", 60.0),
    # Change messages to the live views are coalesced for this long.
    "PUBLISH_COALESCE_SECONDS": env_number("GPUDASH_PUBLISH_COALESCE", 0.1),
    # Pods are mirrored when they use DRA, or when one of these labels contains the given text (driver pods).
    "DRIVER_POD_LABELS": {"app.kubernetes.io/name": "dra"},
    # Mirrored Events (mirror/sync/events.py): at most this many per cluster, none older than this.
    "EVENTS_MAX_PER_CLUSTER": env_number("GPUDASH_EVENTS_MAX", 5000, integer=True, unit="events"),
    "EVENTS_MAX_AGE_SECONDS": env_number("GPUDASH_EVENTS_MAX_AGE", 86400.0),
}

# Stuck-claim detector thresholds, in seconds (see claims/stuck.py and docs/operations.md).
GPUDASH_STUCK = {
    "STALE_RESERVATION_GRACE": env_number("GPUDASH_STALE_RESERVATION_GRACE", 120.0),
    "DELETION_GRACE": env_number("GPUDASH_DELETION_GRACE", 300.0),
    "ORPHAN_GRACE": env_number("GPUDASH_ORPHAN_GRACE", 300.0),
    "PENDING_GRACE": env_number("GPUDASH_PENDING_GRACE", 300.0),
    "NODE_NOT_READY_GRACE": env_number("GPUDASH_NODE_NOT_READY_GRACE", 300.0),
    "PREPARE_GRACE": env_number("GPUDASH_PREPARE_GRACE", 300.0),
    # The scheduler's DynamicResourcesArgs.bindingTimeout (default 600 s).
    "BINDING_TIMEOUT": env_number("GPUDASH_BINDING_TIMEOUT", 600.0),
    "DEVICE_VANISHED_GRACE": env_number("GPUDASH_DEVICE_VANISHED_GRACE", 120.0),
    # Seconds between two detector runs triggered by sync events for one cluster.
    "DEBOUNCE_SECONDS": env_number("GPUDASH_STUCK_DEBOUNCE", 5.0),
    # Allocation-engine explanations computed per detector run (for "unallocatable" findings).
    "EXPLAIN_PER_RUN": env_number("GPUDASH_STUCK_EXPLAIN_PER_RUN", 20.0, unit="explanations"),
}

# Time limits of the allocation engine in seconds (docs/allocator.md, "Time limits"); 0 = none.
GPUDASH_ENGINE_LIMITS = {
    "PREVIEW_DEADLINE": env_number("GPUDASH_PREVIEW_DEADLINE", 20.0, positive=True),  # one preview (+ headroom)
    "FILTER_TIMEOUT": env_number("GPUDASH_FILTER_TIMEOUT", 10.0),  # per node, the scheduler's filterTimeout
    "STUCK_EXPLAIN_DEADLINE": env_number("GPUDASH_STUCK_EXPLAIN_DEADLINE", 5.0),  # one detector explanation
    "CLASS_COUNT_DEADLINE": env_number("GPUDASH_CLASS_COUNT_DEADLINE", 30.0),  # one cluster's class recount
}

# The web process (gpudash/asgi.py, `manage.py serve`) builds each cluster's live preview inventory in
# a background thread at start (claims/live_inventory.py start_warm_up). Off in the test suite.
GPUDASH_PREVIEW_WARM_UP = env_bool("GPUDASH_PREVIEW_WARM_UP", True)

# Where previews run (claims/preview_service/): never in the web process. "local" (the embedded
# default): a pool of WORKERS processes beside the web process; "celery" (with REDIS_URL): the
# `preview` queue of dedicated Celery workers. At most WORKERS + QUEUE previews are admitted at once
# and PER_USER per user; the rest answer 429 with Retry-After (docs/operations.md, "Preview workers").
GPUDASH_PREVIEW_SERVICE = {
    "BACKEND": os.environ.get("GPUDASH_PREVIEW_BACKEND", "celery" if REDIS_URL else "local"),
    "WORKERS": env_number("GPUDASH_PREVIEW_WORKERS", 2, integer=True, unit="workers"),
    "PER_USER": env_number("GPUDASH_PREVIEW_PER_USER", 2, integer=True, unit="previews"),
    "QUEUE": env_number("GPUDASH_PREVIEW_QUEUE", 8, integer=True, unit="previews"),
}

# Operations: how to recognise DRA driver pods and GPU nodes, and whom the RBAC readiness check asks about.
GPUDASH_OPS = {
    # Pod label whose value is the DRA driver name (e.g. set by the driver's Helm chart or by you).
    "DRIVER_POD_LABEL": os.environ.get("GPUDASH_DRIVER_POD_LABEL", "resource.gpudash.io/driver"),
    # Extra label selectors per driver name, for charts that don't carry the label above.
    "DRIVER_POD_SELECTORS": {
        "gpu.nvidia.com": "app.kubernetes.io/name=nvidia-dra-driver-gpu",
        "gpu.example.com": "app.kubernetes.io/name=dra-example-driver",
    },
    # Node labels that mark a GPU node ("key" or "key=value"), and a label holding the expected device count.
    "GPU_NODE_LABELS": ["nvidia.com/gpu.present=true", "feature.node.kubernetes.io/pci-10de.present=true"],
    "GPU_COUNT_LABEL": "nvidia.com/gpu.count",
    # Subjects the RBAC readiness check asks the API server about (SubjectAccessReview).
    "RBAC_SUBJECTS": [
        {"user": "system:serviceaccount:default:default", "groups": ["system:serviceaccounts", "system:authenticated"]},
        {"user": "gpudash-probe-user", "groups": ["system:authenticated"]},
    ],
    "API_TIMEOUT_SECONDS": env_number("GPUDASH_API_TIMEOUT", 10.0, positive=True),
    # The DRA driver log tail on the Pending, claim and node pages (claims/driverlogs.py): lines, bytes,
    # seconds to wait for the API server, and container names to prefer in the driver pod.
    "DRIVER_LOG_TAIL_LINES": env_number("GPUDASH_DRIVER_LOG_LINES", 100, integer=True, unit="lines"),
    "DRIVER_LOG_LIMIT_BYTES": env_number("GPUDASH_DRIVER_LOG_BYTES", 65536, integer=True, unit="bytes"),
    "DRIVER_LOG_TIMEOUT_SECONDS": env_number("GPUDASH_DRIVER_LOG_TIMEOUT", 5.0),
    "DRIVER_LOG_CONTAINERS": [],
}

# Device health (health/): how long a device status may say not Ready after allocation (seconds).
# The binding-conditions finding uses GPUDASH_STUCK["BINDING_TIMEOUT"] (the scheduler's bindingTimeout).
GPUDASH_HEALTH = {
    "NOT_READY_GRACE": env_number("GPUDASH_HEALTH_NOT_READY_GRACE", 300.0),
}

# Monitoring (monitoring/, docs/operations.md "Metrics" and "GPU utilization").
GPUDASH_MONITORING = {
    # Bearer token /metrics asks for; unset = /metrics is open (protect it with a NetworkPolicy then).
    "METRICS_TOKEN": os.environ.get("GPUDASH_METRICS_TOKEN", ""),
    # Node labels naming a node's pool, first present wins (free whole GPUs are counted per pool).
    "NODE_POOL_LABELS": [
        "karpenter.sh/nodepool",
        "cloud.google.com/gke-nodepool",
        "eks.amazonaws.com/nodegroup",
        "kubernetes.azure.com/agentpool",
        "node.kubernetes.io/pool",
    ],
    # Utilization from each cluster's Prometheus (dcgm-exporter series): poll period, query timeout,
    # how long the per-minute history is kept.
    "POLL_SECONDS": env_number("GPUDASH_UTILIZATION_POLL", 60.0, positive=True),
    "QUERY_TIMEOUT_SECONDS": env_number("GPUDASH_PROMETHEUS_TIMEOUT", 10.0, positive=True),
    "HISTORY_HOURS": env_number("GPUDASH_UTILIZATION_HISTORY_HOURS", 24.0, positive=True, unit="hours"),
    # Idle-GPU finding: allocated, under this utilization (%) for this long (s). Report-only.
    "IDLE_THRESHOLD_PERCENT": env_number("GPUDASH_IDLE_THRESHOLD", 5.0, unit="percent"),
    "IDLE_PERIOD_SECONDS": env_number("GPUDASH_IDLE_PERIOD", 1800.0),
    # Fleet history (per-minute counts for the charts): days kept (monitoring.history.retention_days checks it).
    "HISTORY_DAYS": env_number("GPUDASH_HISTORY_DAYS", 14.0, positive=True, unit="days"),
    # DRA control-plane metrics page (docs/dra-metrics.md): the label naming a kubelet's node in its
    # series, and how many rows a figure shows (the slowest first; the API lists all).
    "DRA_NODE_LABEL": os.environ.get("GPUDASH_DRA_NODE_LABEL", "node"),
    "DRA_PAGE_ROWS": env_number("GPUDASH_DRA_PAGE_ROWS", 50, integer=True, positive=True, unit="rows"),
    # The most seconds one evaluation of the page's ~30 queries may take (each query also bounded by
    # QUERY_TIMEOUT_SECONDS): what has not come by then is shown as "timed out". And how long a
    # finished evaluation is reused for the same cluster and window (reloads, other viewers, the API).
    "DRA_DEADLINE_SECONDS": env_number("GPUDASH_DRA_DEADLINE", 15.0),
    "DRA_CACHE_SECONDS": env_number("GPUDASH_DRA_CACHE_SECONDS", 30.0),
}

# The allocation ledger (usage/): written by the sync unless GPUDASH_USAGE_LEDGER=0; intervals kept for
# USAGE_RETENTION_DAYS after they end; the pod labels each interval keeps (for reports by team, app).
USAGE_LEDGER = env_bool("GPUDASH_USAGE_LEDGER", True)
# Seconds between a sync batch and the fold of its claim events into the ledger (usage/ledger.py).
USAGE_FOLD_SECONDS = env_number("GPUDASH_USAGE_FOLD_SECONDS", 5.0)
USAGE_RETENTION_DAYS = env_number("GPUDASH_USAGE_RETENTION_DAYS", 400, integer=True, positive=True, unit="days")
USAGE_LABELS = [
    label.strip() for label in os.environ.get("GPUDASH_USAGE_LABELS", "team,app").split(",") if label.strip()
]
# Usage reports (usage/reports.py, docs/operations.md "Usage reports"): the zone periods are calendar-
# aligned in (days, ISO weeks, months), the pod label that names a team, optional prices per GPU-hour by
# model ("*" for any other model; empty = no cost figures), and how many past days each rollup run
# rebuilds from the ledger (late events and relists can still change them).
USAGE_TIME_ZONE = os.environ.get("GPUDASH_USAGE_TIME_ZONE", "") or TIME_ZONE
USAGE_TEAM_LABEL = os.environ.get("GPUDASH_USAGE_TEAM_LABEL", "team")
USAGE_PRICES = json.loads(os.environ.get("GPUDASH_USAGE_PRICES", "{}") or "{}")
USAGE_CURRENCY = os.environ.get("GPUDASH_USAGE_CURRENCY", "USD")
USAGE_ROLLUP_SETTLE_DAYS = env_number("GPUDASH_USAGE_ROLLUP_SETTLE_DAYS", 2, integer=True, unit="days")

# GPUs served without DRA (device plugins, HAMi): overrides of inventory/accelerators.py DEFAULTS
# (RESOURCES, PARTITION_RESOURCES, SHARE_RESOURCES, MODEL_LABELS, HAMI_REGISTER_ANNOTATIONS, HAMI_RESOURCES).
GPUDASH_ACCELERATORS = {}
if os.environ.get("GPUDASH_ACCELERATOR_RESOURCES"):  # comma-separated fnmatch patterns of extended resources
    GPUDASH_ACCELERATORS["RESOURCES"] = [
        r.strip() for r in os.environ["GPUDASH_ACCELERATOR_RESOURCES"].split(",") if r.strip()
    ]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
