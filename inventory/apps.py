from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "inventory"

    def ready(self):
        from mirror import published
        from mirror.sync.hooks import register

        from . import accelerators, devicestate, tasks, vanished
        from .published import nodes, published_devices

        register(  # what inventory derives from the rows the sync writes (mirror/sync/hooks.py)
            pools_of={"ResourceSlice": devicestate.pools_of_slices, "ResourceClaim": devicestate.pools_of_claims},
            refresh_pools=devicestate.refresh_pools,
            vanished_snapshot=vanished.snapshot,
            vanished_record=vanished.record,
            class_count_kinds=tasks.RELEVANT_KINDS,
            request_class_counts=tasks.request_after_commit,
            nodes_of_pods=accelerators.nodes_of_pods,
            refresh_nodes=accelerators.refresh_nodes,
            refresh_cluster=accelerators.refresh_cluster,
        )
        # The claims side's pages and detector read the published devices and nodes (mirror/published.py).
        published.register(devices=published_devices, nodes=nodes)
