import logging

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.http import JsonResponse

log = logging.getLogger(__name__)

# Once every migration is applied it stays so for this process (migrations run before new code
# starts), so the migration graph is read until then, not on every probe.
_migrations_applied = False


def healthz(request):
    """Liveness for load balancers and compose: the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any DB failure means "not healthy", reported, not raised
        return JsonResponse({"status": "error", "error": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})


def _check_database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_migrations():
    global _migrations_applied
    if _migrations_applied:
        return
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
        raise RuntimeError(f"{len(plan)} migration(s) not applied: {names}{' ...' if len(plan) > 5 else ''}")
    _migrations_applied = True


def _check_redis():
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    finally:
        client.close()


# Checks the apps above add to /readyz, by name (claims/apps.py: the preview warm-up): each raises when
# not ready; `applies()` says whether it runs at all (in this process, with these settings).
READINESS_CHECKS = {}


def register_readiness_check(name, check, applies=lambda: True):
    READINESS_CHECKS[name] = (check, applies)


def readyz(request):
    """Readiness (Kubernetes readinessProbe): the database answers, every migration is applied,
    in the scaled set-up Redis (channel layer and Celery broker) answers, and the preview warm-up
    (when on) has finished. 503 names what failed."""
    checks = {"database": _check_database, "migrations": _check_migrations}
    if settings.REDIS_URL:
        checks["redis"] = _check_redis
    checks.update({name: check for name, (check, applies) in READINESS_CHECKS.items() if applies()})
    results, ok = {}, True
    for name, check in checks.items():
        if name == "migrations" and results.get("database") != "ok":
            results[name] = "skipped: database unreachable"
            continue
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # each failure is reported by name, never raised
            ok = False
            results[name] = f"error: {type(exc).__name__}: {exc}"[:500]
            log.warning("readyz: %s failed: %s", name, exc)
            if name == "database":
                connection.close()  # the next probe reconnects instead of reusing a broken connection
    return JsonResponse({"status": "ok" if ok else "error", "checks": results}, status=200 if ok else 503)
