"""One error body for every API failure: {"error": {"code", "message", "field"}}.

DRF's own errors (validation dicts, 401/403/404/405, parse errors) are reshaped here so tools
only ever parse one shape. `field` names the offending parameter or body field, else null.
"""

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object changed or is in a state that does not allow this."
    default_code = "conflict"


def _first_error(detail, prefix=""):
    """(field path, ErrorDetail) of the first message in a nested DRF error structure."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            field = None if key in ("non_field_errors", "__all__", "detail") else f"{prefix}{key}"
            inner_field, inner = _first_error(value, f"{field}." if field else prefix)
            return inner_field or field, inner
    if isinstance(detail, list) and detail:
        return _first_error(detail[0], prefix)
    return None, detail


def error_body(code, message, field=None):
    return {"error": {"code": str(code), "message": str(message), "field": field}}


def exception_handler(exc, context):
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a genuine bug: let Django log it and answer 500
    field, first = _first_error(exc.detail)
    code = getattr(first, "code", None) or getattr(exc, "default_code", "error")
    response.data = error_body(code, first, field)
    return response


def not_found_view(request, *args, **kwargs):
    """Unknown paths under /api/ answer in the API's error shape, not Django's HTML page."""
    return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}."), status=404)
