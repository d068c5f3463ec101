from django.apps import AppConfig


class ClaimsConfig(AppConfig):
    name = "claims"

    def ready(self):
        from django.conf import settings

        from mirror.health import register_readiness_check
        from mirror.sync.hooks import register
        from mirror.views import register_object_section, register_page_parts

        from .devicestatus_pages import device_section, node_section
        from .finding_scope import stuck_count
        from .models import Pod, ResourceClaim
        from .preview_service.dispatch import preview_inventory_ready
        from .tasks import request_detection

        register(request_detection=request_detection)  # the stuck-claim detector looks at each committed batch
        register_page_parts(namespace_models=(ResourceClaim, Pod), stuck_count=stuck_count)
        # What drivers and the kubelet say about devices, on the device and node pages (inventory).
        register_object_section("Device", device_section)
        register_object_section("Node", node_section)
        register_readiness_check(  # while the web process warms up its preview inventories
            "preview_inventory",
            preview_inventory_ready,
            applies=lambda: getattr(settings, "GPUDASH_PREVIEW_WARM_UP", False),
        )
