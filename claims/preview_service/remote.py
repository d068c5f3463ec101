"""Production's preview workers: the `preview` Celery queue, served by their own workers
(`celery -A gpudash worker -Q preview`, a Deployment of its own), each keeping its live preview
inventories warm.

Celery carries the job; the answer comes back through Redis, not Celery's result backend: the worker
pushes it onto a list that the waiting web process pops (BLPOP), so a 10 MB answer crosses once and
the web process waits without polling a result store. While a job runs its worker refreshes a
heartbeat key; a web process that saw the heartbeat and then sees it lapse knows the worker died
(`kill -9`, OOM) and answers 503 at once instead of at the deadline. Cancelling is a key the worker's
heartbeat thread reads: it cancels the engine's deadline, and the engine stops at its next check.
"""

import os
import socket
import threading
import time
import uuid

import orjson
import redis
from celery import shared_task
from django.conf import settings
from django.utils.translation import gettext

from claims.preview_service.config import limits
from claims.preview_service.local_pool import PreviewCancelled, PreviewWorkerLost

PREFIX = "gpudash:preview:job"
QUEUE = "preview"
POLL = 0.1  # seconds per BLPOP turn: how soon a waiting request notices its client or its worker
_client = None
_client_lock = threading.Lock()


def client():
    global _client
    with _client_lock:
        if _client is None:
            _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=10, health_check_interval=30)
        return _client


def _key(job_id, what):
    return f"{PREFIX}:{job_id}:{what}"


def run(job, wait_seconds, client_gone=None):
    """Queue `job` for the preview workers and wait for its answer, as bytes (see LocalPool.run)."""
    job_id = uuid.uuid4().hex
    r = client()
    cfg = limits()
    until = time.monotonic() + wait_seconds
    # A job nobody has taken by then is dropped by the worker that finally gets it.
    run_preview_job.apply_async(args=[job_id, job, time.time() + wait_seconds], queue=QUEUE, expires=wait_seconds)
    started = False
    try:
        while True:
            got = r.blpop([_key(job_id, "answer")], timeout=POLL)
            if got is not None:
                return got[1], _timing(r, job_id)
            if client_gone is not None and client_gone.is_set():
                raise PreviewCancelled()
            if r.exists(_key(job_id, "beat")):
                started = True
            elif started:
                late = r.lpop(_key(job_id, "answer"))  # it may have answered just as its heartbeat ended
                if late is not None:
                    return late, _timing(r, job_id)
                raise PreviewWorkerLost(
                    f"the preview worker running this preview stopped (no heartbeat for {cfg['LOST_AFTER']:g} s); ask again"
                )
            if time.monotonic() > until:
                raise PreviewWorkerLost(
                    gettext("no preview worker answered in time")
                    if started
                    else gettext("no preview worker took this preview in time (are the `preview` workers running?)")
                )
    except BaseException:
        r.set(_key(job_id, "cancel"), 1, ex=max(60, int(wait_seconds) + 60))
        raise


def _timing(r, job_id):
    value = r.get(_key(job_id, "timing"))
    return None if value is None else orjson.loads(value)


@shared_task(name="claims.tasks.run_preview_job", ignore_result=True, acks_late=False)
def run_preview_job(job_id, job, give_up_at):
    """One preview, on a `preview` queue worker. Acknowledged on receipt: a preview whose worker dies is
    answered 503 by the waiting web process, never re-run. (Its name keeps the module it was first in.)"""
    return execute_job(job_id, job, give_up_at)


def execute_job(job_id, job, give_up_at):
    """The Celery task's body, in a preview worker: run the job unless it was cancelled or is too old,
    with a heartbeat, and push the answer for the waiting web process."""
    from claims.preview_service.jobs import job_deadline, run_job

    r = client()
    if r.exists(_key(job_id, "cancel")) or time.time() > give_up_at:
        return "skipped"
    lost_after = limits()["LOST_AFTER"]
    beat_key, cancel_key = _key(job_id, "beat"), _key(job_id, "cancel")
    me = f"{socket.gethostname()}:{os.getpid()}"
    deadline = job_deadline(job)
    done = threading.Event()

    def beat():
        while True:
            r.set(beat_key, me, px=int(lost_after * 1000))
            r.set(
                f"{PREFIX}s:running:{job_id}", orjson.dumps({"worker": me, "since": since}), px=int(lost_after * 1000)
            )
            if r.exists(cancel_key):
                deadline.cancel()
            if done.wait(lost_after / 3):
                return

    since = time.time()
    beat_thread = threading.Thread(target=beat, name=f"preview-beat-{job_id[:8]}", daemon=True)
    beat_thread.start()
    try:
        answer, timing = run_job(job, deadline)
    finally:
        done.set()
        beat_thread.join()
    answer_key = _key(job_id, "answer")
    # The timing first: the web process reads it once the answer is there.
    (
        r.pipeline()
        .set(_key(job_id, "timing"), orjson.dumps(timing), ex=60)
        .rpush(answer_key, answer)
        .expire(answer_key, 60)
        .delete(beat_key, f"{PREFIX}s:running:{job_id}")
        .execute()
    )
    return "answered"


def status():
    """The jobs running now on any preview worker: [{"job", "worker" (host:pid), "since"}]."""
    r = client()
    out = []
    for key in r.scan_iter(match=f"{PREFIX}s:running:*", count=500):
        value = r.get(key)
        if value is not None:
            entry = orjson.loads(value)
            out.append(
                {"job": {"id": key.decode().rsplit(":", 1)[1], "since": entry["since"]}, "worker": entry["worker"]}
            )
    return out
