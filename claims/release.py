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
from django.utils.translation import gettext_lazy as _
from kubernetes.client.exceptions import ApiException
from urllib3 import HTTPHeaderDict

from accounts.rights import kube_identity
from gpudash import roles
from gpudash.kube import KubeClient, KubeError
from gpudash.sync.apply import apply_object, delete_object

from .models import DELETE_PROTECTION_FINALIZER, AuditEntry, Pod, ResourceClaim
from .pending import ops_setting

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

    def as_dict(self):
        return {
            "action": self.action,
            "title": str(ACTION_TITLES.get(self.action, self.action)),
            "request": self.request.as_dict() if self.request else None,
            "refused": self.refused,
            "warnings": self.warnings,
            "checks": self.checks,
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


def _node_warning(claim, who="a pod that was force-deleted"):
    allocation = _status(claim).get("allocation")
    if not allocation:
        return None
    node = ResourceClaim.node_from_selector(allocation.get("nodeSelector")) or "its node"
    return (
        f"The device may still be in use on {node}: {who} can leave it prepared until the driver unprepares it. "
        "Once released the scheduler can hand it to another claim at once (double allocation). "
        f"Check that no container on {node} still uses it."
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
            plan.refused = f"reservedFor no longer has an entry with uid {', '.join(missing)}: re-evaluate."
            return plan
    stale, kept = [], []
    for entry in entries:
        if uids and entry.get("uid") not in uids:
            continue
        if entry.get("resource") != "pods" or entry.get("apiGroup"):
            kept.append(f"{entry.get('resource')}/{entry.get('name')}: not a pod, never removed here")
            continue
        pod = consumer_pod(entry, pods)
        if pod_is_live(pod):
            phase = _status(pod).get("phase") or "unknown"
            kept.append(f"pod {entry.get('name')} ({entry.get('uid')}) exists and is {phase}")
            continue
        why = "does not exist" if pod is None else f"has finished ({_status(pod).get('phase')})"
        plan.checks.append(f"pod {entry.get('name')} ({entry.get('uid')}) {why}")
        stale.append(entry)
    if uids and kept:
        plan.refused = "Not safe now: " + "; ".join(kept) + "."
        return plan
    if not stale:
        plan.refused = "No stale reservedFor entry: " + ("; ".join(kept) if kept else "reservedFor is empty") + "."
        return plan
    plan.request = KubeRequest(
        "PATCH",
        claim_path(meta.get("namespace"), meta.get("name"), "status"),
        # What the scheduler's Unreserve sends, plus the resourceVersion as an optimistic-lock precondition.
        {"metadata": _preconditions(claim), "status": {"reservedFor": [{"$patch": "delete", "uid": e["uid"]} for e in stale]}},
        STRATEGIC,
        meta.get("resourceVersion") or "",
    )
    warning = _node_warning(claim)
    if warning:
        plan.warnings.append(warning)
    if len(stale) == len(entries) and status.get("allocation"):
        plan.warnings.append(
            "reservedFor will be empty but the claim stays allocated: the controller only deallocates when it removes "
            "the last entry itself. Run 'deallocate' next."
        )
    return plan


def plan_deallocate(claim, pods, **_):
    """Clear status.allocation (and the empty reservedFor) when nobody can be using the devices."""
    plan = Plan("deallocate")
    meta, status = _meta(claim), _status(claim)
    if not status.get("allocation"):
        plan.refused = "The claim is not allocated."
        return plan
    if status.get("reservedFor"):
        names = ", ".join(e.get("name", "?") for e in status["reservedFor"])
        plan.refused = f"reservedFor is not empty ({names}): remove stale reservations first; never deallocate a reserved claim."
        return plan
    users = live_referencing_pods(claim, pods)
    if users:
        plan.refused = f"Live pods reference the claim and may use it: {', '.join(users)}."
        return plan
    plan.checks += ["reservedFor is empty", "no live pod in the namespace references the claim"]
    plan.request = KubeRequest(
        "PATCH",
        claim_path(meta.get("namespace"), meta.get("name"), "status"),
        {"metadata": _preconditions(claim), "status": {"allocation": None, "reservedFor": None}},
        MERGE,
        meta.get("resourceVersion") or "",
    )
    plan.warnings.append(_node_warning(claim, "a pod that used it and was force-deleted"))
    return plan


def plan_finish_deletion(claim, pods, **_):
    """Remove the delete-protection finalizer of a claim being deleted whose allocation is already gone."""
    plan = Plan("finish_deletion")
    meta, status = _meta(claim), _status(claim)
    if not meta.get("deletionTimestamp"):
        plan.refused = "The claim is not being deleted."
        return plan
    if status.get("allocation"):
        plan.refused = "The claim is still allocated: removing the finalizer now would leak its devices. Deallocate first."
        return plan
    if status.get("reservedFor"):
        plan.refused = "The claim is still reserved: release the reservations first."
        return plan
    finalizers = meta.get("finalizers") or []
    if DELETE_PROTECTION_FINALIZER not in finalizers:
        plan.refused = f"The claim does not carry {DELETE_PROTECTION_FINALIZER}" + (
            f" (other finalizers {', '.join(finalizers)} belong to their own controllers)." if finalizers else "."
        )
        return plan
    remaining = [f for f in finalizers if f != DELETE_PROTECTION_FINALIZER]
    plan.checks += ["the claim has a deletionTimestamp", "the allocation is gone", "reservedFor is empty"]
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
        plan.refused = "The claim was not generated from a template for a pod: manually created claims are never deleted here."
        return plan
    if meta.get("deletionTimestamp"):
        plan.refused = "The claim is already being deleted."
        return plan
    owner_pod = pods.get(owner.get("name"))
    if owner_pod is not None and _meta(owner_pod).get("uid") == owner.get("uid"):
        plan.refused = f"The owning pod {owner.get('name')} still exists: the controller would only re-create the claim."
        return plan
    live = [e.get("name") for e in status.get("reservedFor") or [] if pod_is_live(consumer_pod(e, pods))]
    users = sorted(set(live) | set(live_referencing_pods(claim, pods)))
    if users:
        plan.refused = f"Live pods still use or reference the claim: {', '.join(users)}."
        return plan
    plan.checks += [f"owning pod {owner.get('name')} ({owner.get('uid')}) is gone", "no live pod uses or references the claim"]
    pre = _preconditions(claim)
    plan.request = KubeRequest(
        "DELETE",
        claim_path(meta.get("namespace"), meta.get("name")),
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": pre},
        JSON,
        pre["resourceVersion"] or "",
    )
    if status.get("allocation"):
        plan.warnings.append(_node_warning(claim))
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
    plan = PLANNERS[action](claim, pods, uids=uids) if action == "remove_reservations" else PLANNERS[action](claim, pods)
    plan.warnings = [w for w in plan.warnings if w]
    return plan


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
    review = KubeRequest("POST", AUTHZ_REVIEWS, {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": [*groups, AUTHENTICATED], "resourceAttributes": attrs},
    }, JSON, "")
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
        status, body = send(api_client, KubeRequest("POST", SELF_REVIEW, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, JSON, ""), timeout)
        name = ((body.get("status") or {}).get("userInfo") or {}).get("username") if 200 <= status < 300 else ""
    except (ApiException, urllib3.exceptions.HTTPError, OSError):
        name = ""
    if name:
        return name
    return "in-cluster service account" if cluster.in_cluster else f"kubeconfig context {cluster.context or '(current)'}"


@dataclass
class Outcome:
    outcome: str
    reason: str = ""
    plan: Plan | None = None
    response: dict | None = None
    status_code: int = 0
    audit: AuditEntry | None = None
    permission_denied: bool = False
    # {"dashboard": who the dashboard's credentials are, "user"/"groups": the impersonated identity or
    #  None, "review": the SubjectAccessReview verdict}; empty when nothing reached the cluster.
    identity: dict = field(default_factory=dict)

    def as_dict(self):
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "plan": self.plan.as_dict() if self.plan else None,
            "response": self.response,
            "status_code": self.status_code,
            "identity": self.identity,
            "audit_id": self.audit.id if self.audit else None,
        }


def _audit(user, cluster, namespace, name, action, rule, dry_run, outcome, before=None, after=None):
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
        reason=outcome.reason,
        request=outcome.plan.as_dict() if outcome.plan else {},
        response=outcome.response or {},
        before=before,
        after=after,
        kube_identity=outcome.identity,
    )
    outcome.audit = entry
    return outcome


