"""Release actions for stuck claims: plan (dry run), re-check live, send, audit.

Every action is planned by a pure function over the claim's JSON and the namespace's pods (so the same
safety rules run on the live objects at the moment of the action, on the mirror for a dry run when the
API server is unreachable, and in the property tests). A plan is either a refusal with a reason, or the
exact request: method, path, body, content type, and the resourceVersion it is conditioned on.
Writes carry `metadata.uid` + `metadata.resourceVersion` (or DeleteOptions preconditions), so a claim
that changed in between is answered 409 by the API server: reported as a conflict, never retried.

On clusters where writes run as the signed-in user (accounts.rights.kube_identity: OIDC users, cluster
listed in GPUDASH_KUBE_IMPERSONATION), the cluster decides: a SubjectAccessReview for exactly the planned
request, then the request itself with Impersonate-User/Impersonate-Group headers. Reads stay on the
dashboard's own credentials. The audit entry keeps both identities (AuditEntry.kube_identity).
"""

import json
import logging
from dataclasses import asdict, dataclass, field

import urllib3
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop
from kubernetes.client.exceptions import ApiException
from urllib3 import HTTPHeaderDict

from accounts.rights import kube_identity
from mirror import roles
from mirror.bounded import bounded
from mirror.kube import KubeClient, KubeError, ops_setting
from mirror.messages import english, message, render
from mirror.sync.apply import apply_object, delete_object

from .models import DELETE_PROTECTION_FINALIZER, OUTCOME_TITLES, AuditEntry, Pod, ResourceClaim

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON = "application/json"

DONE, REFUSED, CONFLICT, ERROR, DRY_RUN = "done", "refused", "conflict", "error", "dry-run"

# Lazy: the pages show them in the reader's language.
ACTION_TITLES = {
    "remove_reservations": _("Remove stale reservedFor entries"),
    "deallocate": _("Deallocate (clear status.allocation)"),
    "finish_deletion": _("Finish the blocked deletion (remove the finalizer)"),
    "delete_claim": _("Delete the template-generated claim"),
}


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


# --- talking to the API server --------------------------------------------------------------------


def _live_state(client, namespace, name):
    claim = client.get_json(claim_path(namespace, name))
    pod_list = client.get_json(f"/api/v1/namespaces/{namespace}/pods")
    pods = {_meta(p).get("name"): p for p in pod_list.get("items") or []}
    return claim, pods


def _mirror_state(cluster, namespace, name):
    row = ResourceClaim.objects.filter(cluster=cluster, namespace=namespace, name=name).first()
    pods = {p.name: p.raw for p in Pod.objects.filter(cluster=cluster, namespace=namespace)}
    return (row.raw if row else None), pods


def send(api_client, request, timeout=10.0, impersonate=None):
    """Send one planned request as-is; returns (HTTP status, parsed body).

    `impersonate` = (user, groups): the request runs as that identity (Kubernetes impersonation headers).
    """
    method, url, headers, body, post_params = api_client.param_serialize(
        request.method,
        request.path,
        header_params={"Content-Type": request.content_type, "Accept": "application/json"},
        body=request.body,
        auth_settings=["BearerToken"],
    )
    if impersonate is not None:
        # param_serialize flattens headers into a dict, but Impersonate-Group is repeated once per group:
        # urllib3 sends every value of an HTTPHeaderDict key as its own header line.
        headers = HTTPHeaderDict(headers)
        user, groups = impersonate
        headers["Impersonate-User"] = user
        for group in groups:
            headers.add("Impersonate-Group", group)
    response = api_client.call_api(method, url, headers, body, post_params, _request_timeout=timeout).response
    try:
        data = response.data
    finally:
        response.release_conn()
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {"raw": data[:500].decode("utf-8", "replace")}
    return response.status, body


# --- the cluster decides: SubjectAccessReview and impersonation -------------------------------------

AUTHZ_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
SELF_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
VERBS = {"GET": "get", "PATCH": "patch", "PUT": "update", "DELETE": "delete", "POST": "create"}
# Kubernetes adds this group to every authenticated user (impersonated ones too); a review must name it.
AUTHENTICATED = "system:authenticated"


def request_attributes(request):
    """The SubjectAccessReview resourceAttributes of a planned request (what the API server's authorizer sees)."""
    parts = [p for p in request.path.split("/") if p]
    group, version, rest = ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    attrs = {"verb": VERBS[request.method], "group": group, "version": version, "resource": rest[0]}
    if namespace:
        attrs["namespace"] = namespace
    if len(rest) > 1:
        attrs["name"] = rest[1]
    if len(rest) > 2:
        attrs["subresource"] = rest[2]
    return attrs


