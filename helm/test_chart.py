"""The caravan chart, rendered offline by Helm's own Go SDK (helm-python-sdk).

There is no Kubernetes cluster here: nothing is installed or started. What is
checked: the chart renders with its default values, with a scaled,
external-etcd set (helm/caravan/ci/scaled-external-etcd-values.yaml) and with
TLS on every hop and to etcd (helm/caravan/ci/tls-values.yaml); lints clean; values.schema.json rejects bad values; every manifest validates against
Kubernetes' schemas (kubernetes-validate, strict); the objects the chart
promises are there; and every rendered container's flags, environment and
config file are accepted by its own binary: the file is taken from the
rendered ConfigMap through the container's volume mounts and the binary runs
with the container's args plus --check-config, which fails on a key it does
not read (with TLS, the certificate files it names are made with openssl and
put where the Secret would be mounted). scripts/helm-test runs it in a venv.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "caravan"
SCALED = CHART / "ci" / "scaled-external-etcd-values.yaml"
TLS = CHART / "ci" / "tls-values.yaml"
SERVER = CHART / "ci" / "server-values.yaml"
KUBE_VERSION = "1.30.0"
BINARIES = [
    "caravan-api-gateway",
    "caravan-eval-broker",
    "caravan-plan-applier",
    "caravan-scheduler-worker",
    "caravan-deployment-watcher",
    "caravan",
]
SERVICES = {
    "api-gateway": False,
    "eval-broker": True,
    "plan-applier": True,
    "scheduler-worker": False,
    "deployment-watcher": True,
}


def bin_dir() -> Path:
    """Where the service binaries are: CARAVAN_BIN_DIR, else the first of
    target/{debug,images,release} that has them all."""
    if os.environ.get("CARAVAN_BIN_DIR"):
        return Path(os.environ["CARAVAN_BIN_DIR"])
    for profile in ("debug", "images", "release"):
        d = ROOT / "target" / profile
        if all((d / b).is_file() for b in BINARIES):
            return d
    pytest.fail("no service binaries in target/: build them (cargo build --bins) or set CARAVAN_BIN_DIR")


def scaled_values() -> dict[str, Any]:
    return yaml.safe_load(SCALED.read_text())


def tls_values() -> dict[str, Any]:
    return yaml.safe_load(TLS.read_text())


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_secret(tmp_path_factory) -> dict[str, bytes]:
    """The files of the Secret tls-values.yaml names, as `caravan tls` would
    make them: a CA, a server and a client certificate (made with openssl
    here; the binaries only need them to parse)."""
    d = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca.pem"), "-days", "1",
            "-subj", "/CN=Caravan Agent CA")
    for role in ("server", "client"):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", str(d / f"{role}-key.pem"), "-out", str(d / f"{role}.csr"),
                "-subj", f"/CN={role}.global.caravan")
        ext = d / f"{role}.ext"
        ext.write_text(f"subjectAltName=DNS:{role}.global.caravan,DNS:localhost\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n")
        openssl("x509", "-req", "-in", str(d / f"{role}.csr"), "-CA", str(d / "ca.pem"),
                "-CAkey", str(d / "ca-key.pem"), "-CAcreateserial", "-days", "1",
                "-extfile", str(ext), "-out", str(d / f"{role}.pem"))
    names = ["ca.pem", "server.pem", "server-key.pem", "client.pem", "client-key.pem"]
    return {n: (d / n).read_bytes() for n in names}


def render(values: dict[str, Any] | None) -> list[dict[str, Any]]:
    chart = helm.Chart.load(str(CHART))
    out = chart.render(values, name="caravan", namespace="scheduling", is_install=True)
    objects = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):  # shown to the user, not applied
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc["__template"] = path
                objects.append(doc)
    return objects


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


CASES = {"default": lambda: None, "scaled-external-etcd": scaled_values, "tls": tls_values}


@pytest.fixture(params=list(CASES), scope="module")
def case(request) -> tuple[str, dict[str, Any] | None, list[dict[str, Any]]]:
    values = CASES[request.param]()
    return request.param, values, render(values)


def tls_on(values: dict[str, Any] | None) -> bool:
    return bool(values and values.get("tls", {}).get("enabled"))


def etcd_tls_on(values: dict[str, Any] | None) -> bool:
    return bool(values and values.get("etcd", {}).get("tls", {}).get("enabled"))


def server_values(tls: bool = False) -> dict[str, Any]:
    values = yaml.safe_load(SERVER.read_text())
    if tls:
        values = {**tls_values(), **values}
    return values


def test_lints_clean_with_every_set_of_values():
    for values in (None, scaled_values(), tls_values(), server_values(), server_values(tls=True)):
        report = helm.lint(str(CHART), values, strict=True, kube_version="v" + KUBE_VERSION)
        problems = [m for m in report["messages"] if m["severity"] >= 2]
        assert not problems and not report.get("errors"), report


def test_every_manifest_is_valid_kubernetes(case):
    name, _, objects = case
    assert objects, name
    for obj in objects:
        template = obj.pop("__template")
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except Exception as err:  # kubernetes_validate's or jsonschema's ValidationError
            message = getattr(err, "message", str(err))
            pytest.fail(f"{name}: {template}: {obj['kind']} {obj['metadata']['name']}: {message}")
        obj["__template"] = template


def test_the_objects_the_chart_promises(case):
    name, values, objects = case
    deployments = of_kind(objects, "Deployment")
    assert sorted(deployments) == sorted(f"caravan-{s}" for s in SERVICES), name
    pdbs = of_kind(objects, "PodDisruptionBudget")
    services = of_kind(objects, "Service")
    for svc, leader in SERVICES.items():
        if leader:
            assert f"caravan-{svc}" in pdbs, f"{name}: no disruption budget for {svc}"
            assert services[f"caravan-{svc}-headless"]["spec"]["clusterIP"] == "None"
    gateway = services["caravan-api-gateway"]["spec"]["ports"]
    assert {p["name"]: p["port"] for p in gateway} == {"http": 4646, "grpc": 4647, "heartbeat": 4649}
    hpas = of_kind(objects, "HorizontalPodAutoscaler")
    workers = deployments["caravan-scheduler-worker"]["spec"]
    etcd = of_kind(objects, "StatefulSet")
    if values is None or not values.get("schedulerWorker"):
        assert not hpas and workers["replicas"] == 3
        assert deployments["caravan-eval-broker"]["spec"]["replicas"] == 2
        assert etcd["caravan-etcd"]["spec"]["replicas"] == 3
        assert "caravan-etcd" in pdbs
    else:
        hpa = hpas["caravan-scheduler-worker"]["spec"]
        assert "replicas" not in workers, "the autoscaler owns the worker count"
        assert (hpa["minReplicas"], hpa["maxReplicas"]) == (
            values["schedulerWorker"]["autoscaling"]["minReplicas"],
            values["schedulerWorker"]["autoscaling"]["maxReplicas"],
        )
        assert hpa["metrics"][0]["resource"]["name"] == "cpu"
        assert deployments["caravan-eval-broker"]["spec"]["replicas"] == values["evalBroker"]["replicaCount"]
        assert not etcd and "caravan-etcd" not in services, "external etcd: none bundled"
    for dep in deployments.values():
        pod = dep["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
        grpc = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
        component = dep["metadata"]["name"].removeprefix("caravan-")
        for probe in ("readinessProbe", "livenessProbe"):
            if tls_on(values):
                # Kubernetes' gRPC probe has no client certificate: the
                # binary's own health subcommand, with the pod's config.
                assert container[probe]["exec"]["command"] == [
                    f"caravan-{component}", "--config", f"/etc/caravan/{component}.toml", "health"
                ], f"{probe} of {dep['metadata']['name']}"
            else:
                assert container[probe]["grpc"]["port"] == grpc, f"{probe} of {dep['metadata']['name']}"
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        for volume, on, path in (("tls", tls_on(values), "/etc/caravan-tls"),
                                 ("etcd-tls", etcd_tls_on(values), "/etc/caravan-etcd-tls")):
            if on:
                assert mounts[volume] == path, dep["metadata"]["name"]
                assert volumes[volume]["secret"]["secretName"] == "caravan-tls"
            else:
                assert volume not in mounts, dep["metadata"]["name"]
        assert container["resources"]["requests"], dep["metadata"]["name"]
        # Prometheus finds /metrics on a port the container declares.
        annotations = dep["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", dep["metadata"]["name"]
        assert annotations["prometheus.io/path"] == "/metrics"
        ports = {p["containerPort"] for p in container["ports"]}
        assert int(annotations["prometheus.io/port"]) in ports, dep["metadata"]["name"]


def config_files(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {name: cm["data"] for name, cm in of_kind(objects, "ConfigMap").items()}


def secret_files(objects: list[dict[str, Any]]) -> dict[str, dict[str, bytes]]:
    return {
        name: {k: base64.b64decode(v) for k, v in secret.get("data", {}).items()}
        for name, secret in of_kind(objects, "Secret").items()
    }


def check_container(pod: dict[str, Any], container: dict[str, Any], configmaps, workdir: Path, secrets=None):
    """Runs the container's binary with its args, env and config file (from
    the ConfigMap its mounts name) and --check-config; the completed process.
    An env value naming a file under a Secret mount gets the rendered
    Secret's file, and so does a path in the config file under one."""
    image = container["image"].split("/")[-1].split(":")[0]
    binary = bin_dir() / ("caravan" if image == "cli" else f"caravan-{image}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    args = list(container.get("args", []))
    # Each file argument under a ConfigMap mount is replaced by the rendered file.
    for i, arg in enumerate(args):
        for mount in container.get("volumeMounts", []):
            prefix = mount["mountPath"].rstrip("/") + "/"
            if arg.startswith(prefix) and "configMap" in volumes[mount["name"]]:
                cm = volumes[mount["name"]]["configMap"]["name"]
                key = arg[len(prefix):]
                assert key in configmaps[cm], f"{arg}: no key {key} in ConfigMap {cm}"
                local = workdir / f"{cm}-{key}"
                local.write_text(secret_paths(configmaps[cm][key], container, volumes, workdir, secrets))
                args[i] = str(local)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    values = {"POD_IP": "10.1.2.3"}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: values.get(m.group(1), m.group(0)), e["value"])
            for mount in container.get("volumeMounts", []):
                prefix = mount["mountPath"].rstrip("/") + "/"
                if env[e["name"]].startswith(prefix) and "secret" in volumes[mount["name"]]:
                    name = volumes[mount["name"]]["secret"]["secretName"]
                    key = env[e["name"]][len(prefix):]
                    assert key in (secrets or {}).get(name, {}), f"{e['name']}: no key {key} in Secret {name}"
                    local = workdir / f"{name}-{key}"
                    local.write_bytes(secrets[name][key])
                    env[e["name"]] = str(local)
    return subprocess.run(
        [str(binary), *args, "--check-config"], env=env, capture_output=True, text=True, timeout=30
    )


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def secret_paths(text: str, container, volumes, workdir: Path, secrets) -> str:
    """`text` with every file under one of the container's Secret mounts
    replaced by a local copy of the Secret's file."""
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "secret" not in volume:
            continue
        name = volume["secret"]["secretName"]
        prefix = mount["mountPath"].rstrip("/") + "/"
        for key in re.findall(re.escape(prefix) + r"([\w.-]+)", text):
            assert key in (secrets or {}).get(name, {}), f"{prefix}{key}: no key {key} in Secret {name}"
            local = workdir / f"{name}-{key}"
            local.write_bytes(secrets[name][key])
            text = text.replace(prefix + key, str(local))
    return text


