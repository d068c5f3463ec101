"""Serializer bases: the fields every mirrored object has, and the optional `raw` Kubernetes JSON."""

from rest_framework import serializers


class RawOptionalMixin:
    """Drops `raw` unless the view was asked for it (`?raw=1`); the views also defer the column then."""

    def get_fields(self):
        fields = super().get_fields()
        # Dropped before serialising, not after: reading a deferred column costs a query per row.
        if not self.context.get("include_raw"):
            fields.pop("raw", None)
        return fields


class KubeObjectSerializer(RawOptionalMixin, serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True, help_text="Cluster name.")
    cluster_id = serializers.IntegerField(read_only=True)
    uid = serializers.CharField(read_only=True)
    name = serializers.CharField(read_only=True)
    resource_version = serializers.CharField(read_only=True)
    creation_timestamp = serializers.DateTimeField(read_only=True, allow_null=True)
    deletion_timestamp = serializers.DateTimeField(read_only=True, allow_null=True)
    labels = serializers.DictField(child=serializers.CharField(), read_only=True)
    synced_at = serializers.DateTimeField(read_only=True)
    # Not read-only on purpose: the schema must not list it as always present (only with ?raw=1).
    raw = serializers.JSONField(
        required=False, help_text="The object exactly as the API server sent it (only with ?raw=1)."
    )


class NamespacedSerializer(KubeObjectSerializer):
    namespace = serializers.CharField(read_only=True)


class JSONBooleanField(serializers.BooleanField):
    """Only a JSON `true` or `false`: DRF's BooleanField also takes "no", "off", "0", which read as a
    real send when a caller meant the opposite. Forms are not involved (the pages post their own views)."""

    default_error_messages = {"invalid": "Must be a JSON boolean (true or false), not {input!r}."}

    def to_internal_value(self, data):
        if data is True or data is False:
            return data
        self.fail("invalid", input=data)


# Columns the apps above add to a list of a lower floor (health adds `health` to the devices), as
# queryset annotations: {list name: {field: function returning a fresh expression}}. The list's view
# applies them (annotations("devices")); the serializer declares the field with a default.
LIST_ANNOTATIONS = {}


def register_annotations(list_name, **expressions):
    LIST_ANNOTATIONS.setdefault(list_name, {}).update(expressions)


def annotations(list_name):
    return {name: make() for name, make in LIST_ANNOTATIONS.get(list_name, {}).items()}
