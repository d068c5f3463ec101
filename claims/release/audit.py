"""Release audit: what an attempt came to (an Outcome), and the AuditEntry every attempt writes."""

from dataclasses import dataclass, field

from mirror.bounded import bounded
from mirror.messages import english, render

from ..models import OUTCOME_TITLES, AuditEntry
from .plans import Plan

DONE, REFUSED, CONFLICT, ERROR, DRY_RUN = "done", "refused", "conflict", "error", "dry-run"


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


def audit(user, cluster, namespace, name, action, rule, dry_run, outcome, before=None, after=None):
    """Write the attempt's AuditEntry. What it stores is bounded (mirror/bounded.py): an operator's
    input (30,000 uids, say) must not grow the audit log at will; what was left out is counted."""
    claim_uid = (before.get("metadata") or {}).get("uid", "") if before else ""
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
