"""The websocket's share of the namespace-scope matrix (tests/claims/test_scope_matrix.py has the rest): the real
LiveConsumer over the real channel layer (Redis when REDIS_URL is set), through channels' communicator.

viewer (scoped) / operator (scoped) / admin x own namespace / other namespace x a namespace with
objects / one without: subscriptions to another namespace are refused with one answer; changes of
other namespaces arrive as "something changed" with nothing that identifies the object or its node.
Frames that are not JSON are answered with an error frame and the socket stays usable.
"""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from mirror import roles
from mirror.consumers import REDACTED_FIELDS, LiveConsumer
from mirror.sync.publish import Change, group_messages, publisher
from tests.api_fixtures import load_fleet
from tests.fleet_data import make_user

pytestmark = pytest.mark.django_db(transaction=True)

OWN, OTHER, NOWHERE = "team-a", "team-b", "no-such-namespace"
USERS = ("viewer", "scoped", "admin")


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # users are made per test


@pytest.fixture
def alpha():
    cluster = load_fleet()[0]  # team-b has claims and pods in the mirror; NOWHERE has nothing
    # The fleet's own changes go out from the publisher's thread; send them now, before anyone
    # subscribes, so that the tests below receive only the changes they publish themselves.
    publisher.flush()
    return cluster


@pytest.fixture
def users():
    return {
        "viewer": make_user("wsv", roles.VIEWER, namespaces=[OWN]),
        "scoped": make_user("wso", roles.OPERATOR, namespaces=[OWN]),
        "admin": make_user("wsa", roles.ADMIN),
    }


def change(cluster, namespace, name, node="node-b", rv="9", event="MODIFIED"):
    return Change(
        cluster.pk,
        cluster.name,
        "ResourceClaim",
        event,
        namespace,
        name,
        f"uid-{namespace}-{name}",
        node,
        rv,
        "allocated",
    )


async def publish(*changes):
    layer = get_channel_layer()
    for group, message in group_messages(list(changes)).items():
        await layer.group_send(group, message)


async def connect(user):
    comm = WebsocketCommunicator(LiveConsumer.as_asgi(), "/ws/live/")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    return comm


def test_subscribing_to_a_namespace(alpha, users):
    async def scenario():
        answers = {}
        for who, user in users.items():
            comm = await connect(user)
            for namespace in (OWN, OTHER, NOWHERE):
                await comm.send_json_to({"subscribe": {"cluster": alpha.pk, "namespace": namespace}})
                answers[who, namespace] = await comm.receive_json_from(timeout=2)
            await comm.disconnect()
        return answers

    answers = run(scenario)
    for who in USERS:
        assert answers[who, OWN]["type"] == "subscribed" and answers[who, OWN]["groups"] == [
            f"gpudash.c{alpha.pk}.ns.{OWN}"
        ]
        for namespace in (OTHER, NOWHERE):
            if who == "admin":
                assert answers[who, namespace]["type"] == "subscribed"
            else:
                assert answers[who, namespace] == {
                    "type": "error",
                    "error": f"namespace {namespace} is outside your scope",
                }, who
        if who != "admin":  # a namespace with objects and one without: the same answer
            assert str(answers[who, OTHER]).replace(OTHER, "X") == str(answers[who, NOWHERE]).replace(NOWHERE, "X")


def test_changes_of_other_namespaces_name_nothing(alpha, users):
    async def scenario():
        comms = {}
        for who, user in users.items():
            comms[who] = await connect(user)
            await comms[who].send_json_to({"subscribe": {"cluster": None, "kind": ["ResourceClaim"]}})
            await comms[who].receive_json_from(timeout=2)
        # An existing claim of each namespace changes, and a claim nobody has heard of is deleted.
        await publish(
            change(alpha, OWN, "train", node="node-a"),
            change(alpha, OTHER, "stuck"),
            change(alpha, OTHER, "does-not-exist", node="node-z", event="DELETED"),
        )
        got = {}
        for who, comm in comms.items():
            got[who] = []
            while len(got[who]) < 3:  # this test's cluster only: a change of another test's stack is not ours
                got[who] += [
                    c for c in (await comm.receive_json_from(timeout=2))["changes"] if c.get("cluster") == alpha.pk
                ]
            await comm.disconnect()
        return got

    for who, changes in run(scenario).items():
        own = [c for c in changes if c.get("namespace") == OWN]
        assert len(own) == 1 and own[0]["name"] == "train" and own[0]["node"] == "node-a"
        others = [c for c in changes if c is not own[0]]
        if who == "admin":
            assert {(c["name"], c["node"]) for c in others} == {("stuck", "node-b"), ("does-not-exist", "node-z")}
            continue
        assert len(others) == 2, who
        for c in others:
            assert set(c) == set(REDACTED_FIELDS) | {"redacted"} and c["redacted"] is True
            assert c["kind"] == "ResourceClaim" and c["cluster"] == alpha.pk
            for secret in (OTHER, "stuck", "does-not-exist", "node-b", "node-z", "uid-", "allocated"):
                assert secret not in str(c), (who, secret, c)
        # Apart from the event, an existing and a missing object's changes look alike.
        assert {k: v for k, v in others[0].items() if k != "event"} == {
            k: v for k, v in others[1].items() if k != "event"
        }


def test_frames_that_are_not_json_get_an_error_and_the_socket_stays_open(alpha, users):
    async def scenario():
        comm = await connect(users["scoped"])
        replies = []
        for frame in ("not json", "", "[" * 10000, '{"subscribe": '):
            await comm.send_input({"type": "websocket.receive", "text": frame})  # send_to refuses an empty frame
            replies.append(await comm.receive_json_from(timeout=2))
        await comm.send_to(bytes_data=b"\x00\x01")
        replies.append(await comm.receive_json_from(timeout=2))
        # Still open and working: a subscription and a change after the garbage.
        await comm.send_json_to({"subscribe": {"cluster": alpha.pk, "kind": ["ResourceClaim"]}})
        ack = await comm.receive_json_from(timeout=2)
        await publish(change(alpha, OWN, "train"))
        got = await comm.receive_json_from(timeout=2)
        await comm.disconnect()
        return replies, ack, got

    replies, ack, got = run(scenario)
    assert [r["type"] for r in replies] == ["error"] * 5
    assert all(r["error"].startswith("not JSON") for r in replies[:4]), replies
    assert "binary" in replies[4]["error"]
    assert ack["type"] == "subscribed"
    assert [c["name"] for c in got["changes"]] == ["train"]


def run(coro_fn, *args):
    return async_to_sync(coro_fn)(*args)
