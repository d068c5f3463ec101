"""Idle GPUs: allocated devices whose utilization stayed under a threshold for a period.

A rule of the stuck-claim detector (claims/stuck.py runs it with the others, so its findings open
and clear the same way), but report-only: no release action is offered, and the device is not
shown as stuck. Read from the stored per-minute samples, which keep each minute's holder: a device
is idle for a claim when every sample in the period, all held by that claim, is under the threshold,
the samples go back the whole period, and the newest is from the cluster's last poll.
"""

from datetime import timedelta

from django.db.models import Count, Max, Min
from django.utils.translation import gettext_noop

from claims.stuck import IDLE_GPU, Candidate, claim_ref
from mirror.messages import message

from .conf import setting
from .models import PrometheusSource, UtilizationSample


def idle_devices(cluster, now):
    """[(driver, pool, device, namespace, claim name, max util %, since, samples)] idle right now."""
    source = PrometheusSource.objects.filter(cluster=cluster, enabled=True).exclude(last_minute=None).first()
    if source is None:
        return []
    threshold = float(setting("IDLE_THRESHOLD_PERCENT", 5))
    period = timedelta(seconds=float(setting("IDLE_PERIOD_SECONDS", 1800)))
    # Samples are per minute: one that starts within a minute of the period's start covers it.
    window_start = now - period
    covered_by = window_start + timedelta(minutes=1)
    groups = (
        UtilizationSample.objects.filter(
            cluster=cluster, minute__gte=window_start - timedelta(minutes=1), minute__lte=now, allocated=True
        )
        .exclude(gpu_util=None)
        .values("driver", "pool", "device", "held_by_namespace", "held_by_name")
        .annotate(top=Max("gpu_util"), first=Min("minute"), last=Max("minute"), n=Count("id"))
        .filter(top__lt=threshold, first__lte=covered_by, last=source.last_minute)
        .order_by()
    )
    return [
        (g["driver"], g["pool"], g["device"], g["held_by_namespace"], g["held_by_name"], g["top"], g["first"], g["n"])
        for g in groups
    ]


def idle_candidates(mirror, cfg, now):
    """Candidates (claims/stuck.py) for the detector: one per idle device, on the claim holding it."""
    from claims.models import Finding

    claims = {(c.namespace, c.name): c for c in mirror.claims}
    threshold = float(setting("IDLE_THRESHOLD_PERCENT", 5))
    for driver, pool, device, namespace, name, top, since, n in idle_devices(mirror.cluster, now):
        claim = claims.get((namespace, name))
        # Still held by that claim now (the sample's holder is the one of its minute).
        if claim is None or not any(
            (r.driver, r.pool, r.device) == (driver, pool, device) for r in mirror.results.get(claim.id, [])
        ):
            continue
        pods = sorted(f"{p.namespace}/{p.name}" for p in mirror.referencing_pods.get((namespace, name), []))
        minutes = max(int((now - since).total_seconds() // 60), 1)
        params = {
            "device": device,
            "pool": pool,
            "threshold": f"{threshold:g}",
            "minutes": minutes,
            "top": f"{top:g}",
            "claim": f"{namespace}/{name}",
        }
        summary = (
            message(
                gettext_noop(
                    "%(device)s on %(pool)s has been under %(threshold)s%% utilization for at least %(minutes)s min (at most "
                    "%(top)s%%) while held by %(claim)s for pod %(pods)s."
                ),
                pods=", ".join(pods),
                **params,
            )
            if pods
            else message(
                gettext_noop(
                    "%(device)s on %(pool)s has been under %(threshold)s%% utilization for at least %(minutes)s min (at most "
                    "%(top)s%%) while held by %(claim)s."
                ),
                **params,
            )
        )
        yield Candidate(
            IDLE_GPU,
            claim,
            subject=f"{driver}/{pool}/{device}",
            summary=summary,
            severity=Finding.Severity.INFO,
            evidence={
                "claim": claim_ref(claim),
                "device": f"{driver}/{pool}/{device}",
                "pods": pods,
                "max_utilization_percent": top,
                "threshold_percent": threshold,
                "samples": n,
                "idle_since": since.isoformat(),
            },
            since=since,
            grace=0,
        )


def idle_gpu_hours_by_namespace(cluster_ids=None, hours=24, now=None):
    """[(namespace, idle GPU-hours)] over the last `hours`, most first: the idle held devices each
    poll counted per namespace into the fleet history (NamespaceSample.idle), one sample per poll."""
    from django.db.models import Sum
    from django.utils import timezone

    from .models import NamespaceSample

    now = now or timezone.now()
    rows = NamespaceSample.objects.filter(minute__gt=now - timedelta(hours=hours), minute__lte=now, idle__gt=0)
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=cluster_ids)
    sums = rows.order_by().values_list("namespace").annotate(n=Sum("idle")).order_by("-n", "namespace")
    minutes_per_sample = max(float(setting("POLL_SECONDS", 60)) / 60, 1.0)  # at most one poll a minute is kept
    return [(ns, round(n * minutes_per_sample / 60, 2)) for ns, n in sums]
