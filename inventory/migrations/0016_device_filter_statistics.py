"""Planner statistics for the device filter's common clauses (PostgreSQL only).

The planner has no statistics for JSON expressions, so `attribute_values -> 'productName' = ...` and
`capacity_values -> 'memory' >= ...` get default selectivities. Combined with a state filter it then
expected a few hundred matches where there were tens of thousands, and chose a full scan plus sort
over walking the list order's index to the first page. Expression statistics (PostgreSQL
14+) give it the real distribution; ANALYZE and autovacuum keep them current.
"""

from django.db import migrations

STATISTICS = """
CREATE STATISTICS IF NOT EXISTS inventory_device_filter_stats
    ON (attribute_values -> 'productName'), (capacity_values -> 'memory'), allocation_state
    FROM inventory_device;
ANALYZE inventory_device;
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql" and schema_editor.connection.pg_version >= 140000:
        schema_editor.execute(STATISTICS)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP STATISTICS IF EXISTS inventory_device_filter_stats")


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0015_nodeaccelerator_hami_detail"),
    ]

    operations = [migrations.RunPython(create, drop)]
