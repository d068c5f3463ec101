from django.db import connection
from django.http import JsonResponse


def healthz(request):
    """Liveness for load balancers and compose: the database answers."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any DB failure means "not healthy", reported, not raised
        return JsonResponse({"status": "error", "error": str(exc)}, status=503)
    return JsonResponse({"status": "ok"})