def pod_secrets(objects, values, tls_secret) -> dict[str, dict[str, bytes]]:
    """The Secrets the pods mount: the rendered ones and, with TLS, the one
    the operator makes."""
    secrets = secret_files(objects)
    if tls_on(values) or etcd_tls_on(values):
        secrets["caravan-tls"] = tls_secret
    return secrets


def test_each_binary_accepts_its_rendered_flags_env_and_config(case, tmp_path, tls_secret):
    name, values, objects = case
    configmaps = config_files(objects)
    secrets = pod_secrets(objects, values, tls_secret)
    for dep in of_kind(objects, "Deployment").values():
        pod = dep["spec"]["template"]["spec"]
        for container in pod["containers"]:
            done = check_container(pod, container, configmaps, tmp_path, secrets)
            assert done.returncode == 0, f"{name}: {container['name']}: {done.stderr}"
            loaded = json.loads(done.stdout)
            assert loaded["advertise_addr"] == f"10.1.2.3:{container['ports'][0]['containerPort']}"
            if values is not None and not values["etcd"].get("enabled", True):
                assert loaded["store"]["endpoints"] == values["etcd"]["external"]["endpoints"]
            store = loaded["store"]
            if etcd_tls_on(values):
                assert all(e.startswith("https://") for e in store["endpoints"]), store
                for key, file in (("ca_file", "ca.pem"), ("cert_file", "client.pem"), ("key_file", "client-key.pem")):
                    assert store[key].endswith(f"caravan-tls-{file}"), (key, store)
                assert store["tls_server_name"] == "server.global.caravan"
            else:
                assert all(e.startswith("http://") for e in store["endpoints"]), store
                assert store["ca_file"] == "" and store["cert_file"] == "", store
            tls = loaded["tls"]
            assert tls["enabled"] == tls_on(values), tls
            if tls_on(values):
                assert tls["cert_file"].endswith("caravan-tls-server.pem"), tls
            if container["name"] == "scheduler-worker" and values and values.get("schedulerWorker"):
                assert loaded["workers"] == values["schedulerWorker"]["config"]["workers"]


