"""No planner statistics for the mirrored claims' and pods' whole `raw` documents (PostgreSQL only);
why: inventory/migrations/0018_no_statistics_for_documents.py."""

from django.db import migrations

TABLES = ("claims_resourceclaim", "claims_resourceclaimtemplate", "claims_pod")


def _set(schema_editor, target):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} ALTER COLUMN raw SET STATISTICS {target}")


def forwards(apps, schema_editor):
    _set(schema_editor, 0)


def backwards(apps, schema_editor):
    _set(schema_editor, -1)


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0008_auditentry_reason_message"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
