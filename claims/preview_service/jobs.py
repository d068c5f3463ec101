"""A preview as a job: what the web process sends to a preview worker, what comes back, and the
worker's side of running one.

Jobs and answers are plain JSON-ready dicts so that both transports carry them unchanged: a pipe to
a local worker process (embedded default) and a Celery message plus a Redis list (production).
Errors travel as {"error": code, "message", ...} and become the same exceptions on the web side
that an in-process run_preview raised, so views keep one error path. Imports of Django code stay
inside the functions: a worker process imports this module before it sets Django up.
"""


# Keywords of claims.preview.run_preview that a job carries as they are (all JSON-ready).
PLAIN_KEYWORDS = ("yaml_text", "namespace", "with_headroom", "reason_codes", "pod", "tolerations", "node_selector",
                  "node_filters", "deadline")


def make_job(cluster, *, claim=None, visible_namespaces=None, **keywords):
    """The job for run_preview(cluster, claim=claim, visible_namespaces=..., **keywords)."""
    unknown = set(keywords) - set(PLAIN_KEYWORDS)
    if unknown:
        raise TypeError(f"a preview job cannot carry {', '.join(sorted(unknown))}")
    return {
        "cluster": cluster.pk,
        "claim": None if claim is None else claim.pk,
        "visible_namespaces": None if visible_namespaces is None else sorted(visible_namespaces),
        **{k: v for k, v in keywords.items() if v is not None},
    }


def execute(job, deadline):
    """Run one job in this (worker) process. `deadline`: a claims.allocator.deadline.Deadline the
    caller may cancel from another thread. Returns the answer dict; never raises for bad input."""
    from claims.models import ResourceClaim
    from claims.preview import EngineFailure, InventoryNotReady, OutOfScope, PreviewError, run_preview
    from inventory.models import Cluster

    cluster = Cluster.objects.filter(pk=job["cluster"]).first()
    if cluster is None:
        return {"error": "invalid", "message": "the cluster was removed while the preview waited"}
    claim = None
    if job.get("claim") is not None:
        claim = ResourceClaim.objects.filter(pk=job["claim"]).first()
        if claim is None:
            return {"error": "invalid", "message": "the claim was deleted while the preview waited"}
    visible = job.get("visible_namespaces")
    keywords = {k: job[k] for k in PLAIN_KEYWORDS if k in job and k != "deadline"}
    try:
        result = run_preview(cluster, claim=claim, visible_namespaces=None if visible is None else set(visible),
                             deadline=deadline, **keywords)
    except OutOfScope as exc:
        return {"error": "out_of_scope", "message": str(exc), "namespace": exc.namespace}
    except InventoryNotReady as exc:
        return {"error": "inventory_building", "message": str(exc), "retry_after": exc.retry_after}
    except EngineFailure as exc:
        return {"error": "engine", "message": str(exc)}
    except PreviewError as exc:
        return {"error": "invalid", "message": str(exc)}
    return {"result": result}


_last_done = None  # when this worker process last sent an answer (time.monotonic), for "timing"


def timed_execute(job, deadline):
    """execute(), with the worker's side of the answer's "timing": when the job started (epoch
    seconds, to compare with when the web process queued it), how long it ran, and how long this
    process had been idle before it (None for its first job). dispatch.request_preview turns it into
    durations and drops it (the API's Server-Timing header)."""
    import time

    started, began = time.time(), time.monotonic()
    answer = execute(job, deadline)
    answer["timing"] = {"started": started, "run": time.monotonic() - began,
                        "idle": None if _last_done is None else began - _last_done}
    return answer


def answer_sent():
    """A worker calls this once an answer has left (see timed_execute's "idle")."""
    import time

    global _last_done
    _last_done = time.monotonic()


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
    raise PreviewError(message)


def encode_answer(answer):
    """An answer as bytes for either transport: JSON, as the API would write it (non-string keys as
    strings, datetimes and the like through DRF's encoder), so both transports hand views the same data."""
    import orjson
    from rest_framework.utils.encoders import JSONEncoder

    return orjson.dumps(answer, default=JSONEncoder().default, option=orjson.OPT_NON_STR_KEYS)


def decode_answer(data):
    import orjson

    return orjson.loads(data)
