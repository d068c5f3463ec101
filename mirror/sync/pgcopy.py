"""Fast bulk writes on PostgreSQL with COPY (the sync's initial lists and busy watch streams).

Django's bulk_create/bulk_update on psycopg 3 quote every parameter client-side (regex escaping of
each JSON document) and bulk_update builds CASE expressions that grow with the batch: for tens of
thousands of raw objects that is most of the sync's time. COPY sends rows as data instead.
Other databases (SQLite, the embedded default) use the ORM paths, which are fast enough there.
"""

from django.db import connection
from django.utils import timezone
from psycopg.types.json import Jsonb

from . import fastjson

_sequence_cache = {}


def available():
    return connection.vendor == "postgresql"


def _converters(fields):
    """Per column: how to turn the attribute into what COPY writes (the ORM's per-value path is slow)."""
    from django.db.models import JSONField

    converters = []
    for f in fields:
        if isinstance(f, JSONField) and f.encoder is None:
            converters.append(Jsonb)
        elif getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            converters.append("now")
        elif f.get_internal_type() in _PLAIN_TYPES:
            converters.append(None)
        else:
            converters.append(f)
    return converters


_PLAIN_TYPES = {
    "CharField",
    "SlugField",
    "TextField",
    "IntegerField",
    "BigIntegerField",
    "BooleanField",
    "BigAutoField",
    "AutoField",
    "ForeignKey",
    "PositiveIntegerField",
    "SmallIntegerField",
    "DateTimeField",
}


def _db_values(model, obj, fields, add, converters=None):
    converters = converters or _converters(fields)
    values = []
    now = None
    for f, convert in zip(fields, converters):
        value = getattr(obj, f.attname)
        if convert is None:
            values.append(value)
        elif convert is Jsonb:
            values.append(None if value is None and f.null else Jsonb(value, dumps=fastjson.dumps))
        elif convert == "now":
            now = now or timezone.now()
            setattr(obj, f.attname, now)
            values.append(now)
        else:
            values.append(f.get_db_prep_save(value, connection))
    return values


def _sequence(model):
    table = model._meta.db_table
    if table not in _sequence_cache:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [table, model._meta.pk.column])
            _sequence_cache[table] = cursor.fetchone()[0]
    return _sequence_cache[table]


def _copy(cursor, table, columns, rows):
    column_sql = ", ".join(connection.ops.quote_name(c) for c in columns)
    with cursor.copy(f"COPY {connection.ops.quote_name(table)} ({column_sql}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def insert(model, objs):
    """INSERT objs (ids taken from the table's sequence and set on the objects) with one COPY."""
    if not objs:
        return
    connection.ensure_connection()
    pk = model._meta.pk
    with connection.cursor() as cursor:
        if any(o.pk is None for o in objs):
            cursor.execute(
                "SELECT nextval(%s) FROM generate_series(1, %s)",
                [_sequence(model), sum(1 for o in objs if o.pk is None)],
            )
            ids = iter(r[0] for r in cursor.fetchall())
            for obj in objs:
                if obj.pk is None:
                    obj.pk = next(ids)
        fields = list(model._meta.concrete_fields)
        converters = _converters(fields)
        raw_cursor = cursor.cursor
        _copy(
            raw_cursor,
            model._meta.db_table,
            [f.column for f in fields],
            (_db_values(model, o, fields, True, converters) for o in objs),
        )
    for obj in objs:
        obj._state.adding = False
        obj._state.db = connection.alias
    return pk


def update(model, objs, field_names):
    """UPDATE the given columns of objs (matched by id) from a COPY-filled temporary table."""
    if not objs:
        return
    connection.ensure_connection()
    fields = [model._meta.pk] + [model._meta.get_field(n) for n in field_names]
    converters = _converters(fields)
    table = model._meta.db_table
    temp = f"gpudash_upd_{table}"[:63]
    qn = connection.ops.quote_name
    columns = ", ".join(qn(f.column) for f in fields)
    with connection.cursor() as cursor:
        # Only the updated columns, no constraints: the other NOT NULL columns stay out of it.
        cursor.execute(f"DROP TABLE IF EXISTS {qn(temp)}")
        cursor.execute(f"CREATE TEMP TABLE {qn(temp)} ON COMMIT DROP AS SELECT {columns} FROM {qn(table)} WITH NO DATA")
        _copy(
            cursor.cursor,
            temp,
            [f.column for f in fields],
            (_db_values(model, o, fields, False, converters) for o in objs),
        )
        assignments = ", ".join(f"{qn(f.column)} = t.{qn(f.column)}" for f in fields[1:])
        pk = qn(model._meta.pk.column)
        cursor.execute(f"UPDATE {qn(table)} AS m SET {assignments} FROM {qn(temp)} AS t WHERE m.{pk} = t.{pk}")


def insert_values(model, rows):
    """INSERT plain {field name or attname: value} dicts, all with the same keys, with one COPY; ids come
    from the column's default. For writers that need no model instances back (the allocation ledger:
    building a model instance costs more than writing its row)."""
    if not rows:
        return
    names = list(rows[0])
    fields = [model._meta.get_field(n) for n in names]
    converters = _converters(fields)

    def values(row):
        out = []
        for name, f, convert in zip(names, fields, converters):
            value = row[name]
            if convert is None:
                out.append(value)
            elif convert is Jsonb:
                out.append(None if value is None and f.null else Jsonb(value, dumps=fastjson.dumps))
            elif convert == "now":
                out.append(timezone.now())
            else:
                out.append(f.get_db_prep_save(value, connection))
        return out

    connection.ensure_connection()
    with connection.cursor() as cursor:
        _copy(cursor.cursor, model._meta.db_table, [f.column for f in fields], (values(r) for r in rows))
