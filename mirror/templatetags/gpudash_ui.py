"""Small formatting helpers for the UI templates: typed DRA values, states, relative times."""

import datetime
import html
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from mirror import messages
from mirror.states import STATE_LABELS
from mirror.states import state_label as _state_label

register = template.Library()


# What the nav's connection line and the severity badges say; the keys stay in classes and filters.
CONNECTION_TITLES = {
    "connected": gettext_lazy("connected"),
    "lagging": gettext_lazy("lagging"),
    "disconnected": gettext_lazy("disconnected"),
    "never": gettext_lazy("never connected"),
    "snapshot": gettext_lazy("snapshot"),
}
SEVERITY_TITLES = {
    "info": gettext_lazy("info"),
    "warning": gettext_lazy("warning"),
    "critical": gettext_lazy("critical"),
}


CHECK_STATUS_TITLES = {
    "pass": gettext_lazy("pass"),
    "warn": gettext_lazy("warn"),
    "fail": gettext_lazy("fail"),
    "skip": gettext_lazy("skip"),
}


@register.filter
def check_status(status):
    """A readiness check's pass/warn/fail/skip in the page's language (the key stays in classes and the API)."""
    return CHECK_STATUS_TITLES.get(status, status)


# The pod name the engine gives a claim previewed without a pod (dra.nodefilters.SchedulingPod.would_be):
# the engine's text stays as it is, the page shows it in its language.
ENGINE_POD_PLACEHOLDER = "(the pod using the claim)"


@register.filter
def engine_pod_ref(ref):
    return gettext_lazy("(the pod using the claim)") if ref == ENGINE_POD_PLACEHOLDER else ref


@register.filter
def duration(seconds):
    """Seconds as "0.3 ms", "4.2 s", "3 min 12 s", units in the page's language (mirror.messages.duration)."""
    try:
        return messages.duration(seconds)
    except (TypeError, ValueError):
        return seconds


@register.simple_tag
def history_series_labels():
    """The fleet-history charts' series names (state, kind and claim-state keys) in the page's language, as
    JSON for history.js's legends."""
    import json

    labels = {k: str(v) for k, v in STATE_LABELS.items()}
    labels.update({k: str(v) for k, v in CLAIM_STATE_TITLES.items()})
    labels.update(
        gpu=str(_("whole GPUs")),
        partition=str(_("partitions")),
        other=str(_("other devices")),
        idle=str(_("idle GPUs")),
    )
    return json.dumps(labels, ensure_ascii=False)


@register.simple_tag
def search_max():
    """The longest search text the pages take (mirror.views.MAX_SEARCH_LENGTH), for inputs' maxlength."""
    from mirror.views import MAX_SEARCH_LENGTH

    return MAX_SEARCH_LENGTH


@register.filter
def connection_title(status):
    return CONNECTION_TITLES.get(status, status)


@register.filter
def severity_title(severity):
    return SEVERITY_TITLES.get(severity, severity)


@register.filter
def typed_value(attr):
    """An attribute's value with its type: {'version': '9.0.0'} -> '9.0.0 (version)'."""
    if not isinstance(attr, dict):
        return attr
    for kind in ("string", "int", "bool", "version"):
        if kind in attr:
            value = attr[kind]
            return value if kind == "string" else f"{value} ({kind})"
    return ", ".join(f"{k}={v}" for k, v in attr.items())


@register.filter
def capacity_value(cap):
    if isinstance(cap, dict) and "value" in cap:
        policy = cap.get("requestPolicy")
        return f"{cap['value']} (request policy: {policy})" if policy else cap["value"]
    return cap


@register.filter
def state_label(state):
    return _state_label(state)


@register.simple_tag
def state_badge(st):
    """A coloured badge for a fleet.DeviceState, with its secondary flags."""
    flags = format_html_join(
        "", ' <span class="flag flag-{}">{}</span>', ((f, _state_label(f)) for f in sorted(st.flags) if f != st.state)
    )
    return format_html('<span class="badge s-{}">{}</span>{}', st.state, st.label, flags)


