"""The read-only viewset every list/detail endpoint is built on."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import ValidationError

from mirror.roles import scope_queryset

from .filters import StrictFilterBackend
from .pagination import StablePagePagination
from .permissions import IsViewer

RAW_PARAM = OpenApiParameter("raw", OpenApiTypes.BOOL, description="Add the object's raw Kubernetes JSON as `raw`.")
TRUE_VALUES, FALSE_VALUES = {"1", "true", "yes"}, {"0", "false", "no", ""}


def bool_param(request, name):
    value = request.query_params.get(name)
    if value is None:
        return False
    if value.lower() in TRUE_VALUES:
        return True
    if value.lower() in FALSE_VALUES:
        return False
    raise ValidationError({name: ["Must be one of 1, true, 0, false."]})


class MirrorViewSet(viewsets.ReadOnlyModelViewSet):
    """List + detail of mirrored objects, role-checked, namespace-scoped where `namespaced`."""

    permission_classes = [IsViewer]
    pagination_class = StablePagePagination
    filter_backends = [StrictFilterBackend]
    namespaced = False
    has_raw = True

    @extend_schema(parameters=[RAW_PARAM])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(parameters=[RAW_PARAM])
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)

    def include_raw(self):
        return self.has_raw and bool_param(self.request, "raw")

    def base_queryset(self):
        return self.queryset.all()

    def get_queryset(self):
        qs = self.base_queryset()
        if self.has_raw and not self.include_raw():
            qs = qs.defer("raw")  # raw JSON is most of a row's bytes
        if self.namespaced:
            qs = scope_queryset(qs, self.request.user)
        return qs

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["include_raw"] = self.include_raw() if self.request else False
        return context
