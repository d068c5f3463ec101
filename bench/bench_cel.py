"""Selector evaluation speed over a generated fleet (prints figures only).

Run from the repository root:  .venv/bin/python bench/bench_cel.py [DEVICES]
"""

import os
import sys
import time
import resource

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from claims.allocator.cel import compile_selector, make_device  # noqa: E402

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
        'cel.bind(g, device.attributes["gpu.nvidia.com"], '
        'g.productName.matches("H(100|200)") && g.index < 4)'
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


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40_000
    raw = list(generate(count))

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    devices = [make_device(d, a, c) for d, a, c in raw]
    built = time.perf_counter() - start
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    print(f"make_device: {count} devices in {built * 1000:.0f} ms ({count / built:,.0f}/s, "
          f"includes the engine's one-off conversion), peak RSS +{rss_growth:.0f} MiB")

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
        print(f"{name:34s} compile {compiled * 1000:6.2f} ms   {count / elapsed:>9,.0f} devices/s   "
              f"{elapsed * 1000:7.1f} ms for {count} (best of 3), {matched} match")


if __name__ == "__main__":
    main()