def access_review(api_client, identity, request, timeout):
    """Ask the cluster whether `identity` (user, groups) may send `request`: {"allowed", "reason", ...}.

    Raises KubeError when the review itself cannot be made (then nothing is sent)."""
    user, groups = identity
    attrs = request_attributes(request)
    review = KubeRequest(
        "POST",
        AUTHZ_REVIEWS,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": [*groups, AUTHENTICATED], "resourceAttributes": attrs},
        },
        JSON,
        "",
    )
    try:
        status, body = send(api_client, review, timeout)
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(f"SubjectAccessReview failed: {exc}") from exc
    if not 200 <= status < 300:
        raise KubeError(f"SubjectAccessReview answered {status}: {body.get('message', '')}".rstrip(": "), status=status)
    answer = body.get("status") or {}
    reason = answer.get("reason") or answer.get("evaluationError") or ""
    return {"allowed": bool(answer.get("allowed")) and not answer.get("denied"), "reason": reason, "attributes": attrs}


def dashboard_identity(api_client, cluster, timeout):
    """Who the dashboard's own credentials are to the cluster (SelfSubjectReview), for the audit entry."""
    try:
        status, body = send(
            api_client,
            KubeRequest(
                "POST", SELF_REVIEW, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, JSON, ""
            ),
            timeout,
        )
        name = ((body.get("status") or {}).get("userInfo") or {}).get("username") if 200 <= status < 300 else ""
    except (ApiException, urllib3.exceptions.HTTPError, OSError):
        name = ""
    if name:
        return name
    return (
        "in-cluster service account" if cluster.in_cluster else f"kubeconfig context {cluster.context or '(current)'}"
    )


@dataclass
class Outcome:
    outcome: str
    # Given as a message (mirror/messages.py): kept in `message`, `reason` is its English text (the
    # API, the audit entry's reason); pages show `shown_reason`, in the reader's language.
    reason: str | dict = ""
    plan: Plan | None = None
    response: dict | None = None
    status_code: int = 0
    audit: AuditEntry | None = None
    permission_denied: bool = False
    # {"dashboard": who the dashboard's credentials are, "user"/"groups": the impersonated identity or
    #  None, "review": the SubjectAccessReview verdict}; empty when nothing reached the cluster.
    identity: dict = field(default_factory=dict)
    message: dict = field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.reason, dict):
            self.message, self.reason = self.reason, english(self.reason)

    @property
    def shown_reason(self):
        return render(self.message, self.reason)

    @property
    def outcome_title(self):
        return OUTCOME_TITLES.get(self.outcome, self.outcome)

    def as_dict(self):
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "reason_message": self.message or None,
            "plan": self.plan.as_dict() if self.plan else None,
            "response": self.response,
            "status_code": self.status_code,
            "identity": self.identity,
            "audit_id": self.audit.id if self.audit else None,
        }


def _audit(user, cluster, namespace, name, action, rule, dry_run, outcome, before=None, after=None):
    """Write the attempt's AuditEntry. What it stores is bounded (mirror/bounded.py): an operator's
    input (30,000 uids, say) must not grow the audit log at will; what was left out is counted."""
    claim_uid = _meta(before).get("uid", "") if before else ""
    entry = AuditEntry.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        username=getattr(user, "username", "") or "anonymous",
        cluster=cluster,
        cluster_name=cluster.name,
        namespace=namespace,
        claim_name=name,
        claim_uid=claim_uid,
        action=action,
        rule=rule,
        dry_run=dry_run,
        outcome=outcome.outcome,
        reason=bounded(outcome.reason),
        reason_message=bounded(outcome.message),
        request=bounded(outcome.plan.as_dict()) if outcome.plan else {},
        response=bounded(outcome.response or {}),
        before=bounded(before),
        after=bounded(after),
        kube_identity=bounded(outcome.identity),
    )
    outcome.audit = entry
    return outcome


