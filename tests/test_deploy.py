"""deploy/: the container image's command is a ``serve --http --stateless`` our parser
takes, and the Kubernetes manifests agree with it — the config and token where the
command reads them, the probes on the routes and port it serves. (No container engine
runs here: the image itself is not built.)"""

from __future__ import annotations

import json
import posixpath
import re
from argparse import Namespace
from functools import partial
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import yaml

from supervisor import open_supervisor
from supervisor.cli import build_parser, main
from supervisor.config import load_config
from supervisor.gateway import Gateway, new_token, serve_http
from supervisor.testing.servers import make_server

DEPLOY = Path(__file__).parent.parent / "deploy"


def dockerfile() -> dict[str, str]:
    """The Dockerfile's instructions (continued lines joined), by name; each once."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition(" ")
            if name in {"FROM", "USER", "EXPOSE", "ENTRYPOINT", "CMD"}:
                assert name not in found, f"{name} twice"
            found[name] = value.strip()
    return found


def command() -> Namespace:
    """The image's command (ENTRYPOINT + CMD) as our parser reads it."""
    instructions = dockerfile()
    entrypoint, cmd = json.loads(instructions["ENTRYPOINT"]), json.loads(instructions["CMD"])
    assert entrypoint == ["mcp-supervisor"]
    return build_parser().parse_args(cmd)


def manifests() -> dict[str, dict[str, Any]]:
    """deploy/kubernetes.yaml's objects, by kind (one each)."""
    with (DEPLOY / "kubernetes.yaml").open() as file:
        documents = [d for d in yaml.safe_load_all(file) if d]
    kinds = {d["kind"]: d for d in documents}
    assert len(kinds) == len(documents)
    return kinds


def test_the_image_runs_a_stateless_http_gateway_as_a_non_root_user() -> None:
    """python:3.11-slim; ``mcp-supervisor serve`` over HTTP on every interface of the
    exposed port, stateless, with the config and the token read from files; a numeric
    user other than root."""
    instructions = dockerfile()
    assert instructions["FROM"] == "python:3.11-slim"
    assert "pip install ." in (DEPLOY / "Dockerfile").read_text()
    assert instructions["USER"].isdigit() and int(instructions["USER"]) != 0
    args = command()
    assert args.command == "serve" and args.stateless
    assert args.http == ("0.0.0.0", int(instructions["EXPOSE"]))  # noqa: S104
    assert args.config.startswith("/") and args.token_file.startswith("/")
    assert not (args.stdio or args.yes or args.tools or args.servers or args.dashboard)


def test_kubernetes_mounts_what_the_image_reads_and_probes_what_it_serves() -> None:
    """The ConfigMap is mounted where the command reads the config, holding a config
    that loads; the Secret where it reads the token; the probes are /healthz and /readyz
    on the port it serves; the Service sends its port there; two replicas, run as the
    image's user."""
    args = command()
    objects = manifests()
    assert set(objects) == {"ConfigMap", "Secret", "Deployment", "Service"}
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels
    (container,) = pod["spec"]["containers"]
    assert "command" not in container and "args" not in container  # the image's own
    assert container["image"]
    assert container["resources"]["requests"] and container["resources"]["limits"]
    assert pod["spec"]["securityContext"]["runAsUser"] == int(dockerfile()["USER"])

    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    config_dir, config_key = posixpath.split(args.config)
    token_dir, token_key = posixpath.split(args.token_file)
    config_map, secret = objects["ConfigMap"], objects["Secret"]
    assert mounts[config_dir]["configMap"]["name"] == config_map["metadata"]["name"]
    assert mounts[token_dir]["secret"]["secretName"] == secret["metadata"]["name"]
    assert load_config(json.loads(config_map["data"][config_key])).servers
    assert token_key in secret["stringData"]

    port = args.http[1]
    (declared,) = container["ports"]
    assert declared["containerPort"] == port
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": port}
    (service_port,) = objects["Service"]["spec"]["ports"]
    assert service_port["port"] == port and service_port["targetPort"] == declared["name"]
    assert objects["Service"]["spec"]["selector"] == labels
    assert objects["Service"]["spec"]["type"] == "ClusterIP"