def test_the_gateways_share_one_variables_key(case, tmp_path, tls_secret):
    name, values, objects = case
    secrets = pod_secrets(objects, values, tls_secret)
    key = base64.b64decode(secrets["caravan-variables-key"]["variables.key"])
    assert len(key) == 32, f"{name}: the key is base64 of 32 bytes"
    gateway = of_kind(objects, "Deployment")["caravan-api-gateway"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in gateway["volumes"]}
    assert volumes["variables-key"]["secret"]["secretName"] == "caravan-variables-key"
    done = check_container(gateway, gateway["containers"][0], config_files(objects), tmp_path, secrets)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["variables_key_file"].endswith("caravan-variables-key-variables.key")
    # Only the gateways hold it.
    for dep_name, dep in of_kind(objects, "Deployment").items():
        if dep_name != "caravan-api-gateway":
            assert "variables-key" not in {v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]}


def test_an_existing_secret_replaces_the_charts_key():
    objects = render({"apiGateway": {"variablesKey": {"existingSecret": "mine", "secretKey": "k"}}})
    assert "caravan-variables-key" not in of_kind(objects, "Secret")
    gateway = of_kind(objects, "Deployment")["caravan-api-gateway"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in gateway["volumes"]}
    assert volumes["variables-key"]["secret"]["secretName"] == "mine"
    env = {e["name"]: e.get("value") for e in gateway["containers"][0]["env"]}
    assert env["CARAVAN_API_GATEWAY__VARIABLES_KEY_FILE"] == "/etc/caravan-keys/k"


