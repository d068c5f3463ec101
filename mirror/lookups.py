"""`field__any_of=[...]`: membership in a list sent as one parameter.

Django's `__in` prepares and resolves every element one by one and needs chunking under SQLite's
variable limit; the sync's batches test thousands of names and ids per statement, where that was most
of the time spent outside the database. Here the list is one PostgreSQL array (`= ANY(%s)`), or on
SQLite one JSON array read by json_each. Values are sent as they are: give the column's Python type
(str for text columns, int for ids).
"""

import json

from django.db.models import Field, ForeignObject, Lookup


class AnyOf(Lookup):
    lookup_name = "any_of"
    prepare_rhs = False

    def get_prep_lookup(self):
        return list(self.rhs)

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = self.rhs
        if not values:
            return "1 = 0", []
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s)", [*lhs_params, values]
        return f"{lhs} IN (SELECT value FROM json_each(%s))", [*lhs_params, json.dumps(values)]


Field.register_lookup(AnyOf)
ForeignObject.register_lookup(AnyOf)  # related fields keep lookups of their own: claim_id__any_of