@register.filter
def claim_state_badge(state):
    return format_html('<span class="badge c-{}">{}</span>', state or "none", claim_state_title(state) or "—")


CLAIM_STATE_TITLES = {
    "pending": gettext_lazy("pending"),
    "allocated": gettext_lazy("allocated"),
    "reserved": gettext_lazy("reserved"),
    "deleting": gettext_lazy("deleting"),
    "stuck": gettext_lazy("stuck"),
    "deleted": gettext_lazy("deleted"),
}


@register.filter
def claim_state_title(state):
    """A claim's state in the page's language (the key stays in classes, filters and the API)."""
    return CLAIM_STATE_TITLES.get(state, state)


def _as_datetime(value):
    """A datetime from a datetime or an RFC 3339 string (raw objects, events); None if neither."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime.datetime):
        return None
    return value if timezone.is_aware(value) else timezone.make_aware(value, datetime.UTC)


@register.filter
def ago_text(value):
    """'12s ago', '5m ago', '3h ago', '2d ago' ('in 5m' ahead): plain text, for attributes; in the UI's language."""
    value = _as_datetime(value)
    if value is None:
        return "—"
    seconds = int((timezone.now() - value).total_seconds())
    ahead = seconds < -5  # a few seconds of clock skew still read "just now"
    seconds = abs(seconds)
    if seconds < 5 and not ahead:
        return _("just now")
    units = ((86400, _("%(n)sd")), (3600, _("%(n)sh")), (60, _("%(n)sm")), (1, _("%(n)ss")))
    for size, unit in units:
        if seconds >= size or size == 1:
            amount = unit % {"n": seconds // size}
            return _("in %(amount)s") % {"amount": amount} if ahead else _("%(amount)s ago") % {"amount": amount}


@register.filter
def utc(value):
    """The absolute time, always UTC: '2026-12-03 06:36:18 UTC'."""
    value = _as_datetime(value)
    return "—" if value is None else value.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def ago(value):
    """The one timestamp style of the UI: relative text, the absolute UTC time on hover, ISO 8601 in
    `datetime` (YAML shows the objects' own RFC 3339 strings)."""
    when = _as_datetime(value)
    if when is None:
        return "—"
    iso = when.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")
    return format_html('<time datetime="{}" title="{}">{}</time>', iso, utc(when), ago_text(when))


@register.simple_tag
def device_url(cluster_name, driver, pool, name):
    return reverse("inventory:device-detail", args=[cluster_name, driver, pool, name])


# What reverse() leaves unquoted in a path (django.urls.resolvers quotes with these safe characters).
_PATH_SAFE = "!$&'()*+,;=/~:@"
_MARKS = ("\x01", "\x02", "\x03")


def device_url_maker(cluster_name):
    """device_url for many devices of one cluster: reverse() once, then fill in each device's
    driver, pool and name quoted as reverse() quotes them. A preview page links hundreds of device
    cells, and reverse() per cell was a visible part of its server time."""
    pattern = reverse("inventory:device-detail", args=[cluster_name, *_MARKS])
    marks = [quote(m, safe=_PATH_SAFE) for m in _MARKS]
    before, rest = pattern.split(marks[0], 1)
    middle, rest = rest.split(marks[1], 1)
    between, after = rest.split(marks[2], 1)

    def make(driver, pool, name):
        if not driver or not pool or not name or "/" in driver or "/" in name:
            return device_url(
                cluster_name, driver, pool, name
            )  # what reverse() refuses or treats apart: its own answer
        return f"{before}{quote(driver, safe=_PATH_SAFE)}{middle}{quote(pool, safe=_PATH_SAFE)}{between}{quote(name, safe=_PATH_SAFE)}{after}"

    return make


@register.filter
def get_item(mapping, key):
    return mapping.get(key, 0) if hasattr(mapping, "get") else 0


@register.filter
def pct(part, whole):
    try:
        return round(100 * part / whole) if whole else 0
    except TypeError:
        return 0


SOURCE_CELL_CAP = 64  # cells per resource; a larger count is said in numbers after them


def _hami_state(d):
    if not d["slots_used"]:
        return "free"
    full = (
        d["slots_used"] >= d["slots"]
        or (d["memory"] and d["memory_used"] >= d["memory"])
        or (d["cores"] and d["cores_used"] >= d["cores"])
    )
    return "allocated" if full else "partial"


@register.simple_tag
def source_cells(sources):
    """Fleet-map cells for GPUs served outside DRA, one labelled group per source: a device plugin's
    resources (a cell per GPU, partition or replica; the requested ones allocated), HAMi's registered
    GPUs (a cell per physical GPU: free, partly shared, full). Never DRA device cells, never in DRA totals."""
    groups = []
    dp = (sources or {}).get("device_plugin")
    if dp:
        cells = []
        for item in dp.get("items", ()):
            alloc, used = item["allocatable"], min(item["requested"], item["allocatable"])
            extra = " part" if item["kind"] in ("partition", "share") else ""
            for i in range(min(alloc, SOURCE_CELL_CAP)):
                state = "allocated" if i < used else "free"
                title = " · ".join(x for x in (item["resource"], _state_label(state), dp.get("model") or "") if x)
                cells.append(f'<span class="cell s-{state}{extra}" title="{html.escape(title)}"></span>')
            if alloc > SOURCE_CELL_CAP or item["requested"] > alloc:
                # Translated outside the f-string: makemessages does not read inside one.
                more = _("%(resource)s: %(requested)s of %(allocatable)s requested") % {
                    "resource": item["resource"],
                    "requested": item["requested"],
                    "allocatable": alloc,
                }
                cells.append(f'<span class="srcmore">{html.escape(more)}</span>')
        groups.append(
            f'<span class="srccells" data-source="device-plugin"><span class="srclabel">{html.escape(_("device plugin"))}</span>{"".join(cells)}</span>'
        )
    hami = (sources or {}).get("hami")
    if hami:
        cells = []
        for d in hami.get("devices", ()):
            state = _hami_state(d)
            title = _(
                "%(gpu)s · %(model)s · %(used)s/%(slots)s vGPU slots · %(memory_used)s/%(memory)s MiB · %(cores_used)s/%(cores)s%% compute"
            ) % {
                "gpu": d["id"],
                "model": d["model"],
                "used": d["slots_used"],
                "slots": d["slots"],
                "memory_used": d["memory_used"],
                "memory": d["memory"],
                "cores_used": d["cores_used"],
                "cores": d["cores"],
            }
            flag = "" if d.get("health", True) else " f-unhealthy"
            cells.append(
                f'<span class="cell s-{state}{flag}" data-uuid="{html.escape(d["id"])}" title="{html.escape(title)}"></span>'
            )
        if hami.get("problems"):
            unreadable = _("%(count)s unreadable assignment(s)") % {"count": len(hami["problems"])}
            cells.append(f'<span class="srcmore warn">{html.escape(unreadable)}</span>')
        groups.append(
            f'<span class="srccells" data-source="hami"><span class="srclabel">{html.escape(_("HAMi"))}</span>{"".join(cells)}</span>'
        )
    return mark_safe("".join(groups))


@register.simple_tag
def map_cells(row, devices_url):
    """The device cells of one fleet-map row, built in Python: a page has thousands of cells and
    the equivalent template loops dominate the page's server time (the standard library's escape,
    too: Django's lazy-aware one cost a third of the map's rendering)."""
    parts = []
    prefix = f"{devices_url}{row['cluster_name']}/"
    for d in row["devices"]:
        st = d["st"]
        classes = " ".join([f"cell s-{st.state}"] + [f"f-{f}" for f in sorted(st.flags)])
        title = [d["name"], st.label]
        if d.get("is_partition"):  # narrow cells right after their GPU (fleet.under_parents)
            classes += " part"
            if d.get("parent_name"):
                title.append(_("partition of %(gpu)s") % {"gpu": d["parent_name"]})
        if "util" in d:  # the map coloured by utilization (monitoring.utilization.attach_latest)
            classes += f" u-{d['util_bucket']}"
            title.append(_("no utilization data") if d["util"] is None else f"GPU {d['util']:.0f}%")
        title += [f"+{_state_label(f)}" for f in sorted(st.flags) if f != st.state]
        if d.get("health"):  # a marker beside the state (mirror.views.mark_devices: health/pages.py)
            classes += f" h-{d['health']}"
            title.append(str(d["health_label"]))
        if d.get("model"):
            title.append(d["model"])
        for h in st.holders:
            title.append(
                (f"{h.namespace}/{h.name}" if h.visible else _("(claim in another namespace)"))
                + (" [admin]" if h.admin_access else "")
            )
        parts.append(
            f'<a class="{classes}" href="{html.escape(prefix + d["driver"] + "/" + d["pool"] + "/" + d["name"])}/" title="{html.escape(" · ".join(title))}"></a>'
        )
    return mark_safe("".join(parts))


def partition_summary(capacity):
    """A map row's partition-aware figures, as the _partition_capacity.html include shows them
    (compact: what can still be created per profile; stranded GPUs), with the same legend."""
    esc = html.escape
    legend = _(
        "Per MIG profile: how many more partitions of that profile one claim could get now, computed from "
        "the GPUs' shared counters as the scheduler counts them (a GPU's profiles are alternatives: do not "
        "add them up), out of how many with nothing in use. Stranded: whole GPUs that partitions in use leave "
        "partly free; only partition requests can use them."
    )
    parts = [
        f'<span class="prof" data-profile="{esc(p)}" data-free="{c["free"]}" data-total="{c["total"]}">'
        f"{esc(p)} <b>{c['free']}</b></span>"
        for p, c in capacity["profiles"].items()
    ]
    stranded = capacity["stranded"]
    if stranded:
        text = ngettext("%(shown)s GPU stranded", "%(shown)s GPUs stranded", stranded) % {"shown": stranded}
        parts.append(f'<span class="stranded">{esc(text)}</span>')
    return f'<span class="partcap" data-stranded="{stranded}" title="{esc(legend)}">{" · ".join(parts)}</span>'


# A page of the map stays small however large a silent pool was.
_MAX_GREY_CELLS = 256


def unpublished_cells(count, since_text):
    """Grey, dashed cells for the devices a node's driver last published and publishes no more."""
    count = min(int(count or 0), _MAX_GREY_CELLS)
    if not count:
        return ""
    title = ngettext(
        "%(n)d device last published, not published since %(since)s",
        "%(n)d devices last published, not published since %(since)s",
        count,
    ) % {"n": count, "since": since_text}
    cell = format_html('<i class="cell unpublished" title="{}"></i>', title)
    return mark_safe(cell * count)


@register.simple_tag
def map_row(row, devices_url, one_cluster):
    """One fleet-map row (node link, cells, row summary), built in Python like map_cells: the same
    markup as template tags cost about a third of the map's server time (200 rows per page, each
    with a URL, four translated phrases and a dozen attribute look-ups). `one_cluster`: the page
    shows one cluster, so node names go without their cluster's."""
    cluster, node, devices = row["cluster_name"], row["node"], row["devices"]
    gpus, gpus_free, unpublished, sources = row["gpus"], row["gpus_free"], row["unpublished"], row.get("sources") or {}
    classes = "maprow" + (" row-unhealthy" if row["unhealthy"] else "") + (" row-unpublished" if unpublished else "")
    href = (
        reverse("inventory:pool-list")
        if node[:5] == "pool:"
        else reverse("inventory:node-detail", args=[cluster, node])
    )
    esc_cluster, esc_node = html.escape(cluster), html.escape(node)
    label = esc_node if one_cluster else f'<span class="muted">{esc_cluster}/</span>{esc_node}'
    cells = [map_cells(row, devices_url)]
    if unpublished:
        since = row["unpublished_since"]
        cells.append(unpublished_cells(unpublished, utc(since) if since else ""))
    if sources:
        cells.append(source_cells(sources))
    esc = html.escape
    if gpus:
        summary = (
            esc(ngettext("%(counter)s GPU", "%(counter)s GPUs", gpus) % {"counter": gpus})
            + " "
            + esc(_("· %(free)s free") % {"free": gpus_free})
        )
        if len(devices) != gpus:
            counted = esc(
                _("published devices, partitions and other devices included")
            )  # outside the f-string: makemessages reads it
            in_all = esc(
                ngettext("%(counter)s device in all", "%(counter)s devices in all", len(devices))
                % {"counter": len(devices)}
            )
            summary += f' <span class="rowdevices" title="{counted}">· {in_all}</span>'
    else:
        summary = esc(ngettext("%(counter)s device", "%(counter)s devices", len(devices)) % {"counter": len(devices)})
        free = row["states"].get("free")
        if free:
            summary += " " + esc(_("· %(free)s free") % {"free": free})
    if row["unhealthy"]:  # said in words, not only by the greyed, struck-through name
        summary = f'<span class="rownotready">{esc(_("node NotReady"))}</span> · ' + summary
    if row.get("partitions"):
        summary += " · " + partition_summary(row["partitions"])
    dp, hami = sources.get("device_plugin"), sources.get("hami")
    if dp:
        summary += " · " + esc(_("device plugin %(gpus)s (%(free)s free)") % {"gpus": dp["gpus"], "free": dp["free"]})
    if hami:
        summary += " · " + esc(
            _("HAMi %(used)s/%(shares)s shares") % {"used": hami["shares_used"], "shares": hami["shares"]}
        )
    if unpublished:
        summary += (
            ' <span class="unpub">'
            + _("driver not publishing since %(since)s") % {"since": ago(row["unpublished_since"])}
            + "</span>"
        )
    return mark_safe(
        f'<div class="{classes}" id="maprow-{esc_cluster}-{esc_node}" data-cluster="{esc_cluster}" data-node="{esc_node}" data-gpus="{gpus}" '
        f'data-gpus-free="{gpus_free}" data-devices="{len(devices)}">\n<a class="mapnode" href="{html.escape(href)}" title="{esc_cluster}/{esc_node}">{label}</a>\n'
        f'<span class="cells">{"".join(cells)}</span>\n<span class="rowsum muted">{summary}</span>\n</div>'
    )


@register.simple_tag
def ui_texts():
    """The words the page's scripts show (live badge, held updates, busy and copy buttons), in the
    page's language, as a JSON block the scripts read (no inline script: the CSP forbids it).
    Placeholders are {n}, {s}, {error}: filled in by the scripts (live.js's announcements
    come from #live-announce's data- attributes)."""
    from django.utils.html import json_script
    from django.utils.translation import ngettext, pgettext

    texts = {
        "live": pgettext("live updates badge", "live"),  # not a lease's "live" (the sync page)
        "connecting": _("connecting"),
        "reconnecting": _("reconnecting"),
        "reconnectingIn": _("reconnecting in {s}s"),
        "refreshFailed": _("refresh failed: {error}"),
        "refreshFailedRetrying": _("refresh failed: {error}; retrying"),
        # Both plural forms, so the script picks one by the count (one form only in Chinese).
        "heldOne": ngettext("{n} update — show", "{n} updates — show", 1),
        "heldMany": ngettext("{n} update — show", "{n} updates — show", 2),
        "working": _("Working…"),
        "copied": _("Copied"),
        "copyFailed": _("Select and copy"),
    }
    return json_script(texts, "gpudash-texts")
