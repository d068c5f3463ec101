"""request_preview: what the web tier calls instead of running the engine itself.

The web process validates, admits (claims.preview_service.admission), hands the job to a preview
worker (a local process pool, or the `preview` Celery queue) and returns the answer, or the same
errors an in-process run_preview raises, plus PreviewBusy (429), PreviewWorkerLost (503) and
PreviewCancelled (the client went away). The engine's CPU time is then spent in other processes, so
no input, however heavy, holds the GIL that serves pages, websockets and /healthz.
"""

import atexit
import logging
import threading
import time

from django.conf import settings
from django.db import connection
from django.http import HttpResponse

from claims.preview_service import admission as admission_module
from claims.preview_service.admission import PreviewBusy
from claims.preview_service.config import limits
from claims.preview_service.jobs import answer_or_raise, decode_answer, encode_answer, is_result, make_job
from claims.preview_service.local_pool import LocalPool, PreviewCancelled, PreviewWorkerLost

__all__ = [
    "NOT_ANSWERED",
    "PreviewBusy",
    "PreviewCancelled",
    "PreviewWorkerLost",
    "not_answered_page",
    "is_result",
    "request_preview",
    "result_of",
    "start",
    "status",
    "submit",
]

log = logging.getLogger(__name__)
_lock = threading.Lock()
_pool = None
_admission = None


def backend():
    name = limits()["BACKEND"]
    if name not in ("local", "celery", "inline"):
        raise ValueError(f"GPUDASH_PREVIEW_SERVICE BACKEND must be local, celery or inline, not {name!r}")
    return name


def start():
    """Called as a web process starts: the local pool starts its workers (they warm their
    inventories up while the server starts); with `inline` this process warms up its own."""
    name = backend()
    if name == "local":
        local_pool()
    elif name == "inline":
        from claims.live_inventory import start_warm_up

        start_warm_up()


def local_pool():
    global _pool
    with _lock:
        if _pool is None:
            size = limits()["WORKERS"]
            _pool = LocalPool(
                size, connection.settings_dict["NAME"], warm_up=getattr(settings, "GPUDASH_PREVIEW_WARM_UP", False)
            )
            atexit.register(_pool.stop)
            log.info("preview pool: %s worker processes", size)
        return _pool


def stop_local_pool():
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.stop()


def _admission_control():
    global _admission
    with _lock:
        if _admission is None:
            if backend() == "celery":
                from claims.preview_service import remote

                _admission = admission_module.RedisAdmission(remote.client())
            else:
                _admission = admission_module.LocalAdmission()
        return _admission


def request_preview(cluster, **keywords):
    """claims.preview.run_preview's answer, run by a preview worker (see submit for the keywords)."""
    return result_of(submit(cluster, **keywords))


def result_of(answer):
    """The result in a submitted preview's answer, or the error run_preview would have raised. Views
    that write big answers call it with the cyclic collector paused (see claims/api/preview.py)."""
    return answer_or_raise(decode_answer(answer))


# What submit raises when no worker answered: the pages turn these into a response with not_answered_page.
NOT_ANSWERED = (PreviewBusy, PreviewWorkerLost, PreviewCancelled)


def not_answered_page(render, ctx, exc):
    """A page's response to a preview no worker answered (`render`: the view's render_to_response):
    the error on the page with the API's status, 429 + Retry-After for admission control and 503 for
    a lost worker; a bare 499 when the client left (nobody reads it)."""
    if isinstance(exc, PreviewCancelled):
        return HttpResponse(status=499)
    ctx["error"] = str(exc)
    if isinstance(exc, PreviewBusy):
        response = render(ctx, status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    return render(ctx, status=503)


def submit(cluster, *, user_key, client_gone=None, timing=None, claim=None, visible_namespaces=None, **keywords):
    """Hand run_preview(cluster, claim=..., visible_namespaces=..., **keywords) to a preview worker and
    wait for its answer (bytes; result_of reads it). `user_key`: who asks (admission counts per user);
    `client_gone`: a threading.Event set when the client disconnects
    (gpudash.middleware.ClientGoneMiddleware), which cancels the job. `timing`: a dict that, once a
    worker has answered, holds seconds: "wall" (queued until the answer is back here), "run" (the
    worker's own run), "wait" (queued until a worker started it) and "idle" (how long that worker had
    been free before; None for its first job)."""
    name = backend()
    if name == "inline":
        from claims.preview_service.jobs import execute

        job = make_job(cluster, claim=claim, visible_namespaces=visible_namespaces, **keywords)
        return encode_answer(execute(job, job.get("deadline")))
    cfg = limits()
    # The deadline travels with the job and counts from now: the worker keeps to what this process's
    # settings say, and time spent waiting for a free worker comes out of it (jobs.job_deadline).
    seconds = keywords.pop("deadline", None) or settings.GPUDASH_ENGINE_LIMITS["PREVIEW_DEADLINE"] or 60.0
    queued_at = time.time()
    job = make_job(cluster, claim=claim, visible_namespaces=visible_namespaces, deadline=seconds, **keywords)
    job["deadline_at"] = queued_at + seconds
    # The grace covers what runs outside the engine's deadline checks: an inventory catch-up, writing the answer.
    wait = seconds + cfg["GRACE"]
    control = _admission_control()
    ticket = control.acquire(str(user_key), hold_seconds=wait + cfg["GRACE"])
    started = time.monotonic()
    try:
        if name == "local":
            answer, worker_side = local_pool().run(job, wait, client_gone)
        else:
            from claims.preview_service import remote

            answer, worker_side = remote.run(job, wait, client_gone)
    finally:
        control.release(ticket)
    wall = time.monotonic() - started
    admission_module.durations.add(wall)
    if timing is not None and worker_side is not None:
        timing.update(
            wall=wall,
            run=worker_side["run"],
            wait=max(0.0, worker_side["started"] - queued_at),
            idle=worker_side["idle"],
        )
    return answer


def warm_up_state():
    """("off" | "warming" | "done", seconds) of the warm-up that serves this web process's previews."""
    name = backend()
    if name == "inline":
        from claims.live_inventory import warm_up_status

        return warm_up_status()
    if name == "celery" or _pool is None:
        return "off", 0.0
    return _pool.warm_up_state()


def status():
    """What the preview workers are doing now, for admins (GET /api/v1/preview/workers)."""
    name = backend()
    out = {"backend": name, "limits": {k: limits()[k] for k in ("WORKERS", "PER_USER", "QUEUE")}}
    if name == "inline":
        return out
    out["inFlight"] = _admission_control().in_flight()
    if name == "local":
        out["workers"] = local_pool().status()
    else:
        from claims.preview_service import remote

        out["running"] = remote.status()
    return out


def preview_inventory_ready():
    """For /readyz (mirror/health.py): the start-up warm-up of the preview inventories in this web
    process's local preview workers; while it runs, a preview would wait for it (seconds on a big
    fleet), so a new pod takes no traffic until it is done and a rolling update keeps the old pods
    serving meanwhile. Celery's preview workers are a Deployment of their own, with their own readiness."""
    state, seconds = warm_up_state()
    if state == "warming":
        raise RuntimeError(f"building the preview inventories ({seconds:.1f} s so far)")
