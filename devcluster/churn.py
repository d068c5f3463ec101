"""Background churn for the demo: workloads come and go, a node's driver disappears and returns.

Only objects the churn created itself (label gpudash.io/churn=true) are released or deleted,
so the scenario's deliberate problem cases stay in place. Every allocation names a free device
that the node publishes (whole devices that consume no shared counters) on a node the scheduler's
filters let the pod onto (devcluster/scheduler.py: cordons, taints, allocatable), so the cluster stays
consistent the way a scheduler would keep it. A pod no node takes is marked Unschedulable with the
scheduler's message, and the backlog of such pods is bounded (the oldest job is cancelled), so the
demo's Pending and stuck counts stay level however long it runs.
"""

import logging
import random
import threading

from . import builders as b
from .scheduler import feasible
from .store import ApiError, now_rfc3339

log = logging.getLogger(__name__)

CHURN_LABEL = "gpudash.io/churn"
CHURN_NAMESPACE = "churn-demo"
MAX_PENDING = 4  # churn jobs left waiting at once; a new one cancels the oldest beyond that


class Churn:
    def __init__(self, store, rate=1.0, seed=None, namespace=CHURN_NAMESPACE, driver_outage_ticks=20):
        self.store = store
        self.rate = rate
        self.rng = random.Random(seed)
        self.namespace = namespace
        self.driver_outage_ticks = driver_outage_ticks
        self.counts = {
            "created": 0,
            "allocated": 0,
            "released": 0,
            "driver_removed": 0,
            "driver_restored": 0,
            "unschedulable": 0,
            "cancelled": 0,
            "errors": 0,
        }
        self._stop = threading.Event()
        self._thread = None
        self._pending = []  # (ns, claim name, pod name)
        self._running = []
        self._outages = []  # (ticks left, [slice objects])
        self._serial = 0

    def _ensure_setup(self):
        if self.store.find("namespaces", None, self.namespace) is None:
            ns = b.namespace_obj(self.namespace, self.rng, {"team": "demo"})
            ns["metadata"].pop("uid")
            self.store.create("namespaces", ns)
        if self.store.find("resourceclaimtemplates", self.namespace, "gpu-1") is None:
            spec = b.claim_spec([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}])
            template = b.make_template(self.namespace, "gpu-1", spec, self.rng)
            template["metadata"].pop("uid")
            self.store.create("resourceclaimtemplates", template)

    def start(self):
        self._ensure_setup()
        self._thread = threading.Thread(target=self._run, name="devcluster-churn", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(10)
            self._thread = None

    def _run(self):
        while not self._stop.wait(1.0 / self.rate):
            try:
                self.step()
            except ApiError as exc:  # e.g. the UI released a claim the churn meant to touch
                self.counts["errors"] += 1
                log.info("churn step skipped: %s", exc.message)

    def step(self):
        """One action; public so tests can drive the churn deterministically."""
        self._ensure_setup()
        self._tick_outages()
        roll = self.rng.random()
        if self._pending and roll < 0.35:
            self._allocate(self._pending.pop(0))
        elif roll < 0.6 or not self._running:
            self._create()
        elif roll < 0.95:
            self._release(self._running.pop(self.rng.randrange(len(self._running))))
        else:
            self._driver_outage()

    # -- actions -----------------------------------------------------------------------

    def _create(self):
        self._serial += 1
        name = f"churn-job-{self._serial:05d}"
        spec = b.claim_spec([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}])
        pod = b.make_pod(
            self.namespace,
            name,
            self.rng,
            node=None,
            phase="Pending",
            pod_claims=[{"name": "gpu", "resourceClaimTemplateName": "gpu-1"}],
            labels={CHURN_LABEL: "true", "app": "churn-job"},
        )
        # Born now (the API server stamps creationTimestamp), not at the scenario's fixed timestamp: a
        # claim that looks months old is judged by the stuck-claim rules' grace periods at once.
        pod["metadata"].pop("uid")
        pod["metadata"].pop("creationTimestamp", None)
        pod = self.store.create("pods", pod)
        claim_name = f"{name}-gpu-{b.suffix(self.rng)}"
        claim = b.make_claim(self.namespace, claim_name, spec, self.rng, owner_pod=pod, pod_claim_name="gpu")
        claim["metadata"].pop("uid")
        claim["metadata"].pop("creationTimestamp", None)
        claim["metadata"]["labels"] = {CHURN_LABEL: "true"}
        self.store.create("resourceclaims", claim)
        self.store.patch(
            "pods",
            self.namespace,
            name,
            {"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}]}},
            "application/merge-patch+json",
            "status",
        )
        self.counts["created"] += 1
        self._allocate((self.namespace, claim_name, name))
        while len(self._pending) > MAX_PENDING:
            self._cancel(self._pending.pop(0))

    def _free_devices(self):
        """{node: [device keys]} of the whole, untainted GPUs no claim holds."""
        taken = set()
        for claim in self.store.list("resourceclaims", copy=False):
            for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
                taken.add((r.get("driver"), r.get("pool"), r.get("device")))
        free = {}
        for s in self.store.list("resourceslices", copy=False):
            spec = s["spec"]
            if spec.get("driver") != b.GPU_DRIVER or not spec.get("nodeName"):
                continue
            for dev in spec.get("devices", []):
                if dev.get("consumesCounters") or dev.get("taints"):
                    continue
                if dev["attributes"].get("type", {}).get("string") != "gpu":
                    continue
                key = (spec["driver"], spec["pool"]["name"], dev["name"])
                if key not in taken:
                    free.setdefault(spec["nodeName"], []).append(key)
        return free

    def _allocate(self, item):
        """Schedule one pending job: bind it where the scheduler's filters allow, or leave it Pending
        with the scheduler's reason and message."""
        ns, claim_name, pod_name = item
        pod = self.store.get("pods", ns, pod_name)
        fits, message = feasible(
            self.store.list("nodes", copy=False), self.store.list("pods", copy=False), pod, self._free_devices()
        )
        if not fits:
            self._mark_unschedulable(pod, message)
            self._pending.append(item)
            return
        node = self.rng.choice(sorted(fits))
        driver, pool, device = self.rng.choice(fits[node])
        self.store.patch(
            "resourceclaims",
            ns,
            claim_name,
            {"metadata": {"finalizers": [b.DELETE_PROTECTION]}},
            "application/strategic-merge-patch+json",
        )
        self.store.patch(
            "resourceclaims",
            ns,
            claim_name,
            {
                "status": {
                    "allocation": {
                        "devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]},
                        "nodeSelector": b.node_selector_for(node),
                        "allocationTimestamp": now_rfc3339(),
                    },
                    "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod["metadata"]["uid"]}],
                }
            },
            "application/merge-patch+json",
            "status",
        )
        self.store.patch("pods", ns, pod_name, {"spec": {"nodeName": node}}, "application/merge-patch+json")
        self.store.patch(
            "pods",
            ns,
            pod_name,
            {
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                }
            },
            "application/merge-patch+json",
            "status",
        )
        self._running.append(item)
        self.counts["allocated"] += 1

    def _mark_unschedulable(self, pod, message):
        meta = pod["metadata"]
        self.store.patch(
            "pods",
            meta["namespace"],
            meta["name"],
            {
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": message,
                            "lastTransitionTime": now_rfc3339(),
                        }
                    ]
                }
            },
            "application/merge-patch+json",
            "status",
        )
        self.counts["unschedulable"] += 1

    def _cancel(self, item):
        """The owner gave up on a job that never started: pod and (unallocated) claim go."""
        ns, claim_name, pod_name = item
        self.store.delete("resourceclaims", ns, claim_name)
        self.store.delete("pods", ns, pod_name)
        self.counts["cancelled"] += 1

    def _release(self, item):
        ns, claim_name, pod_name = item
        self.store.patch(
            "pods", ns, pod_name, {"status": {"phase": "Succeeded"}}, "application/merge-patch+json", "status"
        )
        self.store.patch(
            "resourceclaims",
            ns,
            claim_name,
            {"status": {"reservedFor": None, "allocation": None}},
            "application/merge-patch+json",
            "status",
        )
        self.store.delete("resourceclaims", ns, claim_name)
        if self.store.find("resourceclaims", ns, claim_name):
            self.store.remove_finalizer("resourceclaims", ns, claim_name, b.DELETE_PROTECTION)
        self.store.delete("pods", ns, pod_name)
        self.counts["released"] += 1

    def _driver_outage(self):
        busy = {n for _ticks, slices in self._outages for n in {s["spec"]["nodeName"] for s in slices}}
        nodes = sorted(
            {s["spec"]["nodeName"] for s in self.store.list("resourceslices", copy=False) if s["spec"].get("nodeName")}
            - busy
        )
        if not nodes:
            return
        node = self.rng.choice(nodes)
        slices = self.store.list("resourceslices", field_selector=f"spec.nodeName={node}")
        for s in slices:
            self.store.delete("resourceslices", None, s["metadata"]["name"])
        self._outages.append([self.driver_outage_ticks, slices])
        self.counts["driver_removed"] += 1

    def _tick_outages(self):
        for outage in list(self._outages):
            outage[0] -= 1
            if outage[0] > 0:
                continue
            self._outages.remove(outage)
            for s in outage[1]:
                s["metadata"] = {
                    k: v for k, v in s["metadata"].items() if k not in ("uid", "resourceVersion", "creationTimestamp")
                }
                s["spec"]["pool"]["generation"] = s["spec"]["pool"].get("generation", 0) + 1
                self.store.create("resourceslices", s)
            self.counts["driver_restored"] += 1
