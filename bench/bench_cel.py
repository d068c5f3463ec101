"""Selector evaluation speed over a generated fleet (prints figures only).

Run from the repository root:  .venv/bin/python bench/bench_cel.py [DEVICES | --nodes N] [--module OTHER/cel.py]
                                .venv/bin/python bench/bench_cel.py [DEVICES | --nodes N] --compare OTHER/cel.py

--nodes N evaluates the devices of an N-node fleet of the other benches (8 GPUs a node; default 5,000
nodes, i.e. 40,000 devices).

--module loads another version of cel.py (e.g. `git show REV:dra/cel.py > /tmp/old/cel.py`)
next to this checkout's quantity/semver modules. --compare loads both in one process and alternates
them, best of 6 each in thread CPU time, which is fairer on a shared machine than two separate runs.
"""

import importlib.util
import os
import resource
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def load_cel(path):
    """cel.py from `path` as a package module whose siblings come from this checkout."""
    if path is None:
        from dra import cel

        return cel
    package = "celbench_other"
    spec = importlib.util.spec_from_loader(package, loader=None, is_package=True)
    module = importlib.util.module_from_spec(spec)
    module.__path__ = [os.path.dirname(os.path.abspath(path)), os.path.join(ROOT, "claims", "allocator")]
    sys.modules[package] = module
    spec = importlib.util.spec_from_file_location(f"{package}.cel", path)
    cel = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = cel
    spec.loader.exec_module(cel)
    return cel


DRIVER = "gpu.nvidia.com"
PRODUCTS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA H200", "NVIDIA L4"]
MEMORY = {"NVIDIA H100 80GB HBM3": "80Gi", "NVIDIA A100-SXM4-40GB": "40Gi", "NVIDIA H200": "141Gi", "NVIDIA L4": "24Gi"}

SELECTORS = {
    "driver only": 'device.driver == "gpu.nvidia.com"',
    "product + memory (issue target)": (
        'device.driver == "gpu.nvidia.com" && '
        'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100") && '
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
    ),
    "semver driverVersion": 'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
    "guarded other domain": (
        '"numa" in device.attributes["topology.k8s.io"] && device.attributes["topology.k8s.io"].numa == 0'
    ),
    "cel.bind + matches": (
        'cel.bind(g, device.attributes["gpu.nvidia.com"], g.productName.matches("H(100|200)") && g.index < 4)'
    ),
}


def generate(count):
    for i in range(count):
        product = PRODUCTS[i % len(PRODUCTS)]
        attributes = {
            "productName": {"string": product},
            "index": {"int": i % 8},
            "uuid": {"string": f"GPU-{i:08x}"},
            "driverVersion": {"version": f"{540 + i % 40}.1.{i % 3}"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "topology.k8s.io/numa": {"int": (i % 8) // 4},
        }
        capacity = {"memory": {"value": MEMORY[product]}, "multiprocessors": {"value": "132"}}
        yield DRIVER, attributes, capacity


def compare(count, other_path):
    raw = list(generate(count))
    modules = {"this checkout": load_cel(None), "other": load_cel(other_path)}
    fleets = {name: [m.make_device(d, a, c) for d, a, c in raw] for name, m in modules.items()}
    print(f"other = {other_path}; {count} devices; best of 6, alternating")
    for label, expression in SELECTORS.items():
        selectors = {name: m.compile_selector(expression) for name, m in modules.items()}
        best = dict.fromkeys(modules, float("inf"))
        for round_ in range(6):  # who goes first alternates too
            for name in list(modules) if round_ % 2 else list(modules)[::-1]:
                selector, devices = selectors[name], fleets[name]
                start = time.thread_time()  # CPU time: waiting for a shared core does not count
                for device in devices:
                    selector.evaluate(device)
                best[name] = min(best[name], time.thread_time() - start)
        rates = {name: count / best[name] for name in modules}
        print(
            f"{label:34s} this {rates['this checkout']:>9,.0f}/s   other {rates['other']:>9,.0f}/s   "
            f"ratio {rates['this checkout'] / rates['other']:.2f}"
        )


GPUS_PER_NODE = 8  # the fleet of devcluster.fleet and the other benches


def main():
    args = sys.argv[1:]
    if "--nodes" in args:
        nodes = int(args[args.index("--nodes") + 1])
        del args[args.index("--nodes") : args.index("--nodes") + 2]
        args.insert(0, str(nodes * GPUS_PER_NODE))
    if "--compare" in args:
        other = args[args.index("--compare") + 1]
        del args[args.index("--compare") : args.index("--compare") + 2]
        compare(int(args[0]) if args else 40_000, other)
        return
    other = None
    if "--module" in args:
        other = args[args.index("--module") + 1]
        del args[args.index("--module") : args.index("--module") + 2]
    count = int(args[0]) if args else 40_000
    cel = load_cel(other)
    compile_selector, make_device = cel.compile_selector, cel.make_device
    print(f"cel module: {cel.__file__}")
    raw = list(generate(count))

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    devices = [make_device(d, a, c) for d, a, c in raw]
    built = time.perf_counter() - start
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    print(
        f"make_device: {count} devices in {built * 1000:.0f} ms ({count / built:,.0f}/s, "
        f"includes the engine's one-off conversion), peak RSS +{rss_growth:.0f} MiB"
    )

    for name, expression in SELECTORS.items():
        start = time.perf_counter()
        selector = compile_selector(expression)
        compiled = time.perf_counter() - start
        selector.evaluate(devices[0])  # warm caches
        elapsed = float("inf")
        for _ in range(3):  # best of three: the machine is shared
            start = time.perf_counter()
            matched = sum(1 for device in devices if selector.evaluate(device))
            elapsed = min(elapsed, time.perf_counter() - start)
        print(
            f"{name:34s} compile {compiled * 1000:6.2f} ms   {count / elapsed:>9,.0f} devices/s   "
            f"{elapsed * 1000:7.1f} ms for {count} (best of 3), {matched} match"
        )

    # The same selector from other threads: a long-lived worker (second pass: its activations are
    # made) and a thread that sees the devices for the first time (what a fresh request thread pays).
    selector = compile_selector(SELECTORS["product + memory (issue target)"])

    def timed(out):
        start = time.perf_counter()
        try:
            out.append((sum(1 for device in devices if selector.evaluate(device)), time.perf_counter() - start))
        except Exception as exc:  # the old module fails here: report it, do not stop
            out.append((f"{type(exc).__name__}: {str(exc)[:80]}", time.perf_counter() - start))

    def in_new_thread(passes):
        out = []
        worker = threading.Thread(target=lambda: [timed(out) for _ in range(passes)])
        worker.start()
        worker.join()
        return out[-1]

    for label, passes in (("another thread, first pass", 1), ("another thread, second pass", 2)):
        matched, elapsed = in_new_thread(passes)
        print(f"{label:34s} {count / elapsed:>9,.0f} devices/s   {elapsed * 1000:7.1f} ms, result {matched}")

    if hasattr(cel, "celsplit"):  # the old module's backtracking find() would take seconds per device
        redos = compile_selector(
            '(device.attributes["gpu.nvidia.com"].uuid + "aaaaaaaaaaaaaaaaaaaaaaaaa!").find("(a+)+$") == ""'
        )
        start = time.perf_counter()
        matched = sum(1 for device in devices if redos.evaluate(device))
        elapsed = time.perf_counter() - start
        print(
            f"{'find() with (a+)+$ (RE2)':34s} {count / elapsed:>9,.0f} devices/s   {elapsed * 1000:7.1f} ms, {matched} match"
        )


if __name__ == "__main__":
    main()