def release(
    user,
    cluster,
    namespace,
    name,
    action,
    *,
    dry_run=True,
    uids=None,
    rule="",
    expected_uid="",
    expected_resource_version="",
    require_resource_version=False,
):
    """Plan and (unless dry_run) perform one release action, re-checked against the API server. Always audited.
    `require_resource_version`: a release (not a dry run) without `expected_resource_version` is refused."""
    if action not in PLANNERS:
        raise ValueError(f"unknown release action {action!r}; expected one of {', '.join(PLANNERS)}")

    def finish(outcome, before=None, after=None):
        return _audit(user, cluster, namespace, name, action, rule, dry_run, outcome, before, after)

    refusal = _permission_refusal(user, namespace)
    if refusal is not None:
        return finish(refusal)
    if not dry_run and not cluster.writable:
        return finish(
            Outcome(
                REFUSED,
                message(
                    gettext_noop("Cluster %(cluster)s is read-only: writes are switched off."), cluster=cluster.name
                ),
            )
        )
    if require_resource_version and not dry_run and not expected_resource_version:
        # Without it the release would act on whatever the claim is now, not on what the operator was shown.
        return finish(
            Outcome(
                REFUSED,
                message(
                    gettext_noop(
                        "The release did not say which resourceVersion of the claim its dry run showed: "
                        "nothing sent. Run the dry run again."
                    )
                ),
            )
        )

    warnings, client, live = [], None, True
    try:
        client = KubeClient.for_cluster(cluster)
        claim, pods = _live_state(client, namespace, name)
    except KubeError as exc:
        if client is not None:
            client.close()
        # The cluster's own error text stays as it came (a parameter, never translated).
        if exc.not_found:
            return finish(
                Outcome(
                    REFUSED,
                    message(
                        gettext_noop("The claim %(claim)s no longer exists on the API server."),
                        claim=f"{namespace}/{name}",
                    ),
                )
            )
        if not dry_run:
            return finish(
                Outcome(
                    ERROR,
                    message(
                        gettext_noop("Cannot re-check the claim against the API server, nothing sent: %(error)s"),
                        error=str(exc),
                    ),
                )
            )
        claim, pods = _mirror_state(cluster, namespace, name)
        if claim is None:
            return finish(
                Outcome(
                    REFUSED,
                    message(
                        gettext_noop("The claim %(claim)s is not in the mirror and the API server is unreachable."),
                        claim=f"{namespace}/{name}",
                    ),
                )
            )
        warnings.append(
            message(
                gettext_noop(
                    "API server unreachable (%(error)s): planned from the database mirror; the action re-checks live."
                ),
                error=str(exc),
            )
        )
        live = False

    try:
        live_meta = _meta(claim)
        if expected_uid and live_meta.get("uid") != expected_uid:
            return finish(
                Outcome(CONFLICT, message(gettext_noop("The claim was deleted and re-created since: re-evaluate."))),
                before=claim,
            )
        if expected_resource_version and live_meta.get("resourceVersion") != expected_resource_version:
            return finish(
                Outcome(
                    CONFLICT,
                    message(
                        gettext_noop(
                            "The claim changed since (resourceVersion %(expected)s -> %(current)s): re-evaluate."
                        ),
                        expected=expected_resource_version,
                        current=live_meta.get("resourceVersion"),
                    ),
                ),
                before=claim,
            )
        plan = plan_action(action, claim, pods, uids=uids)
        for warning in reversed(warnings):
            plan.warn(warning, first=True)
        if plan.refused:
            return finish(Outcome(REFUSED, plan.refused_message or plan.refused, plan=plan), before=claim)
        timeout = ops_setting("API_TIMEOUT_SECONDS", 10.0)
        identity = kube_identity(user, cluster)
        who = {
            "dashboard": dashboard_identity(client.api_client, cluster, timeout) if live else "",
            "user": identity[0] if identity else None,
            "groups": identity[1] if identity else [],
            "review": None,
        }
        if identity is not None and live:
            try:
                who["review"] = access_review(client.api_client, identity, plan.request, timeout)
            except KubeError as exc:
                if not dry_run:
                    return finish(
                        Outcome(
                            ERROR,
                            message(
                                gettext_noop(
                                    "Cannot ask the cluster whether %(user)s may do this, nothing sent: %(error)s"
                                ),
                                user=identity[0],
                                error=str(exc),
                            ),
                            plan=plan,
                            identity=who,
                        ),
                        before=claim,
                    )
                plan.warn(
                    message(
                        gettext_noop("The cluster could not be asked whether %(user)s may do this: %(error)s"),
                        user=identity[0],
                        error=str(exc),
                    )
                )
            if who["review"] and not who["review"]["allowed"]:
                reason = message(
                    gettext_noop("The cluster denies %(user)s this request: %(reason)s"),
                    user=identity[0],
                    reason=who["review"]["reason"] or message(gettext_noop("no reason given")),
                )
                return finish(Outcome(REFUSED, reason, plan=plan, permission_denied=True, identity=who), before=claim)
        elif identity is not None:
            plan.warn(
                message(
                    gettext_noop("The cluster will be asked whether %(user)s may do this when the action runs."),
                    user=identity[0],
                )
            )
        if dry_run:
            if not cluster.writable:
                plan.warn(
                    message(
                        gettext_noop("Cluster %(cluster)s is read-only: the action itself would be refused."),
                        cluster=cluster.name,
                    )
                )
            verdict = (
                message(gettext_noop("Dry run: nothing sent. The cluster allows it for %(user)s."), user=identity[0])
                if who["review"]
                else message(gettext_noop("Dry run: nothing sent."))
            )
            return finish(Outcome(DRY_RUN, verdict, plan=plan, identity=who), before=claim)
        try:
            status, body = send(client.api_client, plan.request, timeout, impersonate=identity)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            return finish(
                Outcome(
                    ERROR,
                    message(
                        gettext_noop("Request failed, outcome unknown: re-check the claim: %(error)s"), error=str(exc)
                    ),
                    plan=plan,
                    identity=who,
                ),
                before=claim,
            )
        if status == 409:
            return finish(
                Outcome(
                    CONFLICT,
                    message(
                        gettext_noop("The claim changed since it was checked (409 Conflict): re-evaluate; not retried.")
                    ),
                    plan=plan,
                    response=body,
                    status_code=status,
                    identity=who,
                ),
                before=claim,
            )
        said = str(body.get("message", "")).rstrip(": ")  # the API server's words, as it wrote them
        if status == 403 and identity is not None:
            # The cluster's own RBAC said no at write time (e.g. a check the review cannot see): the user's refusal.
            reason = (
                message(
                    gettext_noop("The cluster refused it as %(user)s (403): %(message)s"),
                    user=identity[0],
                    message=said,
                )
                if said
                else message(gettext_noop("The cluster refused it as %(user)s (403)"), user=identity[0])
            )
            return finish(
                Outcome(
                    REFUSED, reason, plan=plan, response=body, status_code=status, permission_denied=True, identity=who
                ),
                before=claim,
            )
        if not 200 <= status < 300:
            reason = (
                message(gettext_noop("The API server answered %(status)s: %(message)s"), status=status, message=said)
                if said
                else message(gettext_noop("The API server answered %(status)s"), status=status)
            )
            return finish(
                Outcome(ERROR, reason, plan=plan, response=body, status_code=status, identity=who), before=claim
            )
        after = _record_result(cluster, namespace, name, plan, body)
        return finish(
            Outcome(DONE, message(gettext_noop("Done.")), plan=plan, response=body, status_code=status, identity=who),
            before=claim,
            after=after,
        )
    finally:
        if client is not None:
            client.close()


