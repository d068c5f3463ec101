"""What a stuck-claim finding may show to a namespace-scoped user.

Findings are listed by their claim's namespace (roles.scope_queryset), but the stored summary and
evidence can name claims of other namespaces: the other holders of a double-allocated device, and the
engine's example holders in an 'unallocatable' explanation. They are kept whole in the database (an
admin needs them) and scrubbed per user when shown: by the API serializer, the pages and the dry run.
"""

import copy

from mirror import roles
from mirror.messages import render

from .preview_scope import OTHER_CLAIM, redact_remedies, redact_result
from .stuck import DOUBLE_ALLOCATION, EVIDENCE_SCOPES, double_allocation_summary


def _visible(ref, visible):
    return isinstance(ref, str) and ref.partition("/")[0] in visible


def scoped_summary_and_evidence(rule, summary, evidence, visible, message=None, translate=None):
    """(summary, evidence) as a user with namespace scope `visible` (None = all) may see them; the
    arguments are left untouched. With the stored `message` the summary is in the active language
    (the pages) unless translate=False (the API); without it, the stored English."""
    translate = bool(message) if translate is None else translate
    scope = EVIDENCE_SCOPES.get(rule) if visible is not None else None
    if scope is not None:
        # A registered rule (health's) knows what in its message and evidence names other namespaces.
        message, evidence = scope(
            copy.deepcopy(message) if isinstance(message, dict) else None,
            copy.deepcopy(evidence) if isinstance(evidence, dict) else {},
            visible,
        )
    # The English API keeps the stored summary unless the scope changed the message.
    summary = render(message, summary, translate) if message and (translate or scope) else summary
    if visible is None:
        return summary, evidence
    evidence = copy.deepcopy(evidence) if isinstance(evidence, dict) else {}
    others = [ref for ref in evidence.get("claims") or [] if not _visible(ref, visible)]
    if others:
        # Hidden ones last: where they sorted among the visible names would say something of them.
        shown = [ref for ref in evidence["claims"] if _visible(ref, visible)] + [OTHER_CLAIM] * len(others)
        evidence["claims"] = shown
        if rule == DOUBLE_ALLOCATION and evidence.get("device"):
            summary = render(double_allocation_summary(evidence["device"], shown), summary, translate)
        else:  # any other wording (older rows): the names themselves, longest first so none is left half-replaced
            for ref in sorted({r for r in others if isinstance(r, str)}, key=len, reverse=True):
                summary = summary.replace(ref, OTHER_CLAIM)
    if isinstance(evidence.get("explanation"), dict):
        evidence["explanation"] = redact_remedies(redact_result(evidence["explanation"], visible), visible)
    return redact_result(summary, visible), evidence


def show_findings(findings, user):
    """Give each finding `shown_summary` and `shown_evidence` for `user` (templates show only those,
    so a view that forgets this shows nothing rather than too much); returns the list."""
    visible = roles.visible_namespaces(user)
    for f in findings:
        f.shown_summary, f.shown_evidence = scoped_summary_and_evidence(
            f.rule, f.summary, f.evidence, visible, f.summary_message
        )
    return findings


def stuck_count(user, cluster=None):
    """Open stuck-claim findings the user may see, in `cluster` or all (the navigation's badge)."""
    from .models import Finding

    qs = Finding.objects.stuck() if cluster is None else Finding.objects.stuck().filter(cluster=cluster)
    return roles.scope_queryset(qs, user).count()
