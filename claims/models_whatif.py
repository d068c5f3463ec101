"""Saved what-if scenarios (claims/whatif.py): a user's named list of changes, shareable as a URL."""

from urllib.parse import urlencode

from django.conf import settings
from django.db import models


def scenario_query(changes, shapes=(), cluster=None):
    """The query string that shares a scenario (the page's URL): one `c` per change, one `s` per shape."""
    pairs = ([("cluster", cluster)] if cluster else []) + [("c", c) for c in changes] + [("s", s) for s in shapes]
    return urlencode(pairs)


class WhatIfScenarioQuerySet(models.QuerySet):
    def owned_by(self, user):
        return self.filter(owner=user)


class WhatIfScenario(models.Model):
    """A named scenario of one user: its change lines and headroom shapes (dra/whatif.py syntax).
    Only its owner lists, opens or deletes it; the URL it shares carries the changes themselves, so
    whoever opens that runs it under their own namespace scope."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="whatif_scenarios")
    cluster = models.ForeignKey("mirror.Cluster", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    changes = models.JSONField(default=list)
    shapes = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = WhatIfScenarioQuerySet.as_manager()

    class Meta:
        ordering = ("-updated", "name")
        constraints = [models.UniqueConstraint(fields=("owner", "cluster", "name"), name="claims_whatif_unique_name")]

    def __str__(self):
        return self.name

    @property
    def query(self):
        """The page's query string for this scenario (what "share" copies)."""
        return scenario_query(self.changes, self.shapes, self.cluster.name)
