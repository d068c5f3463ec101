"""Trigram indexes for the search box's "name contains" lookups (PostgreSQL only, pg_trgm).

Django writes `name__icontains=x` as `UPPER(name::text) LIKE UPPER('%x%')`, which no b-tree can
serve: the search box scanned every device row, claim and pod for every query. A GIN index over the trigrams of the same expression answers it instead.
pg_trgm is a contrib extension marked trusted (PostgreSQL 13+), so a database owner may create it;
where that is refused the migration says so and leaves the lookups unindexed (slower, still correct).
SQLite keeps scanning: its tables are small.
"""

import logging

from django.db import DatabaseError, transaction

log = logging.getLogger(__name__)


def _name(table, column):
    return f"{table}_{column}_trgm"


def trigram_operations(columns):
    """(create, drop) for RunPython: `columns` is [(table, column)], each indexed as `UPPER(col::text)`."""

    def create(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return
        try:
            with transaction.atomic(using=connection.alias):  # a savepoint: a refusal must not abort the migration
                schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except DatabaseError as exc:
            log.warning("pg_trgm is not available (%s): the search box's name lookups stay unindexed", exc)
            print(
                f"\n  pg_trgm could not be created ({exc}); search lookups by name stay unindexed (slower, still correct)"
            )
            return
        for table, column in columns:
            schema_editor.execute(
                f'CREATE INDEX IF NOT EXISTS "{_name(table, column)}" ON "{table}" USING gin ((UPPER("{column}"::text)) gin_trgm_ops)'
            )

    def drop(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        for table, column in columns:
            schema_editor.execute(f'DROP INDEX IF EXISTS "{_name(table, column)}"')

    return create, drop
