"""Whole-GPU counts in headless Chromium (issue 11): on the demo fleet (MIG partitions, NICs) the overview
tiles, the free-GPU chart, the map's "≥ N free GPUs of model X" filter and a driver outage show what the
test computes from the slices. The fleet is written through the watchers' apply path (no API server
needed); the page is served by daphne against the test database."""

from devcluster.scenario import scenario_objects
from mirror.models import Cluster
from mirror.sync.apply import delete_object
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, shot
from tests.fleet_data import load_scenario, make_user
from tests.inventory.test_device_kinds import H100, expected_from_slices, per_node
from tests.inventory.test_partition_capacity import expected as expected_partitions

pytestmark = BROWSER_MARKS
PASSWORD = "kinds-pass-123"


def test_whole_gpu_counts_in_the_browser(artifacts_dir):
    cluster = load_scenario(Cluster.objects.create(name="demo"))
    objects = scenario_objects("demo")
    want = expected_from_slices(objects)
    gpus, free = per_node(want["gpus"]), per_node(want["free"])
    make_user("kinds", "viewer", password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-kinds.log")
    server.start()
    try:
        with chromium() as browser:
            page = log_in(browser.new_page(viewport={"width": 1440, "height": 900}), server.url, "kinds", PASSWORD)
            tiles = {
                el.get_attribute("data-kind"): int(el.get_attribute("data-count"))
                for el in page.query_selector_all("#gpu-tiles [data-kind]")
            }
            assert tiles == {
                "gpus": sum(gpus.values()),
                "gpus_free": sum(free.values()),
                "partitions": sum(want["partitions"].values()),
                "other": sum(want["other"].values()),
                "gpus_stranded": sum(s for _p, s in expected_partitions(objects).values()),
            }
            # partitions: what can still be created per profile, each figure saying what it counts
            creatable = {
                el.get_attribute("data-profile"): int(el.get_attribute("data-free"))
                for el in page.query_selector_all("#partition-capacity .prof")
            }
            assert creatable == {
                p: sum(node[0].get(p, 0) for node in expected_partitions(objects).values()) for p in creatable
            }
            assert set(creatable) == {"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}
            legend = page.get_attribute("#partition-capacity .partcap", "title")
            assert "do not add them up" in legend and "Stranded" in legend
            assert "overlapping" in page.get_attribute('#gpu-tiles [data-kind="partitions"]', "title")
            shot(page.locator("#partition-capacity"), path=str(artifacts_dir / "partition-capacity.png"))
            # the chart: H100 nodes by number of free whole GPUs
            bars = {
                int(li.get_attribute("data-free")): int(li.get_attribute("data-nodes"))
                for li in page.query_selector_all(f'#gpu-histogram figure[data-model="{H100}"] li')
            }
            h100 = {node: want["free"][(node, m)] for (node, m) in want["gpus"] if m == H100}
            assert {k: n for k, n in bars.items() if n} == {
                k: sum(1 for v in h100.values() if v == k) for k in set(h100.values())
            }
            # the map filter: nodes with at least 4 free H100s
            page.goto(server.url + "/fleet/map/")
            page.fill("input[name=min_free_gpus]", "4")
            page.select_option("select[name=gpu_model]", H100)
            page.click("form.filters button[type=submit]")
            page.wait_for_url("**min_free_gpus=4**")
            shown = sorted(a.inner_text().split("/")[-1] for a in page.query_selector_all(".maprow .mapnode"))
            assert shown == sorted(n for n, k in h100.items() if k >= 4)
            # a driver outage: the node keeps its row, its last devices greyed, the totals say so
            slices = [s for s in objects["resourceslices"] if s["spec"]["nodeName"] == "gpu-a100-02"]
            for s in slices:
                delete_object(cluster, "ResourceSlice", dict(s, metadata=dict(s["metadata"], resourceVersion="99999")))
            devices = sum(len(s["spec"].get("devices", [])) for s in slices)
            page.goto(server.url + "/fleet/map/?q=gpu-a100-02")
            row = page.query_selector(".maprow.row-unpublished")
            assert row is not None, page.inner_text("main")[:3000]
            assert "driver not publishing since" in row.inner_text()
            assert len(row.query_selector_all(".cell.unpublished")) == devices
            assert int(page.get_attribute("#map-unpublished", "data-count")) == devices
            page.goto(server.url + "/")
            assert int(page.get_attribute('#gpu-tiles [data-kind="unpublished"]', "data-count")) == devices
            assert (
                int(page.get_attribute('#gpu-tiles [data-kind="gpus"]', "data-count"))
                == sum(gpus.values()) - gpus["gpu-a100-02"]
            )
            # the node page lists partitions under their GPU
            page.goto(server.url + "/nodes/demo/gpu-a100-01/")
            rows = page.query_selector_all("[data-region=devices] tbody tr[data-kind]")
            kinds = [r.get_attribute("data-kind") for r in rows]
            assert (
                kinds[0] == "gpu"
                and kinds.count("gpu") == gpus["gpu-a100-01"]
                and kinds.count("partition") == want["partitions"]["gpu-a100-01"]
            )
            parents = [r.get_attribute("data-parent") for r in rows if r.get_attribute("data-kind") == "partition"]
            assert parents[0] == "gpu-0" and all(p.startswith("gpu-") for p in parents)
            shot(page, path=str(artifacts_dir / "device-kinds-node.png"))
    finally:
        server.stop()
