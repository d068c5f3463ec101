"""Looking claims up by the keys the pages hold: (cluster id, namespace, name)."""

from collections import defaultdict

from django.db.models import Q


def claim_keys_q(keys, prefix=""):
    """Q for the claims with these (cluster_id, namespace, name) keys: one term per (cluster,
    namespace), each on the (cluster, namespace, name) unique index. Filtering by the names alone
    (as pages did) matches claims of the same name in other namespaces and, with no index on the
    name, reads every claim for every page. `prefix`: the path to the claim
    from the queried model ("claim__")."""
    by_ns = defaultdict(set)
    for cluster_id, namespace, name in keys:
        by_ns[(cluster_id, namespace)].add(name)
    q = Q(pk__in=[]) if not prefix else Q(**{f"{prefix}pk__in": []})
    for (cluster_id, namespace), names in sorted(by_ns.items()):
        q |= Q(
            **{f"{prefix}cluster_id": cluster_id, f"{prefix}namespace": namespace, f"{prefix}name__in": sorted(names)}
        )
    return q
