"""Celery autodiscovery looks for `<app>.tasks`; the sync tasks live in mirror.sync.tasks."""

from mirror.sync.tasks import ensure_watchers  # noqa: F401  (registers the task)
