"""Run the built-in Kubernetes-compatible API server in the foreground (demo, manual tests)."""

import signal
import threading

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Serve a devcluster (a small Kubernetes-compatible API server on 127.0.0.1) seeded from a scenario."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=6443, help="Port on 127.0.0.1 (0 = any free port).")
        parser.add_argument("--scenario", default="demo", help="Scenario name or YAML path ('' = none).")
        parser.add_argument(
            "--fleet-nodes",
            type=int,
            default=0,
            help="Also load a synthetic fleet with this many 8-GPU nodes (benchmarks).",
        )
        parser.add_argument("--fleet-claims", type=int, default=None, help="Claims in the synthetic fleet.")
        parser.add_argument("--churn", type=float, default=0.0, help="Churn actions per second (0 = none).")
        parser.add_argument("--kubeconfig", default="devcluster-kubeconfig.yaml", help="Where to write a kubeconfig.")
        parser.add_argument("--context", default="devcluster")
        parser.add_argument("--token", default=None, help="Require this bearer token.")
        parser.add_argument("--bookmark-interval", type=float, default=60.0)
        parser.add_argument(
            "--devicetaintrules", action="store_true", help="Serve resource.k8s.io/v1beta2 DeviceTaintRules."
        )

    def handle(self, *args, **opts):
        from devcluster.churn import Churn
        from devcluster.fleet import generate_fleet
        from devcluster.scenario import ScenarioError, load_scenario
        from devcluster.server import DevCluster

        server = DevCluster(port=opts["port"], token=opts["token"], bookmark_interval=opts["bookmark_interval"])
        if opts["devicetaintrules"]:
            server.enable_devicetaintrules()
        try:
            if opts["scenario"]:
                counts = load_scenario(server.store, opts["scenario"])
                self.stdout.write(f"scenario {opts['scenario']}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
        except ScenarioError as exc:
            raise CommandError(str(exc)) from exc
        if opts["fleet_nodes"]:
            claims = opts["fleet_claims"] if opts["fleet_claims"] is not None else opts["fleet_nodes"] * 4
            fleet = generate_fleet(nodes=opts["fleet_nodes"], claims=claims)
            server.store.bulk_load(fleet, copy=False)
            self.stdout.write("fleet: " + ", ".join(f"{len(v)} {k}" for k, v in fleet.items()))
        try:
            url = server.start()
        except OSError as exc:
            raise CommandError(f"cannot listen on 127.0.0.1:{opts['port']}: {exc}") from exc
        path = server.write_kubeconfig(opts["kubeconfig"], context=opts["context"])
        churn = Churn(server.store, rate=opts["churn"]).start() if opts["churn"] > 0 else None
        self.stdout.write(self.style.SUCCESS(f"devcluster serving at {url}"))
        self.stdout.write(f"kubeconfig: {path} (context {opts['context']})")
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        try:
            while not done.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            if churn:
                churn.stop()
            server.stop()
            self.stdout.write("devcluster stopped")
