"""The CEL engine from many threads at once: every library, compiled and evaluated anywhere.

cel-expr-python looks up the arena of an activation in a per-thread registry when it calls a
function written in Python, so an activation made in one thread failed in every other
("No PyCelArena found for google::protobuf::Arena"). No database is needed.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from dra.cel import CelRuntimeError, compile_selector, make_device

DRIVER = "gpu.example.com"

# (expression, expected). Together they use every function family of the environment.
CASES = [
    # Kubernetes quantity library
    ('quantity("1Gi").isGreaterThan(quantity("1"))', True),
    ('isQuantity("20Mi") && !isQuantity("20 Mi")', True),
    ('quantity("-3").sign() == -1 && quantity("1k").isInteger() && quantity("1k").asInteger() == 1000', True),
    ('quantity("1.5").asApproximateFloat() == 1.5', True),
    (
        'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi") && quantity("1Gi").sub(1) == quantity("1073741823")',
        True,
    ),
    ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) > 0', True),
    ('device.capacity["gpu.example.com"].memory.isLessThan(quantity("40Gi"))', False),
    # Kubernetes semver library
    ('semver("1.2.3").isGreaterThan(semver("1.2.0")) && isSemver("v1.0", true)', True),
    ('device.attributes["gpu.example.com"].driverVersion.major() == 570', True),
    ('semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3', True),
    ('semver("1.2.3").compareTo(semver("1.3.0")) == -1', True),
    # Kubernetes lists library
    ("[1, 2, 3].isSorted() && [3, 1].sum() == 4 && [4, 2].min() == 2 && [4, 2].max() == 4", True),
    ("[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2", True),
    # Kubernetes regex library (RE2) and the engine's matches
    ('"ab0".find("b") == "b"', True),
    ('"a1b2".findAll("[0-9]") == ["1", "2"] && "a1b2".findAll("[0-9]", 1) == ["1"]', True),
    ('device.attributes["gpu.example.com"].productName.matches("^NVIDIA H[0-9]+")', True),
    # sets extension
    ("sets.contains([1, 2, 3], [2]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 5])", True),
    # strings extension
    ('"Hello".lowerAscii() == "hello" && "hello".upperAscii() == "HELLO" && " x ".trim() == "x"', True),
    ('"a,b".split(",") == ["a", "b"] && ["a", "b"].join("-") == "a-b" && "abc".substring(1) == "bc"', True),
    ('"abc".charAt(1) == "b" && "abc".indexOf("c") == 2 && "aXa".replace("X", "b") == "aba"', True),
    # DRA's includes
    ('device.attributes["gpu.example.com"].productName.includes("NVIDIA H100 80GB HBM3")', True),
    # optional syntax, cel.bind, macros, unknown domains
    ('device.attributes[?"other.example.com"].orValue({}).size() == 0', True),
    ("optional.of(1).hasValue() && !optional.none().hasValue()", True),
    ('cel.bind(g, device.attributes["gpu.example.com"], g.index == 3 && g.healthy)', True),
    ('device.attributes["gpu.example.com"].exists(k, k == "index")', True),
    ("[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2 && [1, 2].exists_one(x, x == 1)", True),
    ('device.attributes["unknown.example.com"] == {}', True),
]
ERROR_CASES = [
    # A runtime error from a Python-implemented function still is a CelRuntimeError in any thread.
    ('quantity("not a quantity").sign() == 1', "quantity"),
    ('"abc".find(device.driver + "[") == ""', "Illegal regex"),
]


def gpu():
    return make_device(
        DRIVER,
        {
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "index": {"int": 3},
            "healthy": {"bool": True},
            "driverVersion": {"version": "570.86.15"},
        },
        {"memory": {"value": "80Gi"}},
    )


def run(expression, device):
    try:
        return compile_selector(expression).evaluate(device)
    except CelRuntimeError as exc:
        return ("error", str(exc))


def check(results, device_results=None):
    for (expression, expected), got in zip(CASES, results):
        assert got is expected, expression
    if device_results is not None:
        for (expression, fragment), got in zip(ERROR_CASES, device_results):
            assert got[0] == "error" and fragment in got[1], (expression, got)


def test_every_function_from_sixteen_threads_at_once():
    device = gpu()  # made in this thread, used in all of them
    check([run(e, device) for e, _ in CASES], [run(e, device) for e, _ in ERROR_CASES])
    threads, rounds = 16, 30
    barrier = threading.Barrier(threads)
    failures = []

    def worker(n):
        barrier.wait()  # all threads evaluate at the same time
        own = gpu() if n % 2 else device  # half of them also build their own devices
        try:
            for _ in range(rounds):
                check([run(e, own) for e, _ in CASES], [run(e, own) for e, _ in ERROR_CASES])
        except AssertionError as exc:  # collected: an assert in a thread would be lost
            failures.append(exc)
        return n

    with ThreadPoolExecutor(max_workers=threads) as pool:
        assert sorted(pool.map(worker, range(threads))) == list(range(threads))
    assert not failures, failures[0]


def test_compiling_in_many_threads_and_a_fresh_thread_per_call():
    """Compilation from any thread, and one new thread per request (what asgiref's thread-sensitive
    mode does under ASGI): each must see the device built elsewhere."""
    device = gpu()
    results = {}

    def compile_and_evaluate(n):
        # Distinct texts (the trailing comment), so every thread compiles rather than hits the cache.
        results[n] = [compile_selector(f"{e} // thread {n}").evaluate(device) for e, _ in CASES]

    workers = [threading.Thread(target=compile_and_evaluate, args=(n,)) for n in range(12)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert sorted(results) == list(range(12))
    for got in results.values():
        check(got)


@pytest.mark.parametrize("expression, expected", CASES[:3])
def test_a_device_made_in_a_worker_thread_works_in_this_one(expression, expected):
    box = {}
    maker = threading.Thread(target=lambda: box.setdefault("device", gpu()))
    maker.start()
    maker.join()
    assert compile_selector(expression).evaluate(box["device"]) is expected


def test_a_new_thread_with_the_id_of_the_ended_building_thread():
    """Thread ids are reused once a thread ends; a device's fast path (the building thread's
    activation) must then give way to the new thread's own activation, not fail."""
    built = {}

    def build():
        built["device"], built["ident"] = gpu(), threading.get_ident()

    maker = threading.Thread(target=build)
    maker.start()
    maker.join()
    seen = []
    for _ in range(20):  # the next thread usually gets the same id; try a few

        def evaluate():
            seen.append((threading.get_ident(), [run(e, built["device"]) for e, _ in CASES]))

        worker = threading.Thread(target=evaluate)
        worker.start()
        worker.join()
        if seen[-1][0] == built["ident"]:
            break
    for _, results in seen:
        check(results)
