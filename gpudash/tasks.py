"""Celery autodiscovery looks for `<app>.tasks`; the sync tasks live in gpudash.sync.tasks."""

from gpudash.sync.tasks import ensure_watchers  # noqa: F401  (registers the task)
