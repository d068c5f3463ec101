"""API discovery: which of our kinds a cluster serves, and at which version.

Checked before any watch starts so that a cluster without resource.k8s.io shows "not served"
instead of a watcher retrying 404s forever; re-run periodically to pick up kinds that appear later.
"""

import logging

from django.utils import timezone

from mirror.models import Cluster, SyncState

from .kinds import KINDS

log = logging.getLogger(__name__)


def served_versions(client):
    """{"group/version": {plural, ...}} for the groups gpudash mirrors, read from the discovery endpoints."""
    wanted_groups = {k.group for k in KINDS}
    served = {}
    if "" in wanted_groups:
        core = client.get_json("/api/v1")
        served["v1"] = _plurals(core)
    groups = client.get_json("/apis")
    for group in groups.get("groups") or []:
        if not isinstance(group, dict) or group.get("name") not in wanted_groups:
            continue
        for version in group.get("versions") or []:
            gv = (version or {}).get("groupVersion")
            if gv:
                served[gv] = _plurals(client.get_json(f"/apis/{gv}"))
    return served


def _plurals(resource_list):
    # Sub-resources ("resourceclaims/status") are not collections.
    return {
        r.get("name")
        for r in resource_list.get("resources") or []
        if isinstance(r, dict) and "/" not in (r.get("name") or "")
    }


def choose_version(kind, served):
    """The version to watch `kind` at, or None when the cluster does not serve it."""
    for version in (kind.version, *kind.alt_versions):
        gv = f"{kind.group}/{version}" if kind.group else version
        if kind.plural in served.get(gv, ()):
            return version
    return None


def discover(cluster, client):
    """Ask the API server what it serves; record it on the Cluster and SyncState rows.

    Returns {kind name: version or None}. Raises KubeError when the server cannot be asked.
    """
    version_info = client.get_json("/version")
    served = served_versions(client)
    chosen = {kind.kind: choose_version(kind, served) for kind in KINDS}
    Cluster.objects.filter(pk=cluster.pk).update(
        server_version=str(version_info.get("gitVersion") or "")[:64],
        served_resource_versions=sorted(gv for gv in served if gv != "v1"),
        discovered_at=timezone.now(),
    )
    for kind_name, version in chosen.items():
        state, _ = SyncState.objects.get_or_create(cluster=cluster, kind=kind_name)
        if version is None:
            SyncState.objects.filter(pk=state.pk).update(status=SyncState.Status.NOT_SERVED, api_version="")
        elif state.status == SyncState.Status.NOT_SERVED:
            SyncState.objects.filter(pk=state.pk, status=SyncState.Status.NOT_SERVED).update(
                status=SyncState.Status.IDLE
            )
    log.info("cluster %s serves %s", cluster.name, {k: v for k, v in chosen.items() if v})
    return chosen
