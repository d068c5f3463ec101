"""Release planning: what an action would send, and the safety rules that decide whether it may.

Every action is planned by a pure function over the claim's JSON and the namespace's pods (so the same
safety rules run on the live objects at the moment of the action, on the mirror for a dry run when the
API server is unreachable, and in the property tests). A plan is either a refusal with a reason, or the
exact request: method, path, body, content type, and the resourceVersion it is conditioned on.
Writes carry `metadata.uid` + `metadata.resourceVersion` (or DeleteOptions preconditions), so a claim
that changed in between is answered 409 by the API server: reported as a conflict, never retried.
"""

from dataclasses import asdict, dataclass, field

from django.utils import translation
from django.utils.translation import gettext_noop

from mirror.messages import english, message, render

from ..models import ACTION_TITLES, DELETE_PROTECTION_FINALIZER, ResourceClaim

TERMINAL_PHASES = ("Succeeded", "Failed")
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON = "application/json"


# Lazy: the pages show them in the reader's language.


def claim_path(namespace, name, subresource=""):
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
    return f"{path}/{subresource}" if subresource else path


@dataclass
class KubeRequest:
    method: str
    path: str
    body: dict
    content_type: str
    resource_version: str

    def as_dict(self):
        return asdict(self)


@dataclass
class Plan:
    action: str
    request: KubeRequest | None = None
    refused: str = ""
    warnings: list = field(default_factory=list)
    # What was verified, in words, so the dry run shows why the action is considered safe.
    checks: list = field(default_factory=list)
    # The same texts as messages (mirror/messages.py), for the pages in the reader's language; the
    # English strings above are what the API and the audit entry's request keep. Set through
    # refuse(), warn() and verified(), which write both.
    refused_message: dict = field(default_factory=dict)
    warning_messages: list = field(default_factory=list)
    check_messages: list = field(default_factory=list)

    def refuse(self, msg):
        self.refused_message, self.refused = msg, english(msg)
        return self

    def warn(self, msg, first=False):
        if msg:
            self.warning_messages.insert(0 if first else len(self.warning_messages), msg)
            self.warnings.insert(0 if first else len(self.warnings), english(msg))

    def verified(self, *msgs):
        self.check_messages += msgs
        self.checks += [english(m) for m in msgs]

    def as_dict(self, translate=False):
        """The plan as the API and the audit log keep it (English); translate=True: its texts in the
        active language, for a page."""

        def texts(msgs, stored):  # the stored English where the messages do not line up (set directly)
            return (
                [render(m, t) for m, t in zip(msgs, stored)] if translate and len(msgs) == len(stored) else list(stored)
            )

        title = ACTION_TITLES.get(self.action, self.action)
        if not translate:
            with translation.override(None):  # the msgid: English
                title = str(title)
        return {
            "action": self.action,
            "title": str(title),
            "request": self.request.as_dict() if self.request else None,
            "refused": render(self.refused_message, self.refused) if translate else self.refused,
            "warnings": texts(self.warning_messages, self.warnings),
            "checks": texts(self.check_messages, self.checks),
        }


# --- pure safety rules --------------------------------------------------------------------------------


def _meta(obj):
    return obj.get("metadata") or {}


def _status(obj):
    return obj.get("status") or {}


def pod_is_live(pod):
    """A pod that exists and may still run (including one Terminating: its containers may still hold devices)."""
    return pod is not None and (_status(pod).get("phase") or "") not in TERMINAL_PHASES


