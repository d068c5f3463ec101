"""The fleet map's row markup (gpudash_ui.map_row, built in Python for speed): escaping, the
summary's phrases in the page's language, and the parts a row only has sometimes."""

import datetime
import re

from django.utils import timezone, translation

from inventory.fleet import DeviceState
from mirror.templatetags.gpudash_ui import map_row


def _row(**over):
    device = {
        "name": "gpu-0",
        "driver": "gpu.example.com",
        "pool": "node-<1>",
        "st": DeviceState("free", frozenset(), []),
        "model": "H100",
    }
    row = {
        "cluster_name": "prod",
        "node": "node-<1>",
        "devices": [device, dict(device, name="gpu-0-mig-1g", is_partition=True, parent_name="gpu-0")],
        "gpus": 1,
        "gpus_free": 1,
        "unpublished": 0,
        "unpublished_since": None,
        "unhealthy": False,
        "states": {"free": 2},
        "sources": {},
    }
    return row | over


def test_row_escapes_names_and_counts_partitions():
    html = map_row(_row(), "/devices/", None)
    assert (
        'id="maprow-prod-node-&lt;1&gt;" data-cluster="prod" data-node="node-&lt;1&gt;" data-gpus="1" data-gpus-free="1" data-devices="2"'
        in html
    )
    assert "node-<1>" not in html
    assert '<span class="muted">prod/</span>node-&lt;1&gt;</a>' in html  # several clusters: the cluster is named
    assert re.search(
        r'<span class="rowsum muted">1 GPU · 1 free <span class="rowdevices" title="published devices, partitions and other devices included">· 2 devices in all</span></span>',
        html,
    )
    assert html.count('class="cell s-free') == 2


def test_row_without_gpus_in_one_cluster_counts_devices_and_free_ones():
    html = map_row(
        _row(gpus=0, gpus_free=0, node="pool:shared", unhealthy=True, states={"free": 0}), "/devices/", "prod"
    )
    assert 'class="maprow row-unhealthy"' in html
    assert 'href="/pools/"' in html and '<span class="muted">prod/</span>' not in html
    # No free devices: no "· 0 free"; the NotReady node said in words, not only by its struck-through name.
    assert '<span class="rowsum muted"><span class="rownotready">node NotReady</span> · 2 devices</span>' in html


def test_row_summary_in_chinese_with_sources_and_an_outage():
    since = timezone.now() - datetime.timedelta(minutes=5)
    sources = {
        "device_plugin": {"gpus": 4, "free": 3, "items": []},
        "hami": {"shares": 10, "shares_used": 2, "devices": []},
    }
    with translation.override("zh-hans"):
        html = map_row(
            _row(gpus=2, devices=_row()["devices"][:1] * 2, unpublished=3, unpublished_since=since, sources=sources),
            "/devices/",
            "prod",
        )
    assert "2 块 GPU · 1 个空闲" in html
    assert "设备插件 4（3 块空闲）" in html and "HAMi 2/10 份额" in html
    assert html.count('class="cell unpublished"') == 3
    assert re.search(
        r'<span class="unpub">驱动自 <time datetime="[^"]+" title="[^"]+">[^<]+</time> 起未发布</span>', html
    )
