"""The engine's verdict and remedies (dra.verdict, dra.remedies) as the pages say them: in the
reader's language, plain text, each remedy with what changes, where the pod would land, who is
affected, its risk, and a link to gpudash's own dry run where gpudash can act (a release).

Used by the Pending explainer (claims/pending.py) and the claim page's stuck finding; the engine
answer travels as JSON (a preview worker's answer, or a finding's stored evidence)."""

from django.utils.translation import gettext, ngettext

from dra.verdict import headline

from .models import Finding

MAX_DEVICES_SHOWN = 8


def headline_text(answer):
    """The verdict's sentences, translated; [] without a verdict."""
    if not answer or (not answer.get("requests") and not answer.get("fits") and not answer.get("error")):
        return []
    return headline(answer, gettext, ngettext)


def _where(remedy):
    fits = remedy.get("fits") or []
    if not fits:
        return ""
    first = fits[0]
    devices = first.get("devices") or []
    shown = ", ".join(d.rsplit("/", 1)[-1] for d in devices[:MAX_DEVICES_SHOWN]) + (
        ", ..." if len(devices) > MAX_DEVICES_SHOWN else ""
    )
    text = (
        gettext("It would fit on %(node)s (devices %(devices)s).") % {"node": first["node"], "devices": shown}
        if devices
        else gettext("It would fit on %(node)s.") % {"node": first["node"]}
    )
    if len(fits) > 1:
        text += " " + ngettext(
            "%(count)s more node would fit too.", "%(count)s more nodes would fit too.", len(fits) - 1
        ) % {"count": len(fits) - 1}
    return text


def _title_and_change(remedy):
    kind = remedy["kind"]
    change = remedy.get("change") or {}
    if kind == "wait-deleting":
        return gettext("Wait for a claim being deleted"), gettext(
            "Claim %(claims)s is being deleted; once its finalizers are removed its devices are free."
        ) % {"claims": ", ".join(remedy.get("claims") or ())}
    if kind == "release-stuck":
        return gettext("Release a stuck claim"), gettext(
            "Release the devices of stuck claim %(claims)s (dry run first)."
        ) % {"claims": ", ".join(remedy.get("claims") or ())}
    if kind == "uncordon":
        return gettext("Uncordon a node"), gettext("Uncordon node %(node)s (kubectl uncordon %(node)s).") % {
            "node": remedy.get("node")
        }
    if kind == "recover-node":
        return gettext("Recover a NotReady node"), gettext(
            "Bring node %(node)s back to Ready (its kubelet stopped reporting)."
        ) % {"node": remedy.get("node")}
    if kind == "reduce-count":
        return gettext("Ask for fewer devices"), gettext(
            "Request %(request)s: count %(asked)s → %(count)s, the largest count that fits now."
        ) % {"request": change.get("request"), "asked": remedy.get("asked"), "count": remedy.get("count")}
    if kind == "first-available":
        alt = remedy.get("alternative") or {}
        return gettext("Add a firstAvailable alternative"), gettext(
            "Request %(request)s: keep the current ask first and add a firstAvailable alternative of %(count)s devices."
        ) % {"request": change.get("request"), "count": alt.get("count")}
    if kind == "drop-selectors":
        return gettext("Drop the request's selectors"), ngettext(
            "Request %(request)s: without its selectors (%(selectors)s) it fits on %(count)s node.",
            "Request %(request)s: without its selectors (%(selectors)s) it fits on %(count)s nodes.",
            remedy.get("nodesFitting") or len(remedy.get("fits") or ()),
        ) % {
            "request": change.get("request"),
            "selectors": " && ".join(s for s in remedy.get("selectors") or () if s),
            "count": remedy.get("nodesFitting") or len(remedy.get("fits") or ()),
        }
    if kind == "drop-constraints":
        constraints = ", ".join(
            f"matchAttribute {c.get('matchAttribute')}"
            if c.get("matchAttribute")
            else f"distinctAttribute {c.get('distinctAttribute')}"
            for c in remedy.get("constraints") or ()
        )
        count = remedy.get("nodesFitting") or len(remedy.get("fits") or ())
        return gettext("Drop the claim's constraints"), ngettext(
            "Without its constraints (%(constraints)s) it fits on %(count)s node.",
            "Without its constraints (%(constraints)s) it fits on %(count)s nodes.",
            count,
        ) % {"constraints": constraints, "count": count}
    if kind == "other-class":
        return gettext("Use another device class"), gettext(
            "Request %(request)s: device class %(cls)s has free devices."
        ) % {"request": change.get("request"), "cls": remedy.get("deviceClass")}
    if kind == "preempt":
        return gettext("Preempt lower-priority pods"), gettext(
            "Evict %(victims)s (lower priority); their claims, generated for them, go with them."
        ) % {"victims": ", ".join(remedy.get("victims") or ())}
    if kind == "tolerate-node-taint":
        taints = ", ".join(
            f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in remedy.get("taints") or ()
        )
        return gettext("Tolerate a node taint"), gettext("Add a toleration for %(taints)s to the pod.") % {
            "taints": taints
        }
    if kind == "tolerate-device-taint":
        taints = ", ".join(
            f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}" for t in remedy.get("taints") or ()
        )
        return gettext("Tolerate a device taint"), gettext(
            "Add a toleration for %(taints)s to request %(request)s."
        ) % {"taints": taints, "request": change.get("request")}
    if kind == "add-node":
        return gettext("Add capacity"), gettext("One more node like %(node)s would fit it.") % {
            "node": remedy.get("like")
        }
    return kind, ""


