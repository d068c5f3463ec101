from django.apps import AppConfig


class ClaimsConfig(AppConfig):
    name = "claims"

    def ready(self):
        from django.conf import settings

        from mirror import holdings
        from mirror.health import register_readiness_check
        from mirror.sync.hooks import register
        from mirror.views import register_page_parts

        from .devicestatus_pages import device_panel, node_panel
        from .finding_scope import stuck_count
        from .holdings import device_allocations
        from .holdings import holdings as device_holdings
        from .models import Pod, ResourceClaim
        from .preview_service.dispatch import preview_inventory_ready
        from .tasks import request_detection

        # inventory's pages and API show who holds a device (mirror/holdings.py).
        holdings.register(holdings=device_holdings, allocations=device_allocations)
        register(request_detection=request_detection)  # the stuck-claim detector looks at each committed batch
        # What drivers and the kubelet say about devices: panels of the device and node pages (inventory).
        register_page_parts(
            namespace_models=(ResourceClaim, Pod),
            stuck_count=stuck_count,
            panels={"device": device_panel, "node": node_panel},
        )
        register_readiness_check(  # while the web process warms up its preview inventories
            "preview_inventory",
            preview_inventory_ready,
            applies=lambda: getattr(settings, "GPUDASH_PREVIEW_WARM_UP", False),
        )
