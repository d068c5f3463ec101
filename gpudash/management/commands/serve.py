"""Run the dashboard's ASGI server; without REDIS_URL the watchers run inside this process too.

Previews never run here: gpudash.asgi starts the local pool of preview worker processes (embedded
default) or leaves them to the `preview` Celery queue (claims/preview_service/)."""

import asyncio
import os

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Serve the dashboard (HTTP + websockets). Without REDIS_URL, also runs the cluster watchers in-process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--workers",
            type=int,
            default=1,
            help="Web server processes (needs REDIS_URL: the channel layer and the watchers must be shared).",
        )
        parser.add_argument("--no-watchers", action="store_true", help="Do not start in-process watchers.")
        parser.add_argument(
            "--no-preview-warm-up",
            action="store_true",
            help="Preview workers do not build the preview inventories at start (settings.GPUDASH_PREVIEW_WARM_UP off).",
        )

    def handle(self, *args, **opts):
        if opts["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        if opts["workers"] > 1 and not settings.REDIS_URL:
            raise CommandError(
                "--workers above 1 needs REDIS_URL: without it the live updates and the watchers live in one process"
            )
        in_process = not settings.REDIS_URL and not opts["no_watchers"]
        if in_process:
            self.stdout.write("Watchers running in this process (no REDIS_URL).")
        if opts["no_preview_warm_up"]:
            os.environ["GPUDASH_PREVIEW_WARM_UP"] = "0"  # read by web worker processes started below too
            settings.GPUDASH_PREVIEW_WARM_UP = False
        if opts["workers"] > 1:
            uvicorn.run(APP, host=opts["host"], port=opts["port"], workers=opts["workers"], **SERVER_OPTIONS)
            return
        serve(opts["host"], opts["port"], in_process_watchers=in_process)


APP = "gpudash.asgi:application"
SERVER_OPTIONS = {"log_level": "warning", "lifespan": "off", "ws": "websockets-sansio"}


def serve(host, port, in_process_watchers=False):
    config = uvicorn.Config(APP, host=host, port=port, **SERVER_OPTIONS)
    server = uvicorn.Server(config)

    async def main():
        if in_process_watchers:
            from mirror.sync.runner import start_in_process, stop_process_supervisor

            # The in-memory channel layer belongs to this loop: the watcher threads publish onto it.
            start_in_process(asyncio.get_running_loop())
            # No beat without Redis: the fleet-history sample, its prune, the utilization poll and the
            # jobs other apps register (usage: the rollup, the ledger prune) run on this one thread.
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