RISKS = {
    "tolerate-node-taint": lambda: gettext(
        "Risk: the pod would run on a node its owners reserved for other work (the taint says why)."
    ),
    "tolerate-device-taint": lambda: gettext(
        "Risk: the devices are tainted because the driver or an admin found them unhealthy or reserved; "
        "the pod may get a failing device."
    ),
    "preempt": lambda: gettext(
        "Risk: the evicted pods are stopped and rescheduled; their work since the last checkpoint is lost."
    ),
}


def present(remedies, cluster=None, may_release=None):
    """The remedies as the pages show them: [{kind, title, change, where, affects, risk, findings}].
    `findings`: the stuck findings whose dry run releases the claims, for the claims of namespaces
    where `may_release(namespace)` (the viewer's operator role) says the viewer may run it."""
    out = []
    for remedy in remedies or ():
        title, change = _title_and_change(remedy)
        affects = remedy.get("affects") or []
        item = {
            "kind": remedy["kind"],
            "title": title,
            "change": change,
            "where": _where(remedy),
            "affects": (
                gettext("Affects %(who)s.") % {"who": ", ".join(affects)}
                if affects
                else gettext("Affects no running pod.")
            ),
            "risk": RISKS[remedy["kind"]]() if remedy["kind"] in RISKS else "",
            "findings": [],
        }
        if remedy["kind"] == "release-stuck" and cluster is not None:
            refs = [r for r in remedy.get("claims") or () if "/" in r]
            allowed = [r for r in refs if may_release is not None and may_release(r.split("/", 1)[0])]
            item["findings"] = _release_findings(cluster, allowed)
            item["claim_links"] = [r.split("/", 1) for r in refs]
        out.append(item)
    return out


def _release_findings(cluster, refs):
    ids = []
    for ref in refs:
        ns, _, name = ref.partition("/")
        ids += list(
            Finding.objects.stuck()
            .filter(cluster=cluster, namespace=ns, claim_name=name)
            .exclude(remedy="")
            .values_list("id", flat=True)[:1]
        )
    return ids


def plain(text):
    """Engine text without its markdown code quotes (the pages show plain text)."""
    return text.replace("`", "") if isinstance(text, str) else text
