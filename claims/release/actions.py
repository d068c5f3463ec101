"""Release actions for stuck claims: plan (dry run), re-check live, send, audit.

The steps are in their own modules: planning and the safety rules (plans.py), the requests to the API
server (transport.py), the audit entry (audit.py). Here: who may, which state the plan is made from
(live, or the mirror for a dry run while the API server is unreachable), and what the answer means. The
audit entry keeps both identities where writes run as the signed-in user (AuditEntry.kube_identity).
"""

import logging

from django.utils.translation import gettext_noop

from accounts.rights import kube_identity
from mirror import roles
from mirror.kube import KubeClient, KubeError, ops_setting
from mirror.messages import message
from mirror.sync.apply import apply_object, delete_object

from ..models import Pod, ResourceClaim
from .audit import CONFLICT, DONE, DRY_RUN, ERROR, REFUSED, Outcome, audit
from .plans import PLANNERS, plan_action
from .transport import TRANSPORT_ERRORS, access_review, dashboard_identity, live_state, send

log = logging.getLogger(__name__)


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
        return audit(user, cluster, namespace, name, action, rule, dry_run, outcome, before, after)

    refusal = _refusal_before_reading(
        user, cluster, namespace, dry_run, require_resource_version, expected_resource_version
    )
    if refusal is not None:
        return finish(refusal)

    warnings, client, live = [], None, True
    try:
        client = KubeClient.for_cluster(cluster)
        claim, pods = live_state(client, namespace, name)
    except KubeError as exc:
        if client is not None:
            client.close()
        claim, pods, unreadable = _mirror_fallback(exc, cluster, namespace, name, dry_run)
        if unreadable is not None:
            return finish(unreadable)
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
        changed = _changed_since(claim, expected_uid, expected_resource_version)
        if changed is not None:
            return finish(changed, before=claim)
        plan = plan_action(action, claim, pods, uids=uids)
        for warning in reversed(warnings):
            plan.warn(warning, first=True)
        if plan.refused:
            return finish(Outcome(REFUSED, plan.refused_message or plan.refused, plan=plan), before=claim)
        timeout = ops_setting("API_TIMEOUT_SECONDS", 10.0)
        identity = kube_identity(user, cluster)
        who, denied = _ask_the_cluster(client, cluster, identity, plan, timeout, live=live, dry_run=dry_run)
        if denied is not None:
            return finish(denied, before=claim)
        if dry_run:
            return finish(_dry_run_outcome(cluster, plan, identity, who), before=claim)
        try:
            status, body = send(client.api_client, plan.request, timeout, impersonate=identity)
        except TRANSPORT_ERRORS as exc:
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
        answer = _answer_outcome(status, body, plan, identity, who)
        after = _record_result(cluster, namespace, name, plan, body) if answer.outcome == DONE else None
        return finish(answer, before=claim, after=after)
    finally:
        if client is not None:
            client.close()


def _refusal_before_reading(user, cluster, namespace, dry_run, require_resource_version, expected_resource_version):
    """The refusal that needs no look at the claim (permission, a read-only cluster, no resourceVersion), else None."""
    refusal = _permission_refusal(user, namespace)
    if refusal is not None:
        return refusal
    if not dry_run and not cluster.writable:
        return Outcome(
            REFUSED,
            message(gettext_noop("Cluster %(cluster)s is read-only: writes are switched off."), cluster=cluster.name),
        )
    if require_resource_version and not dry_run and not expected_resource_version:
        # Without it the release would act on whatever the claim is now, not on what the operator was shown.
        return Outcome(
            REFUSED,
            message(
                gettext_noop(
                    "The release did not say which resourceVersion of the claim its dry run showed: "
                    "nothing sent. Run the dry run again."
                )
            ),
        )
    return None


