"""The fleet map's rows for GPUs outside DRA in headless Chromium (issue 14): on the "mixed" scenario
the nodes only a device plugin or HAMi serves get a row below the DRA map, their cells drawn and
labelled per source, one per HAMi-registered GPU. Expected values are computed from the objects."""

import json

from devcluster.scenario import scenario_objects
from mirror.models import Cluster
from tests.browser import BROWSER_MARKS, browser_server, chromium, log_in, shot
from tests.fleet_data import load_scenario, make_user

pytestmark = BROWSER_MARKS
PASSWORD = "hami-map-pass-123"


def test_map_rows_outside_dra_in_the_browser(artifacts_dir):
    load_scenario(Cluster.objects.create(name="mixed"), "mixed")
    objects = scenario_objects("mixed")
    dra_nodes = {s["spec"]["nodeName"] for s in objects["resourceslices"] if s["spec"].get("devices")}
    offering = {
        n["metadata"]["name"]: n
        for n in objects["nodes"]
        if any(r.startswith("nvidia.com/") and int(v) for r, v in n["status"]["allocatable"].items())
    }
    outside = {name: node for name, node in offering.items() if name not in dra_nodes}
    make_user("hami-map", "viewer", password=PASSWORD)
    server = browser_server(artifacts_dir / "daphne-hami-map.log")
    server.start()
    try:
        with chromium() as browser:
            page = log_in(browser.new_page(viewport={"width": 1440, "height": 900}), server.url, "hami-map", PASSWORD)
            page.goto(server.url + "/fleet/map/?cluster=mixed")
            section = page.query_selector("#map-outside-dra")
            assert section is not None and section.is_visible(), page.inner_text("main")[:3000]
            rows = {r.get_attribute("data-node"): r for r in section.query_selector_all(".maprow")}
            assert set(rows) == set(outside)
            for name, row in rows.items():
                node = outside[name]
                register = (node["metadata"].get("annotations") or {}).get("hami.io/node-nvidia-register")
                source = "hami" if register else "device-plugin"
                group = row.query_selector(f'.srccells[data-source="{source}"]')
                assert group is not None and group.query_selector(".srclabel").is_visible()
                cells = group.query_selector_all(".cell")
                want = (
                    len(json.loads(register))
                    if register
                    else sum(int(v) for r, v in node["status"]["allocatable"].items() if r.startswith("nvidia.com/"))
                )
                assert len(cells) == want
                box = cells[0].bounding_box()
                assert box and box["width"] > 0 and box["height"] > 0  # drawn, not just in the markup
                if register:
                    assert {c.get_attribute("data-uuid") for c in cells} == {d["id"] for d in json.loads(register)}
            shot(section, path=str(artifacts_dir / "map-outside-dra.png"))
    finally:
        server.stop()
