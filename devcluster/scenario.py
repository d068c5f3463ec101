"""Scenario files: a compact YAML description of a fleet, expanded into API objects.

`scenario_objects("demo")` returns {plural: [objects]} (deterministic names and uids), ready
for `Store.bulk_load` or for loading straight into the dashboard's database in unit tests;
`load_scenario(store, "demo")` puts them in a devcluster store. The expansion checks that
every allocation names devices the node really publishes, that no device is allocated twice
(admin access excepted) and that partitions do not overuse a GPU's counters; a scenario that
breaks a rule fails with a message naming the claim, unless it says the break is deliberate.
"""

import collections
import copy
import datetime
import pathlib
import random

import yaml

from . import builders as b
from . import scheduler

SCENARIO_DIR = pathlib.Path(__file__).resolve().parent / "scenarios"


class ScenarioError(ValueError):
    pass


def scenario_path(name_or_path):
    path = pathlib.Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.exists():
        return path
    candidate = SCENARIO_DIR / f"{name_or_path}.yaml"
    if candidate.exists():
        return candidate
    known = ", ".join(sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml")))
    raise ScenarioError(f"no scenario {name_or_path!r} (known: {known}; or give a path to a .yaml file)")


def scenario_objects(name_or_path="demo", seed=7):
    path = scenario_path(name_or_path)
    return _Expander(_read(path), random.Random(seed), str(path)).expand()


def _read(path, seen=()):
    """A scenario document with its `include:` scenarios merged in front (lists appended, maps merged),
    so a variant adds nodes and workloads to another without copying it."""
    with open(path) as fh:
        doc = yaml.safe_load(fh) or {}
    if not isinstance(doc, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping of sections")
    merged = {}
    for name in doc.pop("include", None) or []:
        inc = scenario_path(name)
        if inc in seen or inc == path:
            raise ScenarioError(f"{path}: include of {name!r} loops")
        for key, value in _read(inc, (*seen, path)).items():
            _merge(merged, key, value)
    for key, value in doc.items():
        _merge(merged, key, value)
    return merged


def _merge(doc, key, value):
    if isinstance(value, list) and isinstance(doc.get(key), list):
        doc[key] = doc[key] + value
    elif isinstance(value, dict) and isinstance(doc.get(key), dict):
        doc[key] = {**doc[key], **value}
    else:
        doc[key] = value


def load_scenario(store, name_or_path="demo", seed=7):
    """Create the scenario's objects in `store`; returns {plural: count}."""
    objects = scenario_objects(name_or_path, seed)
    store.bulk_load(objects)
    return {plural: len(items) for plural, items in objects.items()}


class _Expander:
    def __init__(self, doc, rng, source):
        self.doc = doc
        self.rng = rng
        self.source = source
        self.out = collections.defaultdict(list)
        self.devices = {}  # (driver, pool, device) -> device dict
        self.counter_sets = {}  # (driver, pool, counter set) -> {counter: int}
        self.taken = {}  # (driver, pool, device) -> claim label
        self.counter_use = collections.defaultdict(lambda: collections.Counter())
        self.nodes = {}
        self.hami_used = {}  # node -> {GPU UUID: MiB HAMi assigned}
        self.templates = {}
        self.claims = {}  # (ns, name) -> claim
        self.class_drivers = {}

    def fail(self, what, message):
        raise ScenarioError(f"{self.source}: {what}: {message}")

    def expand(self):
        models = {**b.DEFAULT_GPU_MODELS, **(self.doc.get("gpuModels") or {})}
        profiles = self.doc.get("migProfiles") or b.DEFAULT_MIG_PROFILES
        for ns in self.doc.get("namespaces") or []:
            self.out["namespaces"].append(b.namespace_obj(ns["name"], self.rng, ns.get("labels")))
        self.out["namespaces"].append(b.namespace_obj("default", self.rng))
        self._nodes(models, profiles)
        self._taints()
        for dc in self.doc.get("deviceClasses") or []:
            self.out["deviceclasses"].append(
                b.device_class(dc["name"], dc["cel"], dc.get("extendedResourceName"), self.rng)
            )
        for t in self.doc.get("claimTemplates") or []:
            spec = b.claim_spec(t["requests"], t.get("constraints"))
            self.templates[(t["namespace"], t["name"])] = spec
            self.out["resourceclaimtemplates"].append(b.make_template(t["namespace"], t["name"], spec, self.rng))
        for entry in self.doc.get("claims") or []:
            self._standalone_claim(entry)
        for entry in self.doc.get("workloads") or []:
            self._workload(entry)
        self._check_counters()
        for objs in self.out.values():
            objs.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return dict(self.out)

    def _nodes(self, models, profiles):
        gpu_ds, nic_ds = b.det_uuid(self.rng), b.det_uuid(self.rng)
        for spec in self.doc.get("nodes") or []:
            name = spec["name"]
            model = None
            if spec.get("gpu"):
                model = models.get(spec["gpu"])
                if model is None:
                    self.fail(f"node {name}", f"unknown gpu model {spec['gpu']!r} (known: {', '.join(models)})")
            node = b.make_node(name, self.rng, model, ready=spec.get("ready", True), zone=spec.get("zone", "zone-a"))
            if spec.get("cordoned"):  # kubectl cordon; the node lifecycle controller adds the matching taint
                node["spec"]["unschedulable"] = True
                node["spec"].setdefault("taints", []).append(
                    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": b.TIMESTAMP}
                )
            for t in spec.get("taints") or []:
                node["spec"].setdefault("taints", []).append(
                    {k: str(v) for k, v in t.items() if k in ("key", "value", "effect")}
                )
            if spec.get("devicePlugin"):  # GPUs served by a device plugin: extended resources on the node
                b.advertise(node, {k: str(v) for k, v in spec["devicePlugin"].items()})
            if spec.get("hami"):  # a HAMi-managed node: vGPU slots plus HAMi's device registration
                if not model:
                    self.fail(f"node {name}", "hami needs the node's gpu model")
                b.hami_node(node, model, self.rng, **spec["hami"])
            self.nodes[name] = node
            self.out["nodes"].append(node)
            if not model or spec.get("driver", True) is False:
                continue
            uid = node["metadata"]["uid"]
            slices = b.gpu_slices(name, uid, model, spec.get("gpus", 8), self.rng, spec.get("mig"), profiles)
            if spec.get("nics"):
                node["metadata"]["labels"][b.RDMA_NODE_LABEL] = "true"  # what NFD labels RDMA-capable nodes with
                slices += b.nic_slices(name, uid, spec["nics"], self.rng)
                self.out["pods"].append(b.driver_pod(name, self.rng, b.NIC_DRIVER_APP, b.NIC_DRIVER_NAMESPACE, nic_ds))
            self.out["pods"].append(b.driver_pod(name, self.rng, daemonset_uid=gpu_ds))
            for s in slices:
                self._index_slice(s)
            self.out["resourceslices"].extend(slices)
        self._driver_daemonsets(gpu_ds, nic_ds)

    def _driver_daemonsets(self, gpu_ds, nic_ds):
        """The DaemonSets owning the driver pods; a pod on a NotReady node is not Ready (the node
        lifecycle controller marks it so)."""
        ready = {
            n["metadata"]["name"]: any(
                c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or []
            )
            for n in self.out["nodes"]
        }
        for uid, app, namespace, selector in (
            (gpu_ds, b.GPU_DRIVER_APP, b.GPU_DRIVER_NAMESPACE, {"nvidia.com/gpu.present": "true"}),
            (nic_ds, b.NIC_DRIVER_APP, b.NIC_DRIVER_NAMESPACE, {b.RDMA_NODE_LABEL: "true"}),
        ):
            pods = [
                p
                for p in self.out["pods"]
                if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])
            ]
            for pod in pods:
                if not ready.get(pod["spec"].get("nodeName"), True):
                    for c in pod["status"]["conditions"]:
                        if c["type"] == "Ready":
                            c.update(status="False", reason="NodeNotReady")
                    for cs in pod["status"].get("containerStatuses") or []:
                        cs["ready"] = False
            if pods:
                self.out["daemonsets"].append(
                    b.driver_daemonset(app, namespace, uid, selector, pods, self.out["nodes"])
                )

    def _index_slice(self, s):
        driver, pool = s["spec"]["driver"], s["spec"]["pool"]["name"]
        for dev in s["spec"].get("devices", []):
            self.devices[(driver, pool, dev["name"])] = dev
        for cs in s["spec"].get("sharedCounters", []):
            self.counter_sets[(driver, pool, cs["name"])] = {
                k: _quantity(v["value"]) for k, v in cs["counters"].items()
            }

    def _taints(self):
        for t in self.doc.get("deviceTaints") or []:
            key = (t.get("driver", b.GPU_DRIVER), t["node"], t["device"])
            dev = self.devices.get(key)
            if dev is None:
                self.fail("deviceTaints", f"no device {'/'.join(key)} is published")
            taint = {"key": t["key"], "effect": t.get("effect", "NoSchedule"), "timeAdded": b.TIMESTAMP}
            if t.get("value") is not None:
                taint["value"] = str(t["value"])
            dev.setdefault("taints", []).append(taint)

    def _spec_for(self, what, entry):
        if entry.get("template"):
            spec = self.templates.get((entry["namespace"], entry["template"]))
            if spec is None:
                self.fail(what, f"unknown claim template {entry['namespace']}/{entry['template']}")
            return copy.deepcopy(spec)
        if not entry.get("requests"):
            self.fail(what, "needs `requests` or `template`")
        return b.claim_spec(entry["requests"], entry.get("constraints"))

    def _allocate(self, what, claim, node, devices, missing_ok=False):
        if node not in self.nodes:
            self.fail(what, f"allocated on unknown node {node!r}")
        requests = {r["name"]: r for r in claim["spec"]["devices"]["requests"]}
        results = []
        for request, names in devices.items():
            if request not in requests:
                self.fail(
                    what,
                    f"devices given for request {request!r}, which the claim does not have "
                    f"(requests: {', '.join(requests)})",
                )
            admin = bool(requests[request].get("exactly", {}).get("adminAccess"))
            for name in names:
                driver, device = self._resolve_device(what, node, name, missing_ok)
                key = (driver, node, device)
                if not admin:
                    if key in self.taken:
                        self.fail(what, f"device {'/'.join(key)} is already allocated to {self.taken[key]}")
                    self.taken[key] = what
                    for use in (self.devices.get(key) or {}).get("consumesCounters", []):
                        counter = self.counter_use[(driver, node, use["counterSet"])]
                        counter.update({k: _quantity(v["value"]) for k, v in use["counters"].items()})
                result = {"request": request, "driver": driver, "device": device}
                if admin:
                    result["adminAccess"] = True
                results.append(result)
        b.allocate(claim, node, results)

    def _resolve_device(self, what, node, name, missing_ok):
        if "/" in name:
            driver, device = name.split("/", 1)
            if (driver, node, device) not in self.devices and not missing_ok:
                self.fail(what, f"device {driver}/{node}/{device} is not published")
            return driver, device
        drivers = [d for (d, pool, dev) in self.devices if pool == node and dev == name]
        if len(drivers) != 1:
            self.fail(
                what,
                f"device {name!r} on node {node} is {'ambiguous' if drivers else 'not published'}; "
                "write driver/device" + (" and set missingDevicesOk" if not drivers else ""),
            )
        return drivers[0], name

    def _check_counters(self):
        for key, used in self.counter_use.items():
            available = self.counter_sets.get(key)
            if available is None:
                self.fail("counters", f"counter set {'/'.join(key)} is consumed but not published")
            for counter, amount in used.items():
                if amount > available.get(counter, 0):
                    self.fail(
                        "counters",
                        f"allocations overuse counter {counter} of {'/'.join(key)}: "
                        f"{amount} > {available.get(counter, 0)}",
                    )

    def _standalone_claim(self, entry):
        what = f"claim {entry.get('namespace')}/{entry.get('name')}"
        if not entry.get("namespace") or not entry.get("name"):
            self.fail(what, "needs namespace and name")
        claim = b.make_claim(entry["namespace"], entry["name"], self._spec_for(what, entry), self.rng)
        if entry.get("node"):
            self._allocate(what, claim, entry["node"], entry.get("devices") or {}, entry.get("missingDevicesOk"))
        for ref in entry.get("reservedFor") or []:
            b.reserve(claim, ref["name"], ref.get("uid") or b.det_uuid(self.rng))
        if entry.get("deleting"):
            claim["metadata"]["deletionTimestamp"] = "2026-01-05T09:30:00Z"
            claim["metadata"]["deletionGracePeriodSeconds"] = 0
            claim["metadata"].setdefault("finalizers", [b.DELETE_PROTECTION])
        self.claims[(entry["namespace"], entry["name"])] = claim
        self.out["resourceclaims"].append(claim)

    def _workload(self, entry):
        ns, name = entry.get("namespace"), entry.get("pod")
        what = f"workload {ns}/{name}"
        if not ns or not name:
            self.fail(what, "needs namespace and pod")
        node, phase = entry.get("node"), entry.get("phase", "Running")
        if node and node not in self.nodes:
            self.fail(what, f"unknown node {node!r}")
        pod_claims = []
        for c in entry.get("claims") or []:
            if c.get("template"):
                pod_claims.append({"name": c["name"], "resourceClaimTemplateName": c["template"]})
            elif c.get("claim"):
                pod_claims.append({"name": c["name"], "resourceClaimName": c["claim"]})
            else:
                self.fail(what, f"pod claim {c.get('name')!r} needs `template` or `claim`")
        pod = b.make_pod(ns, name, self.rng, node=node, phase=phase, pod_claims=pod_claims)
        if entry.get("resources"):  # extended resources (device plugin, HAMi): limits, as GPU users write them
            pod["spec"]["containers"][0]["resources"]["limits"] = {k: str(v) for k, v in entry["resources"].items()}
        if entry.get("schedulerName"):
            pod["spec"]["schedulerName"] = entry["schedulerName"]
        if (
            node
            and entry.get("schedulerName") == "hami-scheduler"
            and b.HAMI_REGISTER in (self.nodes[node]["metadata"].get("annotations") or {})
        ):
            # HAMi's scheduler records which GPU each vGPU got (or a given, e.g. malformed, annotation)
            b.hami_assign(pod, self.nodes[node], self.hami_used.setdefault(node, {}), entry.get("hamiAnnotation"))
        if entry.get("unschedulable"):
            message = entry["unschedulable"]
            if message is True:  # the scheduler's own message over every node the scenario has
                message = self._scheduler_message(pod)
            b.mark_unschedulable(pod, message)
            event = b.scheduling_event(pod, message, self.rng)
            # The scheduler keeps retrying: its event is as recent as the scenario (an API server expires old ones).
            event["lastTimestamp"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.out["events"].append(event)
        statuses = []
        for c in entry.get("claims") or []:
            if c.get("template"):
                claim_name = f"{name}-{c['name']}-{b.suffix(self.rng)}"
                spec = self._spec_for(f"{what} claim {c['name']}", {"namespace": ns, "template": c["template"]})
                claim = b.make_claim(ns, claim_name, spec, self.rng, owner_pod=pod, pod_claim_name=c["name"])
                if c.get("devices"):
                    if not node:
                        self.fail(what, "a claim with devices needs the pod's node")
                    self._allocate(f"{what} claim {c['name']}", claim, node, c["devices"], c.get("missingDevicesOk"))
                self.out["resourceclaims"].append(claim)
                statuses.append({"name": c["name"], "resourceClaimName": claim_name})
            else:
                claim = self.claims.get((ns, c["claim"]))
                if claim is None:
                    self.fail(what, f"names claim {ns}/{c['claim']}, which is not in `claims`")
            if claim["status"].get("allocation") and node:
                b.reserve(claim, name, pod["metadata"]["uid"])
                # What the driver and the kubelet report about the devices (docs/device-health.md).
                if c.get("deviceStatus"):
                    b.device_statuses(claim, c["deviceStatus"])
                if c.get("health"):
                    b.report_health(pod, c["name"], claim, c["health"])
        if statuses:
            pod["status"]["resourceClaimStatuses"] = statuses
        self.out["pods"].append(pod)

    def _scheduler_message(self, pod):
        """Nodes the pod's filters pass count as DynamicResources rejections: a pod the scenario
        leaves Pending is one whose claims fit nowhere."""
        bound = scheduler.pods_by_node(self.out["pods"])
        reasons = {
            n["metadata"]["name"]: scheduler.node_rejection(n, pod, bound.get(n["metadata"]["name"], []))
            or scheduler.REASON_CLAIMS
            for n in self.out["nodes"]
        }
        return scheduler.unschedulable_message(reasons)


_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _quantity(value):
    """Integer value of a simple Kubernetes quantity ("80Gi", "14"): enough for counters here."""
    text = str(value)
    for suffix, factor in _SUFFIXES.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text))
