"""The search box's name lookups of claims and pods, indexed (mirror/search_indexes.py)."""

from django.db import migrations

from mirror.search_indexes import trigram_operations

create, drop = trigram_operations(
    [("claims_resourceclaim", "name"), ("claims_resourceclaim", "owner_pod_name"), ("claims_pod", "name")]
)


class Migration(migrations.Migration):
    dependencies = [
        ("claims", "0012_text_indexes_without_pattern_ops"),
        ("inventory", "0021_search_trigram_indexes"),  # creates the extension first
    ]

    operations = [migrations.RunPython(create, drop)]
