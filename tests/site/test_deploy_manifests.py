"""The in-cluster install (issue 12): the kustomize manifests render and validate against the Kubernetes
v1.36 schemas, run the README's commands with the code's RBAC, and the processes they run behave as
pods must: /readyz follows the database, Redis and migrations; SIGTERM gives the watchers' leases up."""

import copy
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
import yaml

from mirror.models import SyncState
from ops.readiness import NEEDED_READ, NEEDED_RELEASE, _rules_allow
from tests.browser import ROOT, celery_worker_command, free_port, stop_process, subprocess_env, wait_until
from tests.sync_fixtures import make_claim, state, wait_for

KUBE = ROOT / "deploy" / "kubernetes"
KUBE_VERSION = "1.36.0"  # kubernetes-validate 1.37.0 ships the v1.36.0 schemas
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
POD_KINDS = {"Deployment"}


# --- a small kustomize loader ---------------------------------------------------------------------
# kubectl is not a dependency of the project (Debian's kubernetes-client is v1.20, which predates
# components), so the test resolves the few kustomize features the manifests use itself, and compares
# with `kubectl kustomize` wherever a kubectl is installed.


def _load_docs(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _kustomization(folder):
    return yaml.safe_load((folder / "kustomization.yaml").read_text())


def build(folder):
    """The objects `kustomize build folder` emits (resources, components, namespace, labels, images, replicas)."""
    spec = _kustomization(folder)
    known = {"apiVersion", "kind", "resources", "components", "namespace", "labels", "images", "replicas"}
    assert set(spec) <= known, f"{folder}: kustomization uses {set(spec) - known}, which this loader does not resolve"
    objects = []
    for entry in spec.get("resources") or []:
        path = (folder / entry).resolve()
        objects += build(path) if path.is_dir() else _load_docs(path)
    for entry in spec.get("components") or []:
        component = (folder / entry).resolve()
        assert _kustomization(component)["kind"] == "Component"
        objects += build(component)
    for obj in objects:
        meta = obj.setdefault("metadata", {})
        if spec.get("namespace") and obj["kind"] not in CLUSTER_SCOPED:
            meta["namespace"] = spec["namespace"]
        for group in spec.get("labels") or []:
            meta.setdefault("labels", {}).update(group["pairs"])
        if obj["kind"] in POD_KINDS:
            pod = obj["spec"]["template"]["spec"]
            for container in pod.get("containers", []) + pod.get("initContainers", []):
                for image in spec.get("images") or []:
                    if container["image"].split(":")[0] == image["name"]:
                        container["image"] = f"{image.get('newName', image['name'])}:{image['newTag']}"
            for rep in spec.get("replicas") or []:
                if meta["name"] == rep["name"]:
                    obj["spec"]["replicas"] = rep["count"]
    return objects


def _key(obj):
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


@pytest.fixture(scope="module", params=["base", "overlays/example"])
def rendered(request):
    return request.param, build(KUBE / request.param)


def test_loader_matches_kubectl_kustomize(rendered):
    name, objects = rendered
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl here: the loader's build is all there is to check")
    out = subprocess.run([kubectl, "kustomize", str(KUBE / name)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    theirs = {_key(o): o for o in yaml.safe_load_all(out.stdout) if o}
    assert theirs == {_key(o): o for o in objects}


def test_every_object_validates_against_the_v1_36_schemas(rendered):
    import kubernetes_validate

    _, objects = rendered
    assert objects
    for obj in objects:
        # strict: unknown fields (a typo such as `readOnlyRootFileSystem`) are errors too.
        kubernetes_validate.validate(copy.deepcopy(obj), KUBE_VERSION, strict=True)


def test_broken_manifest_is_rejected():
    """The validation is not a no-op: a misspelt field and a wrong type fail."""
    import kubernetes_validate

    deployment = next(o for o in build(KUBE / "base") if o["kind"] == "Deployment")
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, KUBE_VERSION, strict=True)
    wrong = copy.deepcopy(deployment)
    wrong["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, KUBE_VERSION, strict=True)


def _pods(objects):
    return {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o["kind"] in POD_KINDS}


def test_pods_are_hardened_and_bounded(rendered):
    _, objects = rendered
    pods = _pods(objects)
    assert set(pods) == {"gpudash-web", "gpudash-worker", "gpudash-preview", "gpudash-beat"}
    for name, pod in pods.items():
        assert pod["serviceAccountName"] == "gpudash"
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        mounts_needed = set()
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"], (name, c["name"])
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and {"cpu", "memory"} <= set(
                c["resources"]["limits"]
            )
            # Settings: the ConfigMap and the Secret (SECRET_KEY, DATABASE_URL, REDIS_URL live there).
            refs = {next(iter(e)): e[next(iter(e))]["name"] for e in c["envFrom"]}
            assert refs == {"configMapRef": "gpudash-config", "secretRef": "gpudash-secrets"}
            mounts_needed |= {m["name"] for m in c["volumeMounts"]}
            assert {"/data", "/tmp"} <= {m["mountPath"] for m in c["volumeMounts"]}  # writable, the root fs is not
        assert mounts_needed <= {v["name"] for v in pod["volumes"]}
    config = next(o for o in objects if o["kind"] == "ConfigMap")
    assert "SECRET_KEY" not in config["data"] and "DATABASE_URL" not in config["data"]
    assert config["data"]["GPUDASH_DATA_DIR"] == "/data"
    web = pods["gpudash-web"]["containers"][0]
    assert (
        web["livenessProbe"]["httpGet"]["path"] == "/healthz" and web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    )
    # The probes' Host header must pass Django's host check.
    probe_host = web["readinessProbe"]["httpGet"]["httpHeaders"][0]["value"]
    assert probe_host in config["data"]["ALLOWED_HOSTS"].split(",")
    service = next(o for o in objects if o["kind"] == "Service")
    assert (
        service["spec"]["selector"].items()
        <= next(o for o in objects if o["metadata"]["name"] == "gpudash-web")["spec"]["template"]["metadata"][
            "labels"
        ].items()
    )
    assert not pods["gpudash-beat"]["automountServiceAccountToken"]  # beat never calls the API server
    assert not pods["gpudash-preview"]["automountServiceAccountToken"]  # previews read the database only


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## The scaled set-up.*?```sh\n(.*?)```", text, re.S).group(1)
    return {line.strip() for line in block.splitlines() if line.strip() and not line.startswith("export")}


def test_deployment_commands_are_the_readmes(rendered):
    _, objects = rendered
    readme = _readme_commands()
    used = set()
    for pod in _pods(objects).values():
        for c in pod["containers"] + pod.get("initContainers", []):
            command = " ".join(c["command"] + c.get("args", []))
            assert command in readme, f"{command!r} is not in the README's scaled set-up: {sorted(readme)}"
            used.add(command)
    assert used == readme  # and every README command runs somewhere
    install = re.search(r"## Install in a cluster.*?```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    assert "kubectl apply -k deploy/kubernetes/overlays/example" in install and "--in-cluster" in install


# --- preview workers: their own queue, their own pods ---------------------------------------------


def _worker_options(argv):
    """(queues, concurrency, pool) of a `celery ... worker` command line; None for what it leaves to
    Celery's defaults. `argv`: a list, or a string as docker-compose writes it."""
    argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
    assert argv[:3] == ["celery", "-A", "gpudash"] and "worker" in argv, argv
    found = {}
    names = {
        "-Q": "queues",
        "--queues": "queues",
        "-c": "concurrency",
        "--concurrency": "concurrency",
        "-P": "pool",
        "--pool": "pool",
    }
    tokens = iter(argv)
    for token in tokens:
        flag, _, value = token.partition("=")
        if flag in names:
            found[names[flag]] = value or next(tokens)
        elif token[:2] in ("-Q", "-c", "-P") and len(token) > 2:  # -Qpreview, -c2
            found[names[token[:2]]] = token[2:]
    queues = set(found["queues"].split(",")) if "queues" in found else None
    return queues, int(found["concurrency"]) if "concurrency" in found else None, found.get("pool")


def test_worker_options_reads_every_spelling():
    assert _worker_options("celery -A gpudash worker -Q preview,other -c 2 -P prefork") == (
        {"preview", "other"},
        2,
        "prefork",
    )
    assert _worker_options(["celery", "-A", "gpudash", "worker", "--queues=celery", "--concurrency", "16"]) == (
        {"celery"},
        16,
        None,
    )
    assert _worker_options("celery -A gpudash worker -Qpreview -c4") == ({"preview"}, 4, None)
    assert _worker_options("celery -A gpudash worker --concurrency=16") == (None, 16, None)  # no -Q: Celery's choice


def _queue_names():
    """(the preview queue, the default queue) as the code routes tasks."""
    from django.conf import settings

    from claims.preview_service import remote
    from gpudash.celery import app

    preview = settings.CELERY_TASK_ROUTES["claims.tasks.run_preview_job"]["queue"]
    assert preview == remote.QUEUE
    default = app.conf.task_default_queue
    assert default != preview
    return preview, default


def _env(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _mebibytes(quantity):
    units = {"Ki": 2**-10, "Mi": 1, "Gi": 2**10}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_previews_run_in_their_own_deployment(rendered):
    _, objects = rendered
    preview_queue, default_queue = _queue_names()
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    pods = _pods(objects)
    preview = pods["gpudash-preview"]["containers"][0]
    queues, concurrency, pool = _worker_options(preview["command"] + preview.get("args", []))
    assert queues == {preview_queue} and pool == "prefork" and concurrency >= 1
    assert deployments["gpudash-preview"]["spec"]["replicas"] >= 2
    # Probes of a Celery worker: a ping of this pod's own worker over the broker.
    for probe in ("livenessProbe", "readinessProbe"):
        assert "inspect ping -d celery@$HOSTNAME" in " ".join(preview[probe]["exec"]["command"]), probe
    # The general worker runs watchers and periodic jobs, never a preview.
    worker = pods["gpudash-worker"]["containers"][0]
    assert _worker_options(worker["command"] + worker.get("args", []))[0] == {default_queue}
    # Web: several processes and replicas, previews sent to the queue, as many slots as the workers have.
    web = pods["gpudash-web"]["containers"][0]
    assert deployments["gpudash-web"]["spec"]["replicas"] >= 2
    command = web["command"] + web.get("args", [])
    assert command[:3] == ["python", "manage.py", "serve"] and int(command[command.index("--workers") + 1]) >= 2
    env = _env(web)
    assert env["GPUDASH_PREVIEW_BACKEND"] == "celery"
    assert int(env["GPUDASH_PREVIEW_WORKERS"]) == deployments["gpudash-preview"]["spec"]["replicas"] * concurrency
    # The inventory lives in the preview pods: they get the memory, the web pods less.
    limit = {
        name: _mebibytes(pods[name]["containers"][0]["resources"]["limits"]["memory"])
        for name in ("gpudash-web", "gpudash-preview")
    }
    assert limit["gpudash-preview"] > limit["gpudash-web"], limit


def test_compose_runs_the_same_processes():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    preview_queue, default_queue = _queue_names()
    queues, concurrency, pool = _worker_options(services["preview"]["command"])
    assert queues == {preview_queue} and pool == "prefork"
    assert {"postgres", "redis"} <= set(services["preview"]["depends_on"])
    assert _worker_options(services["worker"]["command"])[0] == {default_queue}
    assert re.search(r"manage\.py serve .*--workers 2\b", services["web"]["command"])
    env = services["web"]["environment"]
    assert env["GPUDASH_PREVIEW_BACKEND"] == "celery" and int(env["GPUDASH_PREVIEW_WORKERS"]) == concurrency
    # Every gpudash service shares the image and the settings (the YAML anchor), the preview one too.
    assert services["preview"]["image"] == services["web"]["image"] and services["preview"]["environment"] == env


def _cluster_roles(objects):
    return {o["metadata"]["name"]: o["rules"] for o in objects if o["kind"] == "ClusterRole"}


def _bound_to_service_account(objects, role):
    return any(
        o["kind"] == "ClusterRoleBinding"
        and o["roleRef"]["name"] == role
        and {"kind": "ServiceAccount", "name": "gpudash", "namespace": "gpudash"} in o["subjects"]
        for o in objects
    )


def test_rbac_is_the_codes_and_the_standalone_files():
    base, example = build(KUBE / "base"), build(KUBE / "overlays/example")
    readonly = _cluster_roles(base)
    assert set(readonly) == {"gpudash-readonly"}  # the base is read-only
    rules = readonly["gpudash-readonly"]
    assert all(_rules_allow(rules, v, g, r) for v, g, r in NEEDED_READ)
    assert not any(_rules_allow(rules, v, g, r) for v, g, r in NEEDED_RELEASE)
    roles = _cluster_roles(example)
    assert all(_rules_allow(roles["gpudash-release"], v, g, r) for v, g, r in NEEDED_RELEASE)
    assert _bound_to_service_account(base, "gpudash-readonly") and _bound_to_service_account(example, "gpudash-release")
    # The same objects as deploy/rbac-*.yaml (tests/ops/test_readiness.py checks those are least privilege).
    standalone = {
        _key(o): o
        for name in ("rbac-readonly.yaml", "rbac-release.yaml")
        for o in _load_docs(ROOT / "deploy" / name)
        if o["kind"] != "Namespace"
    }
    in_kustomize = {_key(o): o for o in example if o["kind"] in {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}}
    for obj in in_kustomize.values():
        obj["metadata"].pop("labels", None)
    assert in_kustomize == standalone


# --- /readyz against real services ----------------------------------------------------------------


class TcpProxy:
    """Forwards 127.0.0.1:port to PostgreSQL; `down()` refuses and cuts connections, as an outage would."""

    def __init__(self, target):
        self.target = target
        self.port = free_port()
        self.listener = None
        self.conns = []
        self.lock = threading.Lock()

    def up(self):
        self.listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def down(self):
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (a bare close leaves it listening)
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            for conn in self.conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self.conns.clear()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _serve(env, port, log_path, *extra):
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), *extra],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz") or proc.poll() is not None, 60, "the server")
    assert proc.poll() is None, log_path.read_text()[-3000:]
    return proc, log


def _answers(url):
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _redis_server(port):
    return subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres") or not shutil.which("redis-server"),
    reason="a server subprocess on this run's PostgreSQL, and a redis-server of the test's own",
)
@pytest.mark.django_db(transaction=True)
def test_readyz_follows_the_database_and_redis(tmp_path):
    env = subprocess_env()
    db = urllib.parse.urlsplit(env["DATABASE_URL"])
    proxy = TcpProxy((db.hostname, db.port or 5432))
    proxy.up()
    redis_port = free_port()
    redis = _redis_server(redis_port)
    env.update(
        DATABASE_URL=db._replace(netloc=f"{db.username}@127.0.0.1:{proxy.port}").geturl(),
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
    )
    port = free_port()
    server, log = _serve(env, port, tmp_path / "serve.log")
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        wait_until(lambda: _get(url)[0] == 200, 20, "ready")
        assert _get(url)[1]["checks"] == {"database": "ok", "migrations": "ok", "redis": "ok"}
        proxy.down()
        status, body = _get(url)
        assert status == 503 and body["checks"]["database"].startswith("error") and body["checks"]["redis"] == "ok"
        proxy.up()
        wait_until(lambda: _get(url)[0] == 200, 20, "ready again after the database came back")
        redis.terminate()
        redis.wait(10)
        status, body = _get(url)
        assert status == 503 and body["checks"]["redis"].startswith("error") and body["checks"]["database"] == "ok"
        redis = _redis_server(redis_port)
        wait_until(lambda: _get(url)[0] == 200, 20, "ready again after Redis came back")
    finally:
        stop_process(server)
        log.close()
        stop_process(redis)
        proxy.down()


@pytest.mark.sqlite_default
def test_readyz_waits_for_migrations(tmp_path):
    """A fresh database: alive (/healthz) but not ready until `manage.py migrate` has run."""
    env = {k: v for k, v in os.environ.items() if k not in ("GPUDASH_TEST_DB_NAME", "REDIS_URL")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.sqlite3'}", GPUDASH_DATA_DIR=str(tmp_path))
    port = free_port()
    server, log = _serve(env, port, tmp_path / "serve.log", "--no-watchers")
    try:
        assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        status, body = _get(f"http://127.0.0.1:{port}/readyz")
        assert status == 503 and "not applied" in body["checks"]["migrations"], body
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=180,
        )
        status, body = _get(f"http://127.0.0.1:{port}/readyz")
        assert status == 200 and body["checks"] == {"database": "ok", "migrations": "ok"}
    finally:
        stop_process(server)
        log.close()


# --- SIGTERM: leases given up, no waiting for them to expire --------------------------------------

LONG_LEASE = "600"  # far longer than the test: a lease that is free again was given up, not expired


def _sigterm_releases(cluster, proc, log_path):
    try:
        wait_for(
            lambda: (
                f":{proc.pid}:" in state(cluster, "ResourceClaim").lease_holder
                and state(cluster, "ResourceClaim").status == SyncState.Status.CONNECTED
            ),
            timeout=90,
            message=f"the subprocess to hold the lease; log: {log_path.read_text()[-2000:]}",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log_path.read_text()[-3000:]
        after = state(cluster, "ResourceClaim")
        assert after.lease_holder == "" and after.lease_expires is None, (
            after.lease_holder,
            log_path.read_text()[-3000:],
        )
        assert after.status == SyncState.Status.IDLE
    finally:
        stop_process(proc)


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="a second process needs a shared server database",
)
def test_watch_command_gives_up_its_leases_on_sigterm(cluster, devcluster, tmp_path):
    devcluster.store.create("resourceclaims", make_claim("ns", "c0"))
    env = dict(subprocess_env(), GPUDASH_LEASE_SECONDS=LONG_LEASE, GPUDASH_WATCH_TIMEOUT="5")
    log_path = tmp_path / "watch.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "watch", "--cluster", "dev"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _sigterm_releases(cluster, proc, log_path)


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"),
    reason="needs Redis (broker) and PostgreSQL shared with the worker",
)
def test_celery_worker_gives_up_its_leases_on_sigterm(cluster, devcluster, tmp_path):
    from mirror.sync.tasks import ensure_watchers

    env = dict(subprocess_env(), GPUDASH_LEASE_SECONDS=LONG_LEASE, GPUDASH_WATCH_TIMEOUT="5")
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            celery_worker_command(),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        ensure_watchers.delay()
        _sigterm_releases(cluster, proc, log_path)
