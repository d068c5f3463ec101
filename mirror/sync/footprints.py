"""Per-pod footprints (claims.PodFootprint) kept by the pod watcher's apply path, for EVERY pod it sees.

The mirror stores full rows only for DRA pods and driver pods; the preview's node filters need what all
the other pods take from their nodes too (NodeResourcesFit, NodePorts). A footprint is a few hundred
bytes: the summed requests and host ports, computed by the engine's own formula.

Same rules as the mirror: never back in time (resourceVersion), deletes of an older incarnation are
ignored, a relist removes what it no longer lists. Every write is logged in the change log under kind
"PodFootprint" so the live preview inventory follows it.
"""

import logging

from django.apps import apps

from dra.errors import InputError
from dra.nodefilters import FOOTPRINT_FIELDS, pod_footprint

from . import changelog

log = logging.getLogger(__name__)

KIND = "PodFootprint"
_CHUNK = 500


def footprint_document(raw):
    """The engine's footprint of `raw`; a pod whose resources cannot be read keeps an empty one that says why."""
    try:
        return pod_footprint(raw)
    except InputError as exc:
        meta = raw.get("metadata") or {}
        log.warning("pod %s/%s: requests not counted: %s", meta.get("namespace"), meta.get("name"), exc)
        doc = pod_footprint({"metadata": meta, "status": raw.get("status") or {}})
        doc["node"] = (raw.get("spec") or {}).get("nodeName") or ""
        doc["problem"] = str(exc)[:500]
        return doc


def apply(cluster, ops):
    """Write the footprints of a batch of pod events [(event, key, fields, raw)] (apply.apply_batch's
    validated ops, in order). Returns the keys stored now (a relist's reconcile keeps them)."""
    PodFootprint = apps.get_model("claims.PodFootprint")  # by label, as kinds.py names the mirrored models

    final = {}
    for event, key, fields, raw in ops:
        final[key] = (event == "DELETED", fields["resource_version_num"], fields.get("uid") or "", raw)
    stored = {}
    keys = list(final)
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        rows = PodFootprint.objects.filter(
            cluster=cluster, namespace__in={k[0] for k in chunk}, name__in={k[1] for k in chunk}
        )
        for row in rows.values("id", "namespace", "name", "uid", "resource_version_num", "raw"):
            stored[(row["namespace"], row["name"])] = row
    to_delete, to_write, kept, changed = [], [], set(), []
    for key, (deleted, rv, uid, raw) in final.items():
        cur = stored.get(key)
        # A footprint written by an older gpudash (without a field this one keeps, e.g. the priority)
        # is derived again from the same version of the pod, which the next relist brings.
        outdated = (
            cur is not None
            and not deleted
            and rv == cur["resource_version_num"]
            and not FOOTPRINT_FIELDS <= set(cur["raw"] or ())
        )
        if (
            cur is not None
            and cur["resource_version_num"]
            and rv
            and not outdated
            and (rv < cur["resource_version_num"] if deleted else rv <= cur["resource_version_num"])
        ):
            kept.add(key)
            continue  # a replay from before what is stored
        if deleted:
            if cur is not None and not (uid and cur["uid"] and uid != cur["uid"]):
                to_delete.append(cur["id"])
                changed.append(key)
            continue
        doc = footprint_document(raw)
        to_write.append(
            PodFootprint(
                cluster=cluster,
                namespace=key[0],
                name=key[1],
                uid=uid,
                node_name=doc["node"][:253],
                phase=(doc["phase"] or "")[:16],
                resource_version_num=rv,
                raw=doc,
            )
        )
        kept.add(key)
        if cur is None or cur["raw"] != doc:
            changed.append(key)  # a status-only update leaves the footprint as it was: nothing for the preview
    for start in range(0, len(to_delete), _CHUNK):
        PodFootprint.objects.filter(pk__in=to_delete[start : start + _CHUNK]).delete()
    if to_write:
        PodFootprint.objects.bulk_create(
            to_write,
            batch_size=_CHUNK,
            update_conflicts=True,
            unique_fields=["cluster", "namespace", "name"],
            update_fields=["uid", "node_name", "phase", "resource_version_num", "raw", "synced_at"],
        )
    changelog.record(cluster.pk, KIND, changed)  # last write of this part (changelog.py)
    return kept


def reconcile(cluster, listed_keys, list_rv_num):
    """After a full pod relist: remove footprints of pods the list did not contain (unless written after it)."""
    PodFootprint = apps.get_model("claims.PodFootprint")

    gone = [
        (row_id, ns, name)
        for row_id, ns, name, rv in PodFootprint.objects.filter(cluster=cluster)
        .values_list("id", "namespace", "name", "resource_version_num")
        .iterator(chunk_size=2000)
        if (ns, name) not in listed_keys and (not list_rv_num or rv <= list_rv_num)
    ]
    ids = [row_id for row_id, _, _ in gone]
    for start in range(0, len(ids), _CHUNK):
        PodFootprint.objects.filter(pk__in=ids[start : start + _CHUNK]).delete()
    changelog.record(cluster.pk, KIND, [(ns, name) for _, ns, name in gone])
    return len(ids)
