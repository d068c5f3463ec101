"""A preview as a job: what the web process sends to a preview worker, what comes back, and the
worker's side of running one.

Jobs and answers are plain JSON-ready dicts so that both transports carry them unchanged: a pipe to
a local worker process (embedded default) and a Celery message plus a Redis list (production).
Errors travel as {"error": code, "message", ...} and become the same exceptions on the web side
that an in-process run_preview raised, so views keep one error path. Imports of Django code stay
inside the functions: a worker process imports this module before it sets Django up.
"""

import logging
import time

log = logging.getLogger(__name__)

# Keywords of claims.preview.run_preview that a job carries as they are (all JSON-ready).
PLAIN_KEYWORDS = (
    "yaml_text",
    "namespace",
    "with_headroom",
    "reason_codes",
    "pod",
    "tolerations",
    "node_selector",
    "node_filters",
    "deadline",
    "with_remedies",
)
# Keywords of a what-if job (`what: "whatif"`, claims.whatif.run_whatif).
WHATIF_KEYWORDS = ("changes", "shapes")


def make_job(cluster, *, claim=None, visible_namespaces=None, what=None, **keywords):
    """The job for run_preview(cluster, claim=claim, visible_namespaces=..., **keywords), or with
    what="whatif" for claims.whatif.run_whatif(cluster, changes=..., shapes=..., ...)."""
    allowed = set(PLAIN_KEYWORDS) if what is None else {*WHATIF_KEYWORDS, "deadline"}
    unknown = set(keywords) - allowed
    if unknown:
        raise TypeError(f"a preview job cannot carry {', '.join(sorted(unknown))}")
    return {
        **({"what": what} if what else {}),
        "cluster": cluster.pk,
        "claim": None if claim is None else claim.pk,
        "visible_namespaces": None if visible_namespaces is None else sorted(visible_namespaces),
        **{k: v for k, v in keywords.items() if v is not None},
    }


def execute(job, deadline):
    """Run one job in this (worker) process. `deadline`: a dra.deadline.Deadline the
    caller may cancel from another thread. Returns the answer dict; never raises for bad input."""
    from claims.models import ResourceClaim
    from claims.preview import EngineFailure, InventoryNotReady, OutOfScope, PreviewError, run_preview
    from mirror.models import Cluster

    cluster = Cluster.objects.filter(pk=job["cluster"]).first()
    if cluster is None:
        return {"error": "invalid", "message": "the cluster was removed while the preview waited"}
    claim = None
    if job.get("claim") is not None:
        claim = ResourceClaim.objects.filter(pk=job["claim"]).first()
        if claim is None:
            return {"error": "invalid", "message": "the claim was deleted while the preview waited"}
    visible = job.get("visible_namespaces")
    if job.get("what") == "whatif":
        return _execute_whatif(cluster, job, None if visible is None else set(visible), deadline)
    keywords = {k: job[k] for k in PLAIN_KEYWORDS if k in job and k != "deadline"}
    try:
        result = run_preview(
            cluster,
            claim=claim,
            visible_namespaces=None if visible is None else set(visible),
            deadline=deadline,
            **keywords,
        )
    except OutOfScope as exc:
        return {"error": "out_of_scope", "message": str(exc), "namespace": exc.namespace}
    except InventoryNotReady as exc:
        return {"error": "inventory_building", "message": str(exc), "retry_after": exc.retry_after}
    except EngineFailure as exc:
        return {"error": "engine", "message": str(exc)}
    except PreviewError as exc:
        return {"error": "invalid", "message": str(exc)}
    return {"result": result}


def _execute_whatif(cluster, job, visible, deadline):
    from claims.preview import EngineFailure, InventoryNotReady, OutOfScope, PreviewError
    from claims.whatif import ScenarioInvalid, run_whatif

    try:
        result = run_whatif(
            cluster,
            changes=job.get("changes") or [],
            shapes=job.get("shapes") or [],
            visible_namespaces=visible,
            deadline=deadline,
        )
    except OutOfScope as exc:
        return {"error": "out_of_scope", "message": str(exc), "namespace": exc.namespace}
    except ScenarioInvalid as exc:
        return {"error": "scenario", "message": str(exc), "field": exc.field, "index": exc.index}
    except InventoryNotReady as exc:
        return {"error": "inventory_building", "message": str(exc), "retry_after": exc.retry_after}
    except EngineFailure as exc:
        return {"error": "engine", "message": str(exc)}
    except PreviewError as exc:
        return {"error": "invalid", "message": str(exc)}
    return {"result": result}


_last_done = None  # when this worker process last sent an answer (time.monotonic), for "idle"


def job_deadline(job):
    """The engine's Deadline for `job`: its `deadline` seconds, counted from when the web process queued
    it (`deadline_at`, epoch seconds), so time spent waiting for a worker is not granted twice and the
    web process's wait (deadline + grace) always outlasts the worker's run."""
    from django.conf import settings

    from dra.deadline import Deadline

    deadline = Deadline(job.get("deadline") or settings.GPUDASH_ENGINE_LIMITS["PREVIEW_DEADLINE"] or None)
    if job.get("deadline_at") is not None and deadline.at is not None:
        deadline.at = time.monotonic() + max(0.0, job["deadline_at"] - time.time())
    return deadline


def run_job(job, deadline):
    """A worker's whole turn on `job`: (answer bytes, timing). A bug in the engine is logged and
    answered as an engine error, never left without an answer. Timing: when the job started (epoch
    seconds, to compare with `queued_at`), how long it ran, and how long this worker had been idle
    before (None for its first job); dispatch.submit turns it into the API's Server-Timing."""
    global _last_done
    started, began = time.time(), time.monotonic()
    try:
        answer = execute(job, deadline)
    except Exception as exc:
        log.exception("preview job failed")
        answer = {"error": "engine", "message": f"the preview failed ({type(exc).__name__}); the failure was logged"}
    data = encode_answer(answer)
    done = time.monotonic()
    timing = {"started": started, "run": done - began, "idle": None if _last_done is None else began - _last_done}
    _last_done = done
    return data, timing


def answer_or_raise(answer):
    """The result of an answer, or the exception an in-process run_preview would have raised."""
    from claims.preview import EngineFailure, InventoryNotReady, OutOfScope, PreviewError

    if "result" in answer:
        return answer["result"]
    code, message = answer.get("error"), answer.get("message", "")
    if code == "out_of_scope":
        raise OutOfScope(answer.get("namespace", ""))
    if code == "inventory_building":
        raise InventoryNotReady.said(message, answer.get("retry_after") or 5)
    if code == "engine":
        raise EngineFailure(message)
    if code == "scenario":
        from claims.whatif import ScenarioInvalid

        raise ScenarioInvalid(message, answer.get("field") or "changes", answer.get("index"))
    raise PreviewError(message)


def encode_answer(answer):
    """An answer as bytes for either transport, written by the API's own JSON renderer: a successful
    answer ({"result": ...}) is then byte for byte the body POST /api/v1/preview sends, and the web
    process passes it on without reading it (is_result)."""
    from mirror.api.renderers import JSONRenderer

    return JSONRenderer().render(answer)


def is_result(data):
    """Whether encoded answer bytes hold a result (not an error); encode_answer writes the one key first."""
    return data.startswith(b'{"result":')


def decode_answer(data):
    import orjson

    return orjson.loads(data)
