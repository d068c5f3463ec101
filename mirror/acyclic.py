"""Big answers freed as soon as they are written, not left to the cyclic garbage collector.

A written response can sit in a reference cycle with everything it wrote; whatever a cycle holds
waits for a collection of the older generations, which then runs inside whichever request triggers
it and costs it time in proportion to what it visits (a fleet-wide preview: one entry per node;
BENCHMARKS.md has the measurements). Two cycles do that, and each is broken here, once for all:

- Templates (every page, fragment and error page): a rendering context refers to its dicts and each
  dict back to the context (ContextDict). `AcyclicTemplates`, the project's template backend,
  empties the context's list of dicts once the template is written.
- API responses: DRF puts the response into its own renderer context while rendering, and the view
  the context names keeps the response too. `AcyclicResponse` drops both references once written.
  It also writes an answer that is already JSON (a preview worker's, written by the API's renderer)
  as it is for the compact JSON the API sends by default, reading it only for other renderers
  (pretty-printed, browsable), with the collector paused while it is read.

The collector itself is paused (dra.gcpause.collector_paused, the one helper) only where a piece of
work makes very many short-lived objects, at that work's entry point: the engine's fleet-wide runs
(dra/fleet.py), the live inventory build (claims/live_inventory.py), a sync batch
(mirror/sync/watcher.py), the pool summary (inventory/pools.py), and reading a preview's answer
(ops/preview_page.PreviewReport.read for the page, AcyclicResponse here for the API).
"""

import orjson
from django.template.backends.django import DjangoTemplates, Template, reraise
from django.template.context import make_context
from django.template.exceptions import TemplateDoesNotExist
from rest_framework.response import Response

from dra.gcpause import collector_paused


class AcyclicTemplate(Template):
    def render(self, context=None, request=None):
        rendering = make_context(context, request, autoescape=self.backend.engine.autoescape)
        try:
            return self.template.render(rendering)
        except TemplateDoesNotExist as exc:
            reraise(exc, self.backend)
        finally:
            rendering.dicts.clear()  # the cycle: context -> its dicts -> (ContextDict) context


class AcyclicTemplates(DjangoTemplates):
    """Django's template backend, its contexts emptied once written (see the module docstring)."""

    def from_string(self, template_code):
        return AcyclicTemplate(self.engine.from_string(template_code), self)

    def get_template(self, template_name):
        try:
            return AcyclicTemplate(self.engine.get_template(template_name), self)
        except TemplateDoesNotExist as exc:
            reraise(exc, self)


class AcyclicResponse(Response):
    """DRF's Response, minus the cycles around it once written (see the module docstring).

    `encoded`: the answer as JSON bytes the API's own renderer wrote (instead of `data`): sent as they
    are where the request negotiated that renderer's compact output, read for any other."""

    def __init__(self, data=None, *, encoded=None, **kwargs):
        super().__init__(data, **kwargs)
        self.encoded = encoded

    @property
    def rendered_content(self):
        try:
            if self.encoded is not None and self._writes_as_encoded():
                self["Content-Type"] = self.accepted_renderer.media_type
                return self.encoded
            if self.encoded is not None:
                with collector_paused():  # read while paused: the many new objects are not scanned
                    self.data, self.encoded = orjson.loads(self.encoded), None
                    return super().rendered_content
            return super().rendered_content
        finally:
            context = self.renderer_context or {}
            context.pop("response", None)
            view = context.get("view")
            if getattr(view, "response", None) is self:
                view.response = None

    def _writes_as_encoded(self):
        """Whether the negotiated renderer writes what `encoded` holds: the API's JSON, not indented."""
        from mirror.api.renderers import JSONRenderer

        renderer = self.accepted_renderer
        if type(renderer) is not JSONRenderer:
            return False
        return renderer.get_indent(self.accepted_media_type, self.renderer_context or {}) is None
