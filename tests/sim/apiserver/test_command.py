"""``kubeflux cluster serve`` as a user runs it: a kubeconfig to point clients at, and a clean stop on SIGTERM."""

from __future__ import annotations

import shutil
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
import yaml
from typer.testing import CliRunner

from kubeflux.cli import app
from kubeflux.sim.apiserver.server import kubeconfig
from tests.shared import REPO, unboxed

from .conftest import kubernetes

SMALL = REPO / "examples" / "workloads" / "small.swf"


def test_serve_writes_a_kubeconfig_serves_the_nodes_and_stops_on_sigterm(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    command = [
        sys.executable,
        "-m",
        "kubeflux.cli",
        "cluster",
        "serve",
        "--nodes",
        "3",
        "--cores-per-node",
        "8",
        "--kubeconfig",
        str(config),
        "--token",
        "s3cret",
        "--tls",
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert "3 nodes at https://127.0.0.1:" in first
        assert server.stdout.readline().startswith(f"TLS: certificates in {tmp_path / 'pki'}")
        assert server.stdout.readline().strip() == f"kubeconfig: {config}"
        written = yaml.safe_load(config.read_text())
        url = written["clusters"][0]["cluster"]["server"]
        assert written["users"][0]["user"] == {"token": "s3cret"}
        trusting = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        request = urllib.request.Request(f"{url}/api/v1/nodes", headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(request, timeout=60, context=trusting) as response:
            nodes = orjson.loads(response.read())["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["node-0000", "node-0001", "node-0002"]
        try:
            urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=60, context=trusting)
            raise AssertionError("a request without the token must be refused")
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err
    assert "stopped" in out


def test_a_token_without_tls_is_refused_saying_kubectl_would_not_send_it(tmp_path: Path) -> None:
    """kubectl sends no bearer token over http (checked: every request 401), and kube-apiserver serves only HTTPS."""
    command = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "1", "--cores-per-node", "4"]
    result = subprocess.run(
        [*command, "--token", "s3cret", "--kubeconfig", str(tmp_path / "kubeconfig")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    message = " ".join(result.stderr.replace("│", "").split())
    assert "--token needs --tls: kubectl (client-go) sends no bearer token over plain http" in message
    assert not (tmp_path / "kubeconfig").exists()


def test_serve_refuses_contradictory_node_flags(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "3"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "--cores-per-node" in result.stderr + result.stdout


def test_kubeconfig_names_the_server_and_the_token() -> None:
    config = kubeconfig("http://127.0.0.1:1234", "t")
    assert config["current-context"] == "kubeflux"
    assert config["clusters"][0]["cluster"]["server"] == "http://127.0.0.1:1234"


def test_serve_refuses_an_unknown_scheduler_and_a_zero_speed() -> None:
    base = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "1", "--cores-per-node", "4"]
    unknown = subprocess.run([*base, "--scheduler", "nope"], capture_output=True, text=True, timeout=120)
    assert unknown.returncode != 0
    assert "unknown scheduler" in unknown.stderr + unknown.stdout
    frozen = subprocess.run([*base, "--speed", "0"], capture_output=True, text=True, timeout=120)
    assert frozen.returncode != 0
    assert "speed must be positive" in frozen.stderr + frozen.stdout


def test_serve_with_tls_is_verified_by_kubectl_and_the_official_client_through_the_kubeconfig(tmp_path: Path) -> None:
    """``--tls``: HTTPS with a new CA that the kubeconfig carries; clients verify the server with it (a client that
    does not trust the CA is refused by its own TLS), and the private key is readable by its owner only."""
    config = tmp_path / "kubeconfig"
    command = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "2", "--cores-per-node", "4"]
    command += ["--kubeconfig", str(config), "--tls", "--token", "s3cret"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        assert "2 nodes at https://127.0.0.1:" in server.stdout.readline()
        assert server.stdout.readline().startswith(f"TLS: certificates in {tmp_path / 'pki'}")
        assert (tmp_path / "pki" / "server.key").stat().st_mode & 0o077 == 0
        assert server.stdout.readline().strip() == f"kubeconfig: {config}"
        written = yaml.safe_load(config.read_text())
        cluster = written["clusters"][0]["cluster"]
        url = cluster["server"]
        assert url.startswith("https://") and "certificate-authority-data" in cluster
        api = kubernetes.config.new_client_from_config(config_file=str(config))
        try:
            nodes = kubernetes.client.CoreV1Api(api).list_node().items
            assert [n.metadata.name for n in nodes] == ["node-0000", "node-0001"]
        finally:
            api.close()
        trusting = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        request = urllib.request.Request(f"{url}/api/v1/nodes", headers={"Authorization": "Bearer s3cret"})
        with urllib.request.urlopen(request, timeout=60, context=trusting) as response:
            assert len(orjson.loads(response.read())["items"]) == 2
        with pytest.raises(urllib.error.URLError) as untrusted:
            urllib.request.urlopen(request, timeout=60, context=ssl.create_default_context())
        assert isinstance(untrusted.value.reason, ssl.SSLCertVerificationError)
        if shutil.which("kubectl"):
            listed = subprocess.run(
                ["kubectl", "--kubeconfig", str(config), "get", "nodes", "-o", "name"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert listed.returncode == 0, listed.stderr
            assert listed.stdout.split() == ["node/node-0000", "node/node-0001"]
    finally:
        server.send_signal(signal.SIGTERM)
        _out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err


def test_serve_refuses_an_unknown_feature_gate() -> None:
    command = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "1", "--cores-per-node", "4"]
    result = subprocess.run([*command, "--feature-gates", "Bogus=true"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    said = " ".join(result.stderr.replace("│", " ").split())  # rich boxes and wraps the message
    assert "'Bogus=true': expected Name=true|false with Name one of GenericWorkload" in said


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--start-delay", "inf"], "--start-delay must be a finite number of seconds, got inf"),
        (["--start-jitter", "nan"], "--start-jitter must be a finite number of seconds, got nan"),
        (["--start-delay", "1e18"], "--start-delay must be at most 31,536,000 s (a year), got 1e+18"),
    ],
    ids=["infinite-delay", "nan-jitter", "delay-beyond-a-year"],
)
def test_serve_refuses_a_start_delay_that_is_no_number_of_seconds(options: list[str], complaint: str) -> None:
    """``--start-delay inf`` or ``nan`` started the server."""
    result = CliRunner().invoke(app, ["cluster", "serve", "--nodes", "1", "--cores-per-node", "4", *options])
    assert result.exit_code == 2 and unboxed(complaint) in unboxed(result.output)


@pytest.mark.parametrize("under", [False, True], ids=["a-file", "under-a-file"])
def test_serve_refuses_a_report_folder_it_could_not_write_before_the_replay(tmp_path: Path, under: bool) -> None:
    """``--out FILE``: FileExistsError at the end, after the whole replay, and no report."""
    taken = tmp_path / "taken"
    taken.write_text("mine")
    out = taken / "sub" if under else taken
    command = ["cluster", "serve", "--nodes", "2", "--cores-per-node", "4", "-w", str(SMALL), "-s", "kubeflux"]
    command += ["--clock", "virtual", "--until-done"]  # (a replay that ends: before the fix, it failed at its end)
    result = CliRunner().invoke(app, [*command, "--out", str(out), "--kubeconfig", str(tmp_path / "kubeconfig")])
    reason = "cannot be the report folder: Not a directory" if under else "exists and is not a folder"
    assert result.exit_code == 2 and unboxed(f"--out {out}: {reason}") in unboxed(result.output)
    assert not (tmp_path / "kubeconfig").exists()  # refused before the server started