def test_the_placeholder_token_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Secret applied without replacing its placeholder does not serve with a token
    everybody knows: ``serve`` refuses the file (exit 2), saying why — before it reads
    the config (here none: a token it took would end in a config error, not in serving)."""
    args = command()
    secret = manifests()["Secret"]
    file = tmp_path / posixpath.basename(args.token_file)
    file.write_text(secret["stringData"][file.name])
    missing = tmp_path / "mcp.json"
    serve = ["serve", "--config", str(missing), "--http", "127.0.0.1:0", "--stateless"]
    assert main([*serve, "--token-file", str(file)]) == 2
    assert "must hold one token (no spaces)" in capsys.readouterr().err


def test_the_replicas_share_the_secrets_key_and_its_placeholder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The config names the key where the Secret is mounted; the Secret's placeholder
    key stops ``serve`` (exit 2), saying why."""
    args = command()
    objects = manifests()
    config_key = posixpath.basename(args.config)
    config = json.loads(objects["ConfigMap"]["data"][config_key])
    key_file = config["supervisor"]["gateway"]["keyFile"]
    assert posixpath.dirname(key_file) == posixpath.dirname(args.token_file)
    placeholder = objects["Secret"]["stringData"][posixpath.basename(key_file)]
    (tmp_path / "key").write_text(placeholder)
    config["supervisor"]["gateway"]["keyFile"] = str(tmp_path / "key")
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    token = tmp_path / "token"
    token.write_text("a-token-of-thirty-two-characters-at-least")
    serve = ["serve", "--config", str(tmp_path / "mcp.json"), "--http", "127.0.0.1:0"]
    assert main([*serve, "--stateless", "--token-file", str(token)]) == 2
    assert "the gateway's key must be one word, with no spaces" in capsys.readouterr().err


def test_the_replicas_share_a_token_store_sealed_with_the_secrets_key() -> None:
    """The config keeps OAuth credentials in PostgreSQL, sealed with a key of the
    mounted Secret; its password comes from the Secret as PGPASSWORD, never in the URL."""
    from supervisor.config import load_config

    args = command()
    objects = manifests()
    config = json.loads(objects["ConfigMap"]["data"][posixpath.basename(args.config)])
    store = load_config(config).settings.token_store
    assert store is not None and store.key_file is not None
    assert posixpath.dirname(store.key_file) == posixpath.dirname(args.token_file)
    secret = objects["Secret"]
    assert posixpath.basename(store.key_file) in secret["stringData"]
    (container,) = objects["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["PGPASSWORD"]["name"] == secret["metadata"]["name"]
    assert env["PGPASSWORD"]["key"] in secret["stringData"]


async def test_the_routes_the_manifests_name_answer_without_the_token() -> None:
    """The probes' and the scrape annotation's paths are routes the HTTP gateway answers
    with 200, without the token."""
    pod = manifests()["Deployment"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    paths = {container[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe")}
    paths.add(pod["metadata"]["annotations"]["prometheus.io/path"])
    assert paths == {"/healthz", "/readyz", "/metrics"}
    async with (
        open_supervisor({"mcpServers": {}}, apps={"e": make_server("echo")}) as sup,
        trio.open_nursery() as nursery,
    ):
        gateway = Gateway(sup)
        await nursery.start(gateway.run)
        info = await nursery.start(partial(serve_http, gateway, token=new_token(), stateless=True))
        base = info.url.removesuffix("/mcp")
        async with httpx2.AsyncClient() as http:
            for path in sorted(paths):
                assert (await http.get(base + path)).status_code == 200, path
        nursery.cancel_scope.cancel()
