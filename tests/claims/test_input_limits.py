"""Bounded parsing of pasted YAML (issue 31): alias uses, nodes after alias expansion, documents and
List items each have a limit that the refusal names; messages never render an expanded value; a List
of one aliased claim repeated is checked in one pass. The 588-byte billion-laughs input is a JSON 400
from the API and a message on the preview page of a real server, while /healthz stays fast."""

import string
import textwrap

import pytest
import requests
from django.test import Client
from django.utils.html import escape
from rest_framework.authtoken.models import Token

from dra import InputError, Inventory, load_documents, resolve_claims
from dra.errors import shown
from dra.limits import MAX_ALIASES, MAX_DOCUMENTS, MAX_LIST_ITEMS, MAX_NODES
from dra.nodefilters import scheduling_pod
from mirror import roles
from tests.api_fixtures import load_fleet, make_user
from tests.preview_fixtures import TWO_GPUS
from tests.serve_fixtures import assert_healthz_fast, healthz_while, serve  # noqa: F401

CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: laughs
  namespace: team-a
  annotations:
    x:
%s
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
"""


def laughs(levels):
    """A claim whose annotation holds 9**levels strings through `levels` anchors of nine aliases each."""
    names = string.ascii_lowercase
    chain = ["      a: &a [x,x,x,x,x,x,x,x,x]"]
    chain += [f"      {names[i]}: &{names[i]} [{','.join([f'*{names[i - 1]}'] * 9)}]" for i in range(1, levels)]
    return CLAIM % "\n".join(chain)


def claim_doc(name):
    return f"{{apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {{name: {name}}}, spec: {{devices: {{requests: [{{name: g, exactly: {{deviceClassName: gpu}}}}]}}}}}}"


def refusal(text):
    with pytest.raises(InputError) as caught:
        load_documents(text, "YAML")
    return str(caught.value)


def no_inventory():
    return Inventory.from_objects({})


# --- the engine -----------------------------------------------------------------------------------


def test_nine_levels_of_laughs_are_refused_at_the_node_limit_before_they_expand():
    text = laughs(9)
    assert len(text) < 600
    message = refusal(text)
    assert f"more than {MAX_NODES:,} YAML nodes" in message and "the limit per input" in message
    # Refused at the second alias of the sixth level (line 13 of 16): the 9**9 value was never built,
    # and the message is one short line.
    assert message.endswith("at line 13, column 17") and len(message) < 160, message


def test_an_expanded_value_is_shown_cut_not_rendered():
    message = refusal(laughs(5))  # 59,049 strings: within the node limit, so the shape check says no
    assert message.startswith(
        "document 1 (ResourceClaim laughs): metadata.annotations['x']: must be a string, not an object {'a': ['x',"
    )
    assert message.endswith("...") and len(message) < 160


def test_shown_cuts_a_value_that_repr_could_never_finish():
    value = ["x"] * 9
    for _ in range(30):  # 9**31 strings, shared
        value = [value] * 9
    assert shown(value) == "[" * 31 + "'x', 'x',..."
    assert shown({"k": "v" * 100}) == repr({"k": "v" * 100})[:40] + "..."
    for small in (None, 5, "abc", [1, "x", {"a": [True, 1.5]}], {}):
        assert shown(small) == repr(small)
    assert shown("a" * 50, quote=False) == "a" * 40 + "..."


def test_messages_of_the_pod_checks_show_a_shared_value_cut():
    big = "      b: &b [" + ",".join(["*a"] * 9) + "]"
    pod = (
        "kind: Pod\nmetadata: {name: p}\nspec:\n  x:\n      a: &a ["
        + ",".join(["x"] * 9)
        + "]\n"
        + big
        + "\n  priority: ["
        + ",".join(["*b"] * 9)
        + "]\n"
    )
    with pytest.raises(InputError) as caught:
        scheduling_pod(load_documents(pod))
    assert str(caught.value) == "spec.priority: must be an integer, not " + repr([[["x"] * 9] * 9] * 9)[:40] + "..."


def test_alias_uses_up_to_the_limit_are_read_and_one_more_is_refused():
    def text(uses):
        return (
            "kind: ResourceClaim\nmetadata: {name: c, namespace: &ns team-a}\nextra: ["
            + ",".join(["*ns"] * uses)
            + "]\n"
        )

    (doc,) = load_documents(text(MAX_ALIASES))
    assert doc["extra"] == ["team-a"] * MAX_ALIASES
    message = refusal(text(MAX_ALIASES + 1))
    assert f"YAML: more than {MAX_ALIASES:,} alias uses (*name) (the limit per input), at line 3" in message


def test_an_alias_inside_the_node_it_names_is_refused():
    message = refusal("kind: ResourceClaim\nmetadata: {name: c}\nloop: &l {again: *l}\n")
    assert message == "YAML: alias *l is used inside the node it names, at line 3, column 18"


def test_the_node_limit_counts_every_document():
    # 1,001 + 100 x 1,001 nodes in `extra`: half the limit, from a few kilobytes of text.
    half = (
        "kind: ResourceClaim\nmetadata: {name: c%d}\nten: &t ["
        + ",".join(["1"] * 1000)
        + "]\nextra: ["
        + ",".join(["*t"] * 100)
        + "]\n"
    )
    (doc,) = load_documents(half % 1)
    assert len(doc["extra"]) == 100 and doc["extra"][99] == [1] * 1000
    message = refusal(half % 1 + "---\n" + half % 2)
    assert f"more than {MAX_NODES:,} YAML nodes" in message and "at line 9" in message  # the second document's aliases


def test_documents_up_to_the_limit_are_read_and_one_more_is_refused():
    text = "\n---\n".join(f"{{kind: ResourceClaim, metadata: {{name: c{i}}}}}" for i in range(MAX_DOCUMENTS))
    assert [d["metadata"]["name"] for d in load_documents(text)] == [f"c{i}" for i in range(MAX_DOCUMENTS)]
    message = refusal(text + "\n---\n{kind: ResourceClaim, metadata: {name: one-more}}")
    assert (
        message
        == f"YAML: more than {MAX_DOCUMENTS:,} YAML documents (the limit per input), at line {2 * MAX_DOCUMENTS}, column 1"
    )


def test_list_items_up_to_the_limit_are_read_and_one_more_is_refused():
    def listed(count):
        return f"kind: List\nitems:\n- &c {claim_doc('c')}\n" + "- *c\n" * (count - 1)

    items = load_documents(listed(MAX_LIST_ITEMS))
    assert len(items) == MAX_LIST_ITEMS and all(item is items[0] for item in items)
    message = refusal(listed(MAX_LIST_ITEMS + 1))
    assert (
        message
        == f"YAML: document 1: a List of {MAX_LIST_ITEMS + 1:,} items; at most {MAX_LIST_ITEMS:,} items per List (the limit per input)"
    )


def test_a_list_of_one_aliased_claim_repeated_names_each_duplicate_once():
    """Was quadratic (each claim counted against all: 50,000 items took 55 s); one count per claim now."""
    text = f"kind: List\nitems:\n- &a {claim_doc('a')}\n- &b {claim_doc('b')}\n" + "- *a\n- *b\n" * (
        MAX_LIST_ITEMS // 2 - 1
    )
    documents = load_documents(text)
    assert len(documents) == MAX_LIST_ITEMS
    with pytest.raises(InputError, match=r"^claim\(s\) given twice: default/a, default/b$"):
        resolve_claims(no_inventory(), documents)


def test_a_request_repeated_through_an_alias_is_one_duplicate_name():
    requests_ = "[&r {name: g, exactly: {deviceClassName: gpu}}, " + ", ".join(["*r"] * 5000) + "]"
    text = f"kind: ResourceClaim\nmetadata: {{name: c}}\nspec: {{devices: {{requests: {requests_}}}}}\n"
    documents = load_documents(text)
    assert len(documents[0]["spec"]["devices"]["requests"]) == 5001
    with pytest.raises(InputError, match=r"ResourceClaim default/c.*: duplicate request name\(s\) g$"):
        resolve_claims(no_inventory(), documents)


def test_a_list_of_500_distinct_claims_is_read_in_full():
    items = (
        "- " + textwrap.indent(TWO_GPUS.replace("name: two-gpus", f"name: claim-{i}"), "  ")[2:] for i in range(500)
    )
    text = "kind: List\nitems:\n" + "".join(items)
    assert len(text) < 256 * 1024
    claims, bound = resolve_claims(no_inventory(), load_documents(text))
    assert [c.ref for c in claims] == [f"team-a/claim-{i}" for i in range(500)] and bound == []


@pytest.mark.parametrize("value", ["2024-02-30", "1" * 5000])
def test_a_scalar_python_cannot_build_is_an_input_error(value):
    message = refusal(f"kind: ResourceClaim\nmetadata: {{name: c}}\nextra: {value}\n")
    assert message.startswith("YAML: a value cannot be read: ") and len(message) < 200


# --- a real server --------------------------------------------------------------------------------


@pytest.fixture
def live(transactional_db):
    """The fleet, and a namespace-scoped operator: its API token and a signed-in session's cookies."""
    load_fleet()
    user = make_user("otto", roles.OPERATOR, namespaces=["team-a"])
    client = Client()
    client.force_login(user)  # a session row the server reads (its password hasher could not check the tests' MD5)
    return Token.objects.create(user=user).key, {"sessionid": client.cookies["sessionid"].value}


