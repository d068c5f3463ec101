"""Ledger rows for the usage-report tests, written directly (the ledger's own tests drive the sync)."""

from datetime import UTC, datetime

from usage.models import AllocationInterval

_seq = iter(range(1, 10**9))


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def interval(
    cluster,
    namespace,
    start,
    end=None,
    *,
    units=1.0,
    rule="whole",
    model="NVIDIA A100-SXM4-80GB",
    team="",
    node="node-a",
    device=None,
    admin=False,
    workload=("Job", "train"),
):
    n = next(_seq)
    return AllocationInterval.objects.create(
        cluster=cluster,
        claim_uid=f"uid-{n}",
        namespace=namespace,
        claim_name=f"claim-{n}",
        request="gpu",
        driver="gpu.nvidia.com",
        pool=node,
        device=device or f"gpu-{n}",
        node=node,
        model=model,
        units=0.0 if admin else units,
        unit_rule="admin" if admin else rule,
        admin_access=admin,
        pod_namespace=namespace,
        pod_name=f"pod-{n}",
        workload_kind=workload[0],
        workload_name=workload[1],
        labels={"team": team} if team else {},
        started_at=start,
        ended_at=end,
    )