def _record_result(cluster, namespace, name, plan, body):
    """Apply the API server's answer to the mirror at once (the watcher will confirm) and re-run the detector."""
    from .stuck import detect

    after = None
    if body.get("kind") == "ResourceClaim":
        after = body
        apply_object(cluster, "ResourceClaim", body)
    elif plan.request.method == "DELETE":
        # A Status body: the object is gone (no finalizer left).
        uid = plan.request.body["preconditions"]["uid"]
        delete_object(cluster, "ResourceClaim", {"metadata": {"namespace": namespace, "name": name, "uid": uid}})
    try:
        detect(cluster)
    except Exception:  # the write succeeded; a detector failure must not turn it into an error
        log.exception("detector run after a release action failed")
    return after


def _permission_refusal(user, namespace):
    """The refusal for a user who may not release in `namespace`, else None."""
    if roles.can_operate(user, namespace):
        return None
    why = (
        message(gettext_noop("Permission denied: requires the operator role."))
        if not roles.has_role(user, roles.OPERATOR)
        else message(
            gettext_noop("Permission denied: namespace %(namespace)s is outside your scope."), namespace=namespace
        )
    )
    return Outcome(REFUSED, why, permission_denied=True)


def release_finding(user, finding, *, dry_run=True, expected_resource_version="", require_resource_version=False):
    """Run the remedy a finding names, for exactly the subject it is about."""
    cluster = finding.cluster
    action = finding.remedy
    refusal = _permission_refusal(user, finding.namespace)  # first: a viewer learns nothing about the finding's state
    if refusal is not None:
        return _audit(
            user, cluster, finding.namespace, finding.claim_name, action or "none", finding.rule, dry_run, refusal
        )
    if finding.cleared_at is not None or not action:
        reason = (
            message(gettext_noop("The finding has cleared: nothing to release."))
            if finding.cleared_at
            else message(gettext_noop("This finding has no safe automatic remedy."))
        )
        outcome = Outcome(REFUSED, reason)
        return _audit(
            user, cluster, finding.namespace, finding.claim_name, action or "none", finding.rule, dry_run, outcome
        )
    uids = [finding.subject] if action == "remove_reservations" and finding.subject else None
    return release(
        user,
        cluster,
        finding.namespace,
        finding.claim_name,
        action,
        dry_run=dry_run,
        uids=uids,
        rule=finding.rule,
        expected_uid=finding.claim_uid,
        expected_resource_version=expected_resource_version,
        require_resource_version=require_resource_version,
    )


__all__ = ("ACTION_TITLES", "Outcome", "PLANNERS", "Plan", "KubeRequest", "plan_action", "release", "release_finding")