def test_a_key_the_binary_does_not_read_fails_the_check(tmp_path):
    values = {"evalBroker": {"config": {"nack_timout_ms": 5000}}}
    objects = render(values)
    dep = of_kind(objects, "Deployment")["caravan-eval-broker"]
    pod = dep["spec"]["template"]["spec"]
    done = check_container(pod, pod["containers"][0], config_files(objects), tmp_path)
    assert done.returncode == 2, done
    assert "nack_timout_ms" in done.stderr, done.stderr


def test_the_bundled_etcd_requires_client_certificates_with_etcd_tls():
    objects = render(tls_values())
    etcd = of_kind(objects, "StatefulSet")["caravan-etcd"]["spec"]["template"]["spec"]
    (container,) = etcd["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ETCD_LISTEN_CLIENT_URLS"] == "https://0.0.0.0:2379"
    assert env["ETCD_ADVERTISE_CLIENT_URLS"].startswith("https://$(ETCD_NAME).")
    assert env["ETCD_CLIENT_CERT_AUTH"] == "true"
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "tls")
    volume = next(v for v in etcd["volumes"] if v["name"] == "tls")
    assert volume["secret"]["secretName"] == "caravan-tls"
    for key, file in (("ETCD_CERT_FILE", "server.pem"), ("ETCD_KEY_FILE", "server-key.pem"),
                      ("ETCD_TRUSTED_CA_FILE", "ca.pem")):
        assert env[key] == f"{mount}/{file}", key
    # The client port answers only certificate holders: probes use the
    # plaintext /health listener.
    assert env["ETCD_LISTEN_METRICS_URLS"] == "http://0.0.0.0:2381"
    health = next(p["containerPort"] for p in container["ports"] if p["name"] == "health")
    assert health == 2381
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == "health", probe
    # Without etcd.tls: plaintext, and no Secret.
    plain = of_kind(render(None), "StatefulSet")["caravan-etcd"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in plain["containers"][0]["env"]}
    assert env["ETCD_LISTEN_CLIENT_URLS"] == "http://0.0.0.0:2379" and "ETCD_CERT_FILE" not in env


