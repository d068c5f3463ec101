"""One error body for every API failure: {"error": {"code", "message", "field"}}.

DRF's own errors (validation dicts, 401/403/404/405, parse errors) are reshaped here so tools
only ever parse one shape. `field` names the offending parameter or body field, else null.
"""

import logging

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

logger = logging.getLogger("mirror.api")


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object changed or is in a state that does not allow this."
    default_code = "conflict"


class EngineError(exceptions.APIException):
    """The preview engine failed on this input (logged as a bug); 422 so clients see it is about the input."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "The allocation engine could not evaluate this input."
    default_code = "engine_error"


class RetryLater(exceptions.APIException):
    """An answer that will come if asked again later: `wait` (seconds) becomes DRF's Retry-After header."""

    def __init__(self, detail=None, wait=None):
        super().__init__(detail)
        self.wait = wait


class InventoryBuilding(RetryLater):
    """A preview's inventory is still being built (503 + Retry-After)."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The preview inventory is still being built."
    default_code = "inventory_building"


class PreviewsBusy(RetryLater):
    """More previews in flight than admitted (429 + Retry-After)."""

    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_detail = "Too many previews in flight."
    default_code = "previews_busy"


class PreviewWorkerLost(exceptions.APIException):
    """The preview worker running the request died or stopped answering (503): asking again is safe."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The preview worker was lost."
    default_code = "preview_worker_lost"


class ClientClosedRequest(exceptions.APIException):
    """The client went away before the answer (499, as nginx logs it); nobody reads this answer."""

    status_code = 499
    default_detail = "The client closed the request."
    default_code = "client_closed"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


# Django's refusals of an oversized body: SuspiciousOperations, which would otherwise be 500s here.
BODY_LIMITS = (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent)


def body_limit_message(exc):
    """Which of Django's upload limits a body broke, with the limit."""
    if isinstance(exc, TooManyFieldsSent):
        return f"The form has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields."
    if isinstance(exc, TooManyFilesSent):
        return f"The form has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files."
    size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return f"The request body is larger than {size / 2**20:g} MB ({size:,} bytes), the most this server reads."


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
    elif isinstance(exc, BODY_LIMITS):
        exc = PayloadTooLarge(body_limit_message(exc))
    response = drf_exception_handler(exc, context)
    if response is None:
        return server_error(exc, context)
    field, first = _first_error(exc.detail)
    code = getattr(first, "code", None) or getattr(exc, "default_code", "error")
    response.data = error_body(code, first, field)
    return response


def server_error(exc, context):
    """A genuine bug: logged with its traceback like Django would, answered in the API's shape (with
    DEBUG, re-raised for Django's debug page)."""
    if settings.DEBUG:
        return None
    request = context.get("request")
    logger.error("Internal Server Error: %s", getattr(request, "path", "?"), exc_info=exc)
    set_rollback()
    return JsonResponse(error_body("server_error", "Internal error; it was logged for the administrators."), status=500)


def not_found_view(request, *args, **kwargs):
    """Unknown paths under /api/ answer in the API's error shape, not Django's HTML page."""
    return JsonResponse(error_body("not_found", f"No API endpoint at {request.path}."), status=404)
