"""Release texts and list counts in the reader's language (issue 14): a dry run and a refusal read in
Chinese on the pages while the audit entry and the REST API keep their English; an audit row shows its
stored message in Chinese later (an older row without one, its stored English); counts above 999 are
grouped in both languages, never inside a URL or an attribute."""

import re

import pytest
from django.test import Client

from claims import stuck
from claims.models import AuditEntry, Finding
from mirror import roles
from mirror.messages import message
from tests.ops_fixtures import claim_raw, make_user, new_uid, pod_raw
from tests.ops_live import live_cluster, resync, seed, server  # noqa: F401

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}


def login(user):
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
def test_dry_run_reads_in_chinese_while_the_audit_and_the_api_keep_english(server, live_cluster):
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    finding = Finding.objects.get(rule=stuck.ORPHANED_ALLOCATION)
    client = login(make_user("olivia", roles.OPERATOR))

    page = client.post("/stuck/release/", {"ids": [finding.id], "step": "dry-run"}, **ZH).content.decode()
    assert '<span class="badge outcome-dry-run">演练</span>' in page and "孤立分配" in page  # the outcome and the rule
    assert "演练：未发送任何请求。" in page and "Dry run: nothing sent." not in page
    # The device-in-use risk, the checks and the action's title, in Chinese; the node name as it is.
    assert "设备可能仍在 node-1 上使用" in page and "may still be in use" not in page
    assert "reservedFor 为空" in page and "Verified now" not in page
    assert "解除分配（清除 status.allocation）" in page
    assert "&quot;allocation&quot;: null" in page  # the exact request stays the JSON that is sent

    entry = AuditEntry.objects.get()
    assert entry.reason == "Dry run: nothing sent." and entry.reason_message["msgid"] == "Dry run: nothing sent."
    assert entry.request["title"] == "Deallocate (clear status.allocation)"
    assert entry.request["warnings"][0].startswith("The device may still be in use on node-1")
    assert entry.request["checks"] == ["reservedFor is empty", "no live pod in the namespace references the claim"]

    api = client.post(
        f"/api/v1/findings/{finding.id}/release", {"dry_run": True}, content_type="application/json", **ZH
    ).json()["result"]
    assert api["reason"] == "Dry run: nothing sent." and api["reason_message"]["msgid"] == "Dry run: nothing sent."
    assert api["plan"]["title"] == "Deallocate (clear status.allocation)"
    assert api["plan"]["warnings"][0].startswith("The device may still be in use on node-1")
    listed = client.get("/api/v1/audit/", **ZH).json()["results"]
    assert {row["reason"] for row in listed} == {"Dry run: nothing sent."}


@pytest.mark.django_db(transaction=True)
def test_refusal_reads_in_chinese_with_the_pods_words_kept(server, live_cluster):
    uid = new_uid()
    seed(server.store, claim=claim_raw("c1", devices=["gpu-0"], reserved=[("p1", uid)]))
    resync(live_cluster)
    stuck.detect(live_cluster)
    finding = Finding.objects.get(rule=stuck.STALE_RESERVATION)
    server.store.create("pods", pod_raw("p1", uid=uid, claim="c1"))  # the pod is back: not safe now
    client = login(make_user("olivia", roles.OPERATOR))

    page = client.post("/stuck/release/", {"ids": [finding.id], "step": "dry-run"}, **ZH).content.decode()
    assert "outcome-refused" in page and 'id="confirm-form"' not in page
    assert f"目前不安全：Pod p1（{uid}）仍存在，状态为 Running。" in page and "Not safe now" not in page

    entry = AuditEntry.objects.get()
    assert entry.outcome == "refused" and entry.reason == f"Not safe now: pod p1 ({uid}) exists and is Running."
    english = client.post(
        "/stuck/release/", {"ids": [finding.id], "step": "dry-run"}, HTTP_ACCEPT_LANGUAGE="en"
    ).content.decode()
    assert f"Not safe now: pod p1 ({uid}) exists and is Running." in english


@pytest.mark.django_db
@pytest.mark.sqlite_default
def test_audit_rows_show_their_message_in_the_readers_language_and_older_rows_their_english():
    common = {
        "username": "olivia",
        "cluster_name": "alpha",
        "namespace": "team-a",
        "claim_name": "c1",
        "action": "deallocate",
    }
    AuditEntry.objects.create(**common, outcome="done", reason="Done.", reason_message=message("Done."))
    AuditEntry.objects.create(
        **common,
        outcome="error",
        reason="The API server answered 500: etcd is down",
        reason_message=message("The API server answered %(status)s: %(message)s", status=500, message="etcd is down"),
    )
    AuditEntry.objects.create(**common, outcome="refused", reason="Written before messages were stored.")
    client = login(make_user("lin", roles.ADMIN))

    zh = client.get("/audit/", **ZH).content.decode()
    assert "<td>完成。</td>" in zh and "<td>Done.</td>" not in zh
    assert (
        '<span class="badge outcome-done">完成</span>' in zh and '<span class="badge outcome-error">错误</span>' in zh
    )
    # The cluster's own words stay as the cluster wrote them, inside the translated sentence.
    assert "API server 返回 500：etcd is down" in zh
    assert "<td>Written before messages were stored.</td>" in zh  # no message: the stored English
    stuck_page = client.get("/stuck/", **ZH).content.decode()
    assert "<td>完成。</td>" in stuck_page  # the recent attempts there too
    english = client.get("/audit/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "<td>Done.</td>" in english and '<span class="badge outcome-done">done</span>' in english
    assert {row["reason"] for row in client.get("/api/v1/audit/", **ZH).json()["results"]} == {
        "Done.",
        "The API server answered 500: etcd is down",
        "Written before messages were stored.",
    }


@pytest.mark.django_db
@pytest.mark.sqlite_default
def test_counts_above_999_are_grouped_on_a_list_page_but_not_in_urls_or_ids():
    AuditEntry.objects.bulk_create(
        [
            AuditEntry(
                username="olivia",
                cluster_name="alpha",
                namespace="team-a",
                claim_name=f"c{i}",
                action="deallocate",
                outcome="dry-run",
                reason="Dry run: nothing sent.",
            )
            for i in range(1234)
        ]
    )
    client = login(make_user("lin", roles.ADMIN))
    newest = AuditEntry.objects.order_by("-at", "-id").first().id
    assert newest > 999
    for headers in (ZH, {"HTTP_ACCEPT_LANGUAGE": "en"}):
        page = client.get("/audit/", **headers).content.decode()
        count = re.search(r'<p class="muted" id="audit-count">([^<]*)</p>', page).group(1)
        assert "1,234" in count, count
        assert "1,234" in page.split('class="pager"', 1)[1]  # "… of 1,234"
        assert (
            f'id="audit-{newest}"' in page and f'id="audit-{newest:,}"' not in page
        )  # an id in an attribute: ungrouped
        assert "page=25" in page  # 1,234 entries at 50 a page: the last page's link


def test_a_grouped_count_in_python_follows_the_language():
    from django.utils import translation

    from mirror.messages import grouped

    for language in ("en", "zh-hans"):
        with translation.override(language):
            assert grouped(12400) == "12,400" and grouped(7) == "7"