def test_the_bundled_etcd_keeps_etcd_35s_snapshot_count():
    # etcd 3.4 keeps 100,000 raft entries in memory by default (docs/services.md).
    for values, want in ((None, "10000"), ({"etcd": {"snapshotCount": 2500}}, "2500")):
        etcd = of_kind(render(values), "StatefulSet")["caravan-etcd"]["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in etcd["containers"][0]["env"]}
        assert env["ETCD_SNAPSHOT_COUNT"] == want


def test_external_etcd_endpoints_must_match_etcd_tls():
    values = scaled_values()
    values["etcd"]["tls"] = {"enabled": True, "secretName": "etcd-client"}
    with pytest.raises(Exception) as err:
        render(values)
    assert "etcd.external.endpoints" in str(err.value), str(err.value)
    values["etcd"]["external"]["endpoints"] = [
        e.replace("http://", "https://") for e in values["etcd"]["external"]["endpoints"]
    ]
    deployments = of_kind(render(values), "Deployment")
    volumes = deployments["caravan-eval-broker"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "etcd-tls", "secret": {"secretName": "etcd-client", "defaultMode": 0o440}} in volumes


def test_the_schema_rejects_bad_values():
    chart = helm.Chart.load(str(CHART))
    chart.validate_schema(None)
    chart.validate_schema(scaled_values())
    chart.validate_schema(tls_values())
    for bad, named in [
        ({"evalBrokr": {"replicaCount": 2}}, "evalBrokr"),
        ({"schedulerWorker": {"replicaCount": "three"}}, "replicaCount"),
        ({"etcd": {"enabled": False}}, "endpoints"),
        ({"etcd": {"enabled": False, "external": {"endpoints": ["etcd:2379"]}}}, "endpoints"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"tls": {"enabled": True}}, "secretName"),
        ({"etcd": {"enabled": True, "tls": {"enabled": True, "secretName": ""}}}, "secretName"),
    ]:
        with pytest.raises(helm.HelmValuesError) as err:
            chart.validate_schema(bad)
        assert named in str(err.value), (bad, str(err.value))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_the_server_layout(tls, tmp_path, tls_secret):
    """server.enabled: one Deployment of `caravan server` pods runs the
    services it names, which lose their own Deployments, budgets and
    autoscaler; their headless Services select the server pods; the pods
    are probed by `caravan server -health`; and `caravan server` accepts the
    rendered server.toml, args and environment (--check-config)."""
    values = server_values(tls)
    objects = render(values)
    for obj in objects:
        template = obj.pop("__template")
        try:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        except Exception as err:
            pytest.fail(f"{template}: {obj['kind']} {obj['metadata']['name']}: {getattr(err, 'message', err)}")
        obj["__template"] = template
    in_server = values["server"]["services"]
    deployments = of_kind(objects, "Deployment")
    assert sorted(deployments) == ["caravan-api-gateway", "caravan-scheduler-worker", "caravan-server"]
    pdbs = of_kind(objects, "PodDisruptionBudget")
    assert "caravan-server" in pdbs and not any(f"caravan-{s}" in pdbs for s in in_server), sorted(pdbs)
    assert pdbs["caravan-server"]["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "server"
    services = of_kind(objects, "Service")
    for svc in in_server:
        spec = services[f"caravan-{svc}-headless"]["spec"]
        assert spec["selector"]["app.kubernetes.io/component"] == "server", svc
        assert spec["ports"][0]["targetPort"] == spec["ports"][0]["port"], svc
    server = deployments["caravan-server"]["spec"]
    assert server["replicas"] == values["server"]["replicaCount"]
    pod = server["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "caravan/cli:latest"
    assert container["args"][:3] == ["server", "-c", "/etc/caravan/server.toml"]
    for probe in ("readinessProbe", "livenessProbe"):
        command = container[probe]["exec"]["command"]
        assert command[:2] == ["caravan", "server"] and command[-1] == "-health", command
    env = env_of(container)
    ports = {p["containerPort"] for p in container["ports"]}
    for svc in in_server:
        port = next(p for s, p in (("eval-broker", 4650), ("plan-applier", 4651), ("deployment-watcher", 4653)) if s == svc)
        assert env[f"CARAVAN_{svc.upper().replace('-', '_')}__ADVERTISE_ADDR"] == f"$(POD_IP):{port}"
        assert port in ports, svc
    configmaps = config_files(objects)
    files = configmaps["caravan-config"]
    assert "server.toml" in files and not any(f"{s}.toml" in files for s in in_server), sorted(files)
    secrets = pod_secrets(objects, values, tls_secret)
    done = check_container(pod, container, configmaps, tmp_path, secrets)
    assert done.returncode == 0, done.stderr
    assert "configuration is valid" in done.stdout, done.stdout
    config = files["server.toml"]
    assert "nack_timeout_ms = 90000" in config, config
    assert ("[tls]" in config) == tls, config
    # The worker kept apart is a Deployment of its own with its own file.
    worker = deployments["caravan-scheduler-worker"]["spec"]["template"]["spec"]
    done = check_container(worker, worker["containers"][0], configmaps, tmp_path, secrets)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["workers"] == 4


def test_the_server_refuses_what_its_services_do_not_read(tmp_path, tls_secret):
    values = server_values()
    values["planApplier"] = {"config": {"no_such_key": 1}}
    objects = render(values)
    pod = of_kind(objects, "Deployment")["caravan-server"]["spec"]["template"]["spec"]
    done = check_container(pod, pod["containers"][0], config_files(objects), tmp_path, {})
    assert done.returncode == 2 and "plan-applier.no_such_key" in done.stderr, done.stderr


def test_the_server_layout_refuses_what_it_would_not_honour_and_passes_service_env():
    values = server_values()
    values["server"]["services"] = ["eval-broker", "scheduler-worker"]
    values["schedulerWorker"]["autoscaling"] = {"enabled": True}
    with pytest.raises(Exception, match="schedulerWorker.autoscaling.enabled"):
        render(values)
    values = server_values()
    values["planApplier"] = {"extraEnv": [{"name": "CARAVAN_PLAN_APPLIER__TXN_MAX_OPS", "value": "7"}]}
    pod = of_kind(render(values), "Deployment")["caravan-server"]["spec"]["template"]["spec"]
    assert env_of(pod["containers"][0])["CARAVAN_PLAN_APPLIER__TXN_MAX_OPS"] == "7"
