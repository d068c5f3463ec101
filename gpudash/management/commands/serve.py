"""Run the dashboard's ASGI server; without REDIS_URL the watchers run inside this process too."""

import asyncio

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the dashboard (HTTP + websockets). Without REDIS_URL, also runs the cluster watchers in-process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-watchers", action="store_true", help="Do not start in-process watchers.")
        parser.add_argument("--no-preview-warm-up", action="store_true", help="Do not build the preview inventories at start (settings.GPUDASH_PREVIEW_WARM_UP off).")

    def handle(self, *args, **opts):
        in_process = not settings.REDIS_URL and not opts["no_watchers"]
        if in_process:
            self.stdout.write("Watchers running in this process (no REDIS_URL).")
        if opts["no_preview_warm_up"]:
            settings.GPUDASH_PREVIEW_WARM_UP = False  # gpudash/asgi.py starts it too, when the setting is on
        else:
            from claims.live_inventory import start_warm_up

            # The first preview of a big cluster would otherwise pay the inventory build and its cold CEL
            # (once per process: the import of gpudash.asgi below finds it started).
            start_warm_up()
        serve(opts["host"], opts["port"], in_process_watchers=in_process)


def serve(host, port, in_process_watchers=False):
    config = uvicorn.Config(
        "gpudash.asgi:application", host=host, port=port, log_level="warning", lifespan="off", ws="websockets-sansio"
    )
    server = uvicorn.Server(config)

    async def main():
        if in_process_watchers:
            from gpudash.sync.runner import start_in_process, stop_process_supervisor

            # The in-memory channel layer belongs to this loop: the watcher threads publish onto it.
            start_in_process(asyncio.get_running_loop())
            # No beat without Redis: the fleet-history sample, its prune and the utilization poll run here.
            from monitoring.periodic import start_in_process as start_monitoring

            start_monitoring()
        try:
            await server.serve()
        finally:
            if in_process_watchers:
                await asyncio.to_thread(stop_process_supervisor)
                from monitoring.periodic import stop_in_process as stop_monitoring

                await asyncio.to_thread(stop_monitoring)  # a sample or poll in hand finishes first

    asyncio.run(main())