def _mirror_fallback(exc, cluster, namespace, name, dry_run):
    """After the live read failed with `exc`: (claim, pods, None) from the mirror for a dry run, else
    (None, None, the outcome) when nothing can be planned."""
    # The cluster's own error text stays as it came (a parameter, never translated).
    if exc.not_found:
        return (
            None,
            None,
            Outcome(
                REFUSED,
                message(
                    gettext_noop("The claim %(claim)s no longer exists on the API server."),
                    claim=f"{namespace}/{name}",
                ),
            ),
        )
    if not dry_run:
        return (
            None,
            None,
            Outcome(
                ERROR,
                message(
                    gettext_noop("Cannot re-check the claim against the API server, nothing sent: %(error)s"),
                    error=str(exc),
                ),
            ),
        )
    claim, pods = _mirror_state(cluster, namespace, name)
    if claim is None:
        return (
            None,
            None,
            Outcome(
                REFUSED,
                message(
                    gettext_noop("The claim %(claim)s is not in the mirror and the API server is unreachable."),
                    claim=f"{namespace}/{name}",
                ),
            ),
        )
    return claim, pods, None


def _mirror_state(cluster, namespace, name):
    row = ResourceClaim.objects.filter(cluster=cluster, namespace=namespace, name=name).first()
    pods = {p.name: p.raw for p in Pod.objects.filter(cluster=cluster, namespace=namespace)}
    return (row.raw if row else None), pods


def _changed_since(claim, expected_uid, expected_resource_version):
    """The conflict when the claim is not the one (or not the version) the operator was shown, else None."""
    live_meta = claim.get("metadata") or {}
    if expected_uid and live_meta.get("uid") != expected_uid:
        return Outcome(CONFLICT, message(gettext_noop("The claim was deleted and re-created since: re-evaluate.")))
    if expected_resource_version and live_meta.get("resourceVersion") != expected_resource_version:
        return Outcome(
            CONFLICT,
            message(
                gettext_noop("The claim changed since (resourceVersion %(expected)s -> %(current)s): re-evaluate."),
                expected=expected_resource_version,
                current=live_meta.get("resourceVersion"),
            ),
        )
    return None


def _ask_the_cluster(client, cluster, identity, plan, timeout, *, live, dry_run):
    """Who acts ({"dashboard", "user", "groups", "review"}) and, where the cluster's SubjectAccessReview
    denies the impersonated user (or cannot be asked before a write), the outcome that ends the action."""
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
                return who, Outcome(
                    ERROR,
                    message(
                        gettext_noop("Cannot ask the cluster whether %(user)s may do this, nothing sent: %(error)s"),
                        user=identity[0],
                        error=str(exc),
                    ),
                    plan=plan,
                    identity=who,
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
            return who, Outcome(REFUSED, reason, plan=plan, permission_denied=True, identity=who)
    elif identity is not None:
        plan.warn(
            message(
                gettext_noop("The cluster will be asked whether %(user)s may do this when the action runs."),
                user=identity[0],
            )
        )
    return who, None


def _dry_run_outcome(cluster, plan, identity, who):
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
    return Outcome(DRY_RUN, verdict, plan=plan, identity=who)


def _answer_outcome(status, body, plan, identity, who):
    """What the API server's answer to the sent request means."""
    if status == 409:
        return Outcome(
            CONFLICT,
            message(gettext_noop("The claim changed since it was checked (409 Conflict): re-evaluate; not retried.")),
            plan=plan,
            response=body,
            status_code=status,
            identity=who,
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
        return Outcome(
            REFUSED, reason, plan=plan, response=body, status_code=status, permission_denied=True, identity=who
        )
    if not 200 <= status < 300:
        reason = (
            message(gettext_noop("The API server answered %(status)s: %(message)s"), status=status, message=said)
            if said
            else message(gettext_noop("The API server answered %(status)s"), status=status)
        )
        return Outcome(ERROR, reason, plan=plan, response=body, status_code=status, identity=who)
    return Outcome(DONE, message(gettext_noop("Done.")), plan=plan, response=body, status_code=status, identity=who)


def _record_result(cluster, namespace, name, plan, body):
    """Apply the API server's answer to the mirror at once (the watcher will confirm) and re-run the detector."""
    from ..stuck import detect

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
        return audit(
            user, cluster, finding.namespace, finding.claim_name, action or "none", finding.rule, dry_run, refusal
        )
    if finding.cleared_at is not None or not action:
        reason = (
            message(gettext_noop("The finding has cleared: nothing to release."))
            if finding.cleared_at
            else message(gettext_noop("This finding has no safe automatic remedy."))
        )
        outcome = Outcome(REFUSED, reason)
        return audit(
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
