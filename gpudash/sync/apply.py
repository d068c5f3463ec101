"""Applying one object from the API server to the mirror: idempotent, never going back in time."""

from django.db import transaction

from gpudash.models import resource_version_number

from .kinds import KINDS_BY_NAME


def _key(raw):
    meta = raw.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def apply_object(cluster, kind, raw):
    """Insert or update one object. Returns the row, or None when the stored copy is newer.

    An older resourceVersion never overwrites a newer one, so replays and duplicates change nothing.
    A different uid under the same name is a re-created object and replaces the old row.
    """
    model = KINDS_BY_NAME[kind].model
    namespace, name = _key(raw)
    if not name:
        raise ValueError(f"{kind} without metadata.name")
    fields = model.fields_from_raw(raw)
    with transaction.atomic():
        row = model.objects.select_for_update().filter(cluster=cluster, namespace=namespace, name=name).first()
        if row is not None:
            same_object = row.uid == fields["uid"]
            if same_object and row.resource_version_num >= fields["resource_version_num"] and row.resource_version_num:
                return None
            for attr, value in fields.items():
                setattr(row, attr, value)
            row.save()
        else:
            row = model.objects.create(cluster=cluster, **fields)
        row.sync_children()
    return row


def delete_object(cluster, kind, raw):
    """Remove one object (a DELETED event). Returns True when a row was removed."""
    model = KINDS_BY_NAME[kind].model
    namespace, name = _key(raw)
    uid = (raw.get("metadata") or {}).get("uid")
    qs = model.objects.filter(cluster=cluster, namespace=namespace, name=name)
    if uid:
        qs = qs.filter(uid=uid)
    deleted, _ = qs.delete()
    return bool(deleted)


__all__ = ("apply_object", "delete_object", "resource_version_number")
