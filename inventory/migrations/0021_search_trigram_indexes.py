"""The search box's name lookups, indexed (mirror/search_indexes.py), and a device's GPU UUID (the
search box finds a device by the `uuid` attribute nvidia-smi and the logs show)."""

from django.db import migrations

from mirror.search_indexes import trigram_operations

create, drop = trigram_operations(
    [("inventory_node", "name"), ("inventory_resourceslice", "name"), ("inventory_device", "name")]
)


def create_uuid(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS inventory_device_uuid_idx ON inventory_device ((attribute_values -> 'uuid'))"
        )


def drop_uuid(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS inventory_device_uuid_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0020_text_indexes_without_pattern_ops"),
    ]

    operations = [migrations.RunPython(create, drop), migrations.RunPython(create_uuid, drop_uuid)]
