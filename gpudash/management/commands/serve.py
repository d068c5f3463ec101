"""Run the dashboard's ASGI server; without REDIS_URL the watchers run inside this process too."""

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the dashboard (HTTP + websockets). Without REDIS_URL, also runs the cluster watchers in-process."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-watchers", action="store_true", help="Do not start in-process watchers.")

    def handle(self, *args, **opts):
        if not settings.REDIS_URL and not opts["no_watchers"]:
            from gpudash.sync.runner import start_in_process

            start_in_process()
            self.stdout.write("Watchers running in this process (no REDIS_URL).")
        serve(opts["host"], opts["port"])


def serve(host, port):
    config = uvicorn.Config("gpudash.asgi:application", host=host, port=port, log_level="warning", lifespan="off")
    uvicorn.Server(config).run()