def release(user, cluster, namespace, name, action, *, dry_run=True, uids=None, rule="", expected_uid="", expected_resource_version=""):
    """Plan and (unless dry_run) perform one release action, re-checked against the API server. Always audited."""
    if action not in PLANNERS:
        raise ValueError(f"unknown release action {action!r}; expected one of {', '.join(PLANNERS)}")

    def finish(outcome, before=None, after=None):
        return _audit(user, cluster, namespace, name, action, rule, dry_run, outcome, before, after)

    refusal = _permission_refusal(user, namespace)
    if refusal is not None:
        return finish(refusal)
    if not dry_run and not cluster.writable:
        return finish(Outcome(REFUSED, f"Cluster {cluster.name} is read-only: writes are switched off."))

    warnings, client, live = [], None, True
    try:
        client = KubeClient.for_cluster(cluster)
        claim, pods = _live_state(client, namespace, name)
    except KubeError as exc:
        if client is not None:
            client.close()
        if exc.not_found:
            return finish(Outcome(REFUSED, f"The claim {namespace}/{name} no longer exists on the API server."))
        if not dry_run:
            return finish(Outcome(ERROR, f"Cannot re-check the claim against the API server, nothing sent: {exc}"))
        claim, pods = _mirror_state(cluster, namespace, name)
        if claim is None:
            return finish(Outcome(REFUSED, f"The claim {namespace}/{name} is not in the mirror and the API server is unreachable."))
        warnings.append(f"API server unreachable ({exc}): planned from the database mirror; the action re-checks live.")
        live = False

    try:
        live_meta = _meta(claim)
        if expected_uid and live_meta.get("uid") != expected_uid:
            return finish(Outcome(CONFLICT, "The claim was deleted and re-created since: re-evaluate."), before=claim)
        if expected_resource_version and live_meta.get("resourceVersion") != expected_resource_version:
            return finish(
                Outcome(CONFLICT, f"The claim changed since (resourceVersion {expected_resource_version} -> "
                        f"{live_meta.get('resourceVersion')}): re-evaluate."),
                before=claim,
            )
        plan = plan_action(action, claim, pods, uids=uids)
        plan.warnings = warnings + plan.warnings
        if plan.refused:
            return finish(Outcome(REFUSED, plan.refused, plan=plan), before=claim)
        timeout = ops_setting("API_TIMEOUT_SECONDS", 10.0)
        identity = kube_identity(user, cluster)
        who = {"dashboard": dashboard_identity(client.api_client, cluster, timeout) if live else "",
               "user": identity[0] if identity else None, "groups": identity[1] if identity else [], "review": None}
        if identity is not None and live:
            try:
                who["review"] = access_review(client.api_client, identity, plan.request, timeout)
            except KubeError as exc:
                if not dry_run:
                    return finish(Outcome(ERROR, f"Cannot ask the cluster whether {identity[0]} may do this, nothing sent: {exc}",
                                          plan=plan, identity=who), before=claim)
                plan.warnings.append(f"The cluster could not be asked whether {identity[0]} may do this: {exc}")
            if who["review"] and not who["review"]["allowed"]:
                reason = f"The cluster denies {identity[0]} this request: {who['review']['reason'] or 'no reason given'}"
                return finish(Outcome(REFUSED, reason, plan=plan, permission_denied=True, identity=who), before=claim)
        elif identity is not None:
            plan.warnings.append(f"The cluster will be asked whether {identity[0]} may do this when the action runs.")
        if dry_run:
            if not cluster.writable:
                plan.warnings.append(f"Cluster {cluster.name} is read-only: the action itself would be refused.")
            verdict = " The cluster allows it for " + identity[0] + "." if who["review"] else ""
            return finish(Outcome(DRY_RUN, "Dry run: nothing sent." + verdict, plan=plan, identity=who), before=claim)
        try:
            status, body = send(client.api_client, plan.request, timeout, impersonate=identity)
        except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            return finish(Outcome(ERROR, f"Request failed, outcome unknown: re-check the claim: {exc}", plan=plan, identity=who),
                          before=claim)
        if status == 409:
            return finish(Outcome(CONFLICT, "The claim changed since it was checked (409 Conflict): re-evaluate; not retried.",
                                  plan=plan, response=body, status_code=status, identity=who), before=claim)
        if status == 403 and identity is not None:
            # The cluster's own RBAC said no at write time (e.g. a check the review cannot see): the user's refusal.
            return finish(Outcome(REFUSED, f"The cluster refused it as {identity[0]} (403): {body.get('message', '')}".rstrip(": "),
                                  plan=plan, response=body, status_code=status, permission_denied=True, identity=who), before=claim)
        if not 200 <= status < 300:
            return finish(Outcome(ERROR, f"The API server answered {status}: {body.get('message', '')}".rstrip(": "),
                                  plan=plan, response=body, status_code=status, identity=who), before=claim)
        after = _record_result(cluster, namespace, name, plan, body)
        return finish(Outcome(DONE, "Done.", plan=plan, response=body, status_code=status, identity=who), before=claim, after=after)
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
    why = "requires the operator role" if not roles.has_role(user, roles.OPERATOR) else f"namespace {namespace} is outside your scope"
    return Outcome(REFUSED, f"Permission denied: {why}.", permission_denied=True)


def release_finding(user, finding, *, dry_run=True, expected_resource_version=""):
    """Run the remedy a finding names, for exactly the subject it is about."""
    cluster = finding.cluster
    action = finding.remedy
    refusal = _permission_refusal(user, finding.namespace)  # first: a viewer learns nothing about the finding's state
    if refusal is not None:
        return _audit(user, cluster, finding.namespace, finding.claim_name, action or "none", finding.rule, dry_run, refusal)
    if finding.cleared_at is not None or not action:
        reason = "The finding has cleared: nothing to release." if finding.cleared_at else "This finding has no safe automatic remedy."
        outcome = Outcome(REFUSED, reason)
        return _audit(user, cluster, finding.namespace, finding.claim_name, action or "none", finding.rule, dry_run, outcome)
    uids = [finding.subject] if action == "remove_reservations" and finding.subject else None
    return release(
        user, cluster, finding.namespace, finding.claim_name, action,
        dry_run=dry_run, uids=uids, rule=finding.rule, expected_uid=finding.claim_uid,
        expected_resource_version=expected_resource_version,
    )


__all__ = ("ACTION_TITLES", "Outcome", "PLANNERS", "Plan", "KubeRequest", "plan_action", "release", "release_finding")