def assert_fast_healthz(probes):
    assert probes and all(status == 200 for status, _ in probes), probes
    assert_healthz_fast([seconds for _, seconds in probes])


@pytest.mark.slow
def test_the_billion_laughs_is_a_json_400_and_healthz_stays_fast(serve, live):  # noqa: F811
    body = {"cluster": "alpha", "namespace": "team-a", "yaml": laughs(9)}
    answers, probes = healthz_while(
        serve, lambda: [serve.request("POST", "/api/v1/preview", body, token=live[0]) for _ in range(5)]
    )
    assert_fast_healthz(probes)
    for status, answer, ctype in answers:
        assert status == 400 and ctype.startswith("application/json"), (status, answer)
        assert set(answer) == {"error"} and set(answer["error"]) == {"code", "message", "field"}, answer
        assert answer["error"]["field"] == "yaml"
        assert f"more than {MAX_NODES:,} YAML nodes" in answer["error"]["message"]


@pytest.mark.slow
def test_the_preview_page_shows_the_limit_and_healthz_stays_fast(serve, live):  # noqa: F811
    session = requests.Session()
    session.cookies.update(live[1])
    assert session.get(serve.url + "/preview/?cluster=alpha", timeout=10).status_code == 200  # sets the CSRF cookie
    form = {"yaml": laughs(9), "namespace": "team-a", "csrfmiddlewaretoken": session.cookies["csrftoken"]}
    pages, probes = healthz_while(
        serve, lambda: [session.post(serve.url + "/preview/?cluster=alpha", data=form, timeout=60) for _ in range(5)]
    )
    assert_fast_healthz(probes)
    for page in pages:
        assert page.status_code == 200, page.status_code  # the page answers with the form and the message
        assert 'id="preview-error"' in page.text
        assert escape(f"YAML: more than {MAX_NODES:,} YAML nodes") in page.text
