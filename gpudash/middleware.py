"""Requests no view can serve: a NUL character in the path, a query parameter or a form field, and
a form body over Django's upload limits.

PostgreSQL text cannot hold NUL, so any lookup with one fails deep in the database driver (a 500 for
a typo'd or hostile URL). Refused up front with a 400 that names the parameter: the API's JSON error
under /api/, a plain readable text elsewhere. (JSON bodies are checked by mirror.api.parsers.)
Reading the form here is also where an oversized one is found: a 413, in the same two forms.
"""

import asyncio
import threading

from asgiref.sync import markcoroutinefunction
from django.http import HttpResponse, JsonResponse

from mirror.api.errors import BODY_LIMITS, body_limit_message, error_body

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _nul_field(request):
    if "\x00" in request.path_info:
        return "path"
    sources = [request.GET]
    if request.method == "POST" and request.content_type in FORM_TYPES:
        sources.append(request.POST)
    for source in sources:
        for key, values in source.lists():
            if "\x00" in key or any("\x00" in v for v in values):
                return key.replace("\x00", "\\0")
    return None


class RejectNulMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            field = _nul_field(request)
        except BODY_LIMITS as exc:  # Django would answer its HTML 400, even under /api/
            return _refuse(request, 413, "too_large", body_limit_message(exc))
        if field is None:
            return self.get_response(request)
        message = f"The {'path' if field == 'path' else f'parameter {field!r}'} contains a NUL character (\\0), which no name or filter can hold."
        return _refuse(request, 400, "invalid", message, None if field == "path" else field)


def _refuse(request, status, code, message, field=None):
    if request.path_info.startswith("/api/"):
        return JsonResponse(error_body(code, message, field), status=status)
    return HttpResponse(
        f"{'Bad request' if status == 400 else 'Request too large'}: {message}\n",
        status=status,
        content_type="text/plain; charset=utf-8",
    )


class ClientGoneMiddleware:
    """Gives every request `request.client_gone`, a threading.Event set when the client disconnects
    before its answer is ready, so a view waiting on a preview worker can cancel the job.

    Under ASGI Django cancels the task of a request whose client sends `http.disconnect`. A sync view
    never sees that: asgiref absorbs the cancellation and waits for the view's thread. So the rest of
    the chain runs as a task of its own, this middleware takes the cancellation, tells the view
    through the Event and waits for it to finish. First in MIDDLEWARE: the sync middleware after it
    still run together in one thread, as before.
    """

    sync_capable = False
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request):
        request.client_gone = threading.Event()
        answer = asyncio.ensure_future(self.get_response(request))
        try:
            return await asyncio.shield(answer)
        except asyncio.CancelledError:
            request.client_gone.set()
            await asyncio.wait([answer])  # the view stops soon after it sees the Event
            raise
