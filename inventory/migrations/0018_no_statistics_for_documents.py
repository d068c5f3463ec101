"""No planner statistics for whole JSON documents of the mirror (PostgreSQL only).

ANALYZE builds most-common-value lists and histograms of every column of its sample; for `raw` and a
device's `attributes`/`capacity` that means detoasting and comparing whole documents, which no query
filters on as such (the filters read keys of `attribute_values`/`capacity_values`, whose expression
statistics migration 0016 keeps). On a table of 112,000 devices ANALYZE took 2.7 s, 1.7 s without
them, and the sync takes statistics at the end of each large LIST.
"""

from django.db import migrations

COLUMNS = {
    "inventory_device": ("raw", "attributes", "capacity"),
    "inventory_resourceslice": ("raw",),
    "inventory_node": ("raw",),
    "inventory_deviceclass": ("raw",),
}


def _set(schema_editor, target):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, columns in COLUMNS.items():
        clauses = ", ".join(f"ALTER COLUMN {schema_editor.quote_name(c)} SET STATISTICS {target}" for c in columns)
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} {clauses}")


def forwards(apps, schema_editor):
    _set(schema_editor, 0)


def backwards(apps, schema_editor):
    _set(schema_editor, -1)  # the default target again


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0017_node_not_ready_index"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