def pod_references_claim(pod, claim_name):
    spec, status = pod.get("spec") or {}, _status(pod)
    names = {r.get("resourceClaimName") for r in spec.get("resourceClaims") or []}
    names |= {s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    names.add((status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName"))
    return claim_name in names


def live_referencing_pods(claim, pods):
    name = _meta(claim).get("name")
    return sorted(p_name for p_name, pod in pods.items() if pod_is_live(pod) and pod_references_claim(pod, name))


def consumer_pod(entry, pods):
    """The pod a reservedFor entry names, if that very pod (same uid) still exists."""
    pod = pods.get(entry.get("name"))
    return pod if pod is not None and _meta(pod).get("uid") == entry.get("uid") else None


def _preconditions(claim):
    meta = _meta(claim)
    return {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}


def _node_warning(claim, used=False):
    """The risk of releasing an allocated claim (a message), None when nothing is allocated; `used`: the
    claim had a consumer that used the device (deallocate), else a reservation's pod (force-deleted)."""
    allocation = _status(claim).get("allocation")
    if not allocation:
        return None
    node = ResourceClaim.node_from_selector(allocation.get("nodeSelector")) or message(gettext_noop("its node"))
    if used:
        return message(
            gettext_noop(
                "The device may still be in use on %(node)s: a pod that used it and was force-deleted can leave it prepared until "
                "the driver unprepares it. Once released the scheduler can hand it to another claim at once (double allocation). "
                "Check that no container on %(node)s still uses it."
            ),
            node=node,
        )
    return message(
        gettext_noop(
            "The device may still be in use on %(node)s: a pod that was force-deleted can leave it prepared until the driver "
            "unprepares it. Once released the scheduler can hand it to another claim at once (double allocation). "
            "Check that no container on %(node)s still uses it."
        ),
        node=node,
    )


def plan_remove_reservations(claim, pods, uids=None):
    """Remove reservedFor entries of pods that are gone or finished; `uids` narrows it to those entries."""
    plan = Plan("remove_reservations")
    meta, status = _meta(claim), _status(claim)
    entries = status.get("reservedFor") or []
    present = {e.get("uid") for e in entries}
    if uids:
        missing = [u for u in uids if u not in present]
        if missing:
            return plan.refuse(
                message(
                    gettext_noop("reservedFor no longer has an entry with uid %(uids)s: re-evaluate."),
                    uids=", ".join(missing),
                )
            )
    stale, kept = [], []
    for entry in entries:
        if uids and entry.get("uid") not in uids:
            continue
        if entry.get("resource") != "pods" or entry.get("apiGroup"):
            kept.append(
                message(
                    gettext_noop("%(consumer)s: not a pod, never removed here"),
                    consumer=f"{entry.get('resource')}/{entry.get('name')}",
                )
            )
            continue
        pod = consumer_pod(entry, pods)
        if pod_is_live(pod):
            phase = _status(pod).get("phase") or message(gettext_noop("unknown"))
            kept.append(
                message(
                    gettext_noop("pod %(pod)s (%(uid)s) exists and is %(phase)s"),
                    pod=entry.get("name"),
                    uid=entry.get("uid"),
                    phase=phase,
                )
            )
            continue
        plan.verified(
            message(gettext_noop("pod %(pod)s (%(uid)s) does not exist"), pod=entry.get("name"), uid=entry.get("uid"))
            if pod is None
            else message(
                gettext_noop("pod %(pod)s (%(uid)s) has finished (%(phase)s)"),
                pod=entry.get("name"),
                uid=entry.get("uid"),
                phase=_status(pod).get("phase"),
            )
        )
        stale.append(entry)
    if uids and kept:
        return plan.refuse(message(gettext_noop("Not safe now: %(reasons)s."), reasons=kept))
    if not stale:
        return plan.refuse(
            message(gettext_noop("No stale reservedFor entry: %(reasons)s."), reasons=kept)
            if kept
            else message(gettext_noop("No stale reservedFor entry: reservedFor is empty."))
        )
    plan.request = KubeRequest(
        "PATCH",
        claim_path(meta.get("namespace"), meta.get("name"), "status"),
        # What the scheduler's Unreserve sends, plus the resourceVersion as an optimistic-lock precondition.
        {
            "metadata": _preconditions(claim),
            "status": {"reservedFor": [{"$patch": "delete", "uid": e["uid"]} for e in stale]},
        },
        STRATEGIC,
        meta.get("resourceVersion") or "",
    )
    plan.warn(_node_warning(claim))
    if len(stale) == len(entries) and status.get("allocation"):
        plan.warn(
            message(
                gettext_noop(
                    "reservedFor will be empty but the claim stays allocated: the controller only deallocates when it removes "
                    "the last entry itself. Run 'deallocate' next."
                )
            )
        )
    return plan


def plan_deallocate(claim, pods, **_):
    """Clear status.allocation (and the empty reservedFor) when nobody can be using the devices."""
    plan = Plan("deallocate")
    meta, status = _meta(claim), _status(claim)
    if not status.get("allocation"):
        return plan.refuse(message(gettext_noop("The claim is not allocated.")))
    if status.get("reservedFor"):
        names = ", ".join(e.get("name", "?") for e in status["reservedFor"])
        return plan.refuse(
            message(
                gettext_noop(
                    "reservedFor is not empty (%(consumers)s): remove stale reservations first; never deallocate a reserved claim."
                ),
                consumers=names,
            )
        )
    users = live_referencing_pods(claim, pods)
    if users:
        return plan.refuse(
            message(gettext_noop("Live pods reference the claim and may use it: %(pods)s."), pods=", ".join(users))
        )
    plan.verified(
        message(gettext_noop("reservedFor is empty")),
        message(gettext_noop("no live pod in the namespace references the claim")),
    )
    plan.request = KubeRequest(
        "PATCH",
        claim_path(meta.get("namespace"), meta.get("name"), "status"),
        {"metadata": _preconditions(claim), "status": {"allocation": None, "reservedFor": None}},
        MERGE,
        meta.get("resourceVersion") or "",
    )
    plan.warn(_node_warning(claim, used=True))
    return plan


def plan_finish_deletion(claim, pods, **_):
    """Remove the delete-protection finalizer of a claim being deleted whose allocation is already gone."""
    plan = Plan("finish_deletion")
    meta, status = _meta(claim), _status(claim)
    if not meta.get("deletionTimestamp"):
        return plan.refuse(message(gettext_noop("The claim is not being deleted.")))
    if status.get("allocation"):
        return plan.refuse(
            message(
                gettext_noop(
                    "The claim is still allocated: removing the finalizer now would leak its devices. Deallocate first."
                )
            )
        )
    if status.get("reservedFor"):
        return plan.refuse(message(gettext_noop("The claim is still reserved: release the reservations first.")))
    finalizers = meta.get("finalizers") or []
    if DELETE_PROTECTION_FINALIZER not in finalizers:
        return plan.refuse(
            message(
                gettext_noop(
                    "The claim does not carry %(finalizer)s (other finalizers %(finalizers)s belong to their own controllers)."
                ),
                finalizer=DELETE_PROTECTION_FINALIZER,
                finalizers=", ".join(finalizers),
            )
            if finalizers
            else message(gettext_noop("The claim does not carry %(finalizer)s."), finalizer=DELETE_PROTECTION_FINALIZER)
        )
    remaining = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
    plan.verified(
        message(gettext_noop("the claim has a deletionTimestamp")),
        message(gettext_noop("the allocation is gone")),
        message(gettext_noop("reservedFor is empty")),
    )
    plan.request = KubeRequest(
        "PATCH",
        claim_path(meta.get("namespace"), meta.get("name")),
        # A merge patch replaces the whole list; the resourceVersion pins the list we computed it from.
        {"metadata": {**_preconditions(claim), "finalizers": remaining or None}},
        MERGE,
        meta.get("resourceVersion") or "",
    )
    return plan


def plan_delete_claim(claim, pods, **_):
    """Delete a claim generated from a template once its owning pod is gone."""
    plan = Plan("delete_claim")
    meta, status = _meta(claim), _status(claim)
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Pod" and r.get("controller")), None)
    if owner is None:
        return plan.refuse(
            message(
                gettext_noop(
                    "The claim was not generated from a template for a pod: manually created claims are never deleted here."
                )
            )
        )
    if meta.get("deletionTimestamp"):
        return plan.refuse(message(gettext_noop("The claim is already being deleted.")))
    owner_pod = pods.get(owner.get("name"))
    if owner_pod is not None and _meta(owner_pod).get("uid") == owner.get("uid"):
        return plan.refuse(
            message(
                gettext_noop("The owning pod %(pod)s still exists: the controller would only re-create the claim."),
                pod=owner.get("name"),
            )
        )
    live = [e.get("name") for e in status.get("reservedFor") or [] if pod_is_live(consumer_pod(e, pods))]
    users = sorted(set(live) | set(live_referencing_pods(claim, pods)))
    if users:
        return plan.refuse(
            message(gettext_noop("Live pods still use or reference the claim: %(pods)s."), pods=", ".join(users))
        )
    plan.verified(
        message(gettext_noop("owning pod %(pod)s (%(uid)s) is gone"), pod=owner.get("name"), uid=owner.get("uid")),
        message(gettext_noop("no live pod uses or references the claim")),
    )
    pre = _preconditions(claim)
    plan.request = KubeRequest(
        "DELETE",
        claim_path(meta.get("namespace"), meta.get("name")),
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": pre},
        JSON,
        pre["resourceVersion"] or "",
    )
    if status.get("allocation"):
        plan.warn(_node_warning(claim))
    return plan


PLANNERS = {
    "remove_reservations": plan_remove_reservations,
    "deallocate": plan_deallocate,
    "finish_deletion": plan_finish_deletion,
    "delete_claim": plan_delete_claim,
}


def plan_action(action, claim, pods, uids=None):
    if action not in PLANNERS:
        raise ValueError(f"unknown release action {action!r}; expected one of {', '.join(PLANNERS)}")
    return (
        PLANNERS[action](claim, pods, uids=uids) if action == "remove_reservations" else PLANNERS[action](claim, pods)
    )
