"""A cluster for the what-if tests, written through the sync's apply path (preview_fixtures' fleet,
every H100 taken), plus pending pods:

  busy-00..02   2 H100 each, both held by a team-b claim (holder-NN, no pod)
  small-00      1 free L4;  bare-00: no slice
  team-a/job-two    Pending pod of claim team-a/wants-two (2 GPUs): fits nowhere now
  team-b/job-nine   Pending pod of claim team-b/wants-nine (9 GPUs): fits nowhere, ever
  team-b/job-one    Pending pod of claim team-b/wants-one (1 GPU): fits on small-00
  team-a/solo       a pending claim (1 GPU) no pod uses yet: fits on small-00
"""

from mirror.models import Cluster
from mirror.sync.apply import apply_object

from .preview_fixtures import fleet_objects
from .ui_fixtures import claim, meta


def pending_pod(namespace, name, claim_name):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta(name, namespace),
        "spec": {
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def load_whatif_cluster(name="plan"):
    cluster = Cluster.objects.create(name=name)
    for kind, raw in fleet_objects(fit=0, busy=3, small=1, bare=1):
        apply_object(cluster, kind, raw)
    apply_object(cluster, "ResourceClaim", claim("team-b", "wants-one", count=1))
    apply_object(cluster, "ResourceClaim", claim("team-a", "solo", count=1))
    for ns, pod, claim_name in (
        ("team-a", "job-two", "wants-two"),
        ("team-b", "job-nine", "wants-nine"),
        ("team-b", "job-one", "wants-one"),
    ):
        apply_object(cluster, "Pod", pending_pod(ns, pod, claim_name))
    return cluster


def verdicts(result):
    """{namespace/name: verdict} of a what-if answer."""
    return {f"{e['namespace']}/{e['name']}": e["verdict"] for e in result["workloads"]}
