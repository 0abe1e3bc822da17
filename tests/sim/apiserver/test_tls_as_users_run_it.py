"""Hostile use of ``kubeflux cluster serve --tls``: kubectl and the official client through the kubeconfig, an address
beyond loopback, a restart on the same kubeconfig, a kubeconfig path that cannot be one."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kubeflux.controlplane import free_port

kubernetes = pytest.importorskip("kubernetes")

SERVE = [sys.executable, "-m", "kubeflux.cli", "cluster", "serve", "--nodes", "2", "--cores-per-node", "4", "--tls"]


@contextmanager
def served(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``cluster serve --tls`` with ``args``, once it has printed its kubeconfig line; always stopped."""
    server = subprocess.Popen([*SERVE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if line.startswith("kubeconfig:"):
                break
        else:
            raise AssertionError(f"the server ended: {server.communicate(timeout=60)[1]}")
        yield server
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)


def _own_address() -> str | None:
    """This machine's address on its network (not loopback), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_lists_the_nodes_of_a_tls_cluster_served_without_a_token(tmp_path: Path) -> None:
    """``cluster serve --tls`` (no --token, the default): the kubeconfig's user is empty, and kubectl, talking
    HTTPS to a server with no credentials configured, asks for a username on the terminal ("Please enter
    Username:"; in a script: "error: EOF"). Over HTTP the same kubeconfig works. The kubeconfig should carry
    credentials (a token or a client certificate) so that kubectl works as it does against kind."""
    config = tmp_path / "kubeconfig"
    with served("--kubeconfig", str(config)):
        listed = subprocess.run(
            ["kubectl", "--kubeconfig", str(config), "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert listed.stdout.split() == ["node/node-0000", "node/node-0001"]


def test_a_tls_cluster_on_every_address_is_verified_at_the_machine_s_own_address(tmp_path: Path) -> None:
    """``--address 0.0.0.0 --tls`` is how a user lets other machines in, but the certificate names only
    localhost, 127.0.0.1, ::1 and 0.0.0.0: a client at the machine's address (or name) fails verification
    ("certificate is valid for 0.0.0.0, 127.0.0.1, ::1, not 192.0.2.2") and must skip TLS verification."""
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no address beyond loopback")
    config, port = tmp_path / "kubeconfig", free_port()
    with served("--address", "0.0.0.0", "--port", str(port), "--kubeconfig", str(config)):
        trusting = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        with socket.create_connection((address, port), timeout=60) as raw:
            try:
                with trusting.wrap_socket(raw, server_hostname=address) as verified:
                    assert verified.version() is not None
            except ssl.SSLCertVerificationError as refused:
                raise AssertionError(f"at {address}: {refused.verify_message}") from refused


def test_a_client_of_the_kubeconfig_still_trusts_the_server_restarted_with_the_same_kubeconfig(tmp_path: Path) -> None:
    """Restarting ``cluster serve --tls --kubeconfig K`` on the same port makes a new CA and overwrites K: a client
    that loaded K before (``kubeflux serve``, a controller, an open shell's kubectl proxy) gets
    CERTIFICATE_VERIFY_FAILED on every request until restarted itself. The served cluster's 504 relist was built
    for exactly this restart; with --tls it never gets that far. The CA in ``pki/`` should be reused."""
    config, port = tmp_path / "kubeconfig", free_port()
    with served("--port", str(port), "--kubeconfig", str(config), "--token", "s3cret"):
        api = kubernetes.config.new_client_from_config(config_file=str(config))
        core = kubernetes.client.CoreV1Api(api)
        assert len(core.list_node().items) == 2
    try:
        with served("--port", str(port), "--kubeconfig", str(config), "--token", "s3cret"):
            assert len(core.list_node(_request_timeout=30).items) == 2
    finally:
        api.close()


@pytest.mark.parametrize("where", ["a-folder", "under-a-file"])
def test_a_kubeconfig_path_that_cannot_be_a_file_is_a_clear_error(tmp_path: Path, where: str) -> None:
    """``--kubeconfig DIR`` (an existing folder) or a path under a file: IsADirectoryError / NotADirectoryError
    tracebacks, the first after writing ``pki/`` beside the folder and binding the port."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    config = tmp_path / "folder" if where == "a-folder" else tmp_path / "file" / "kubeconfig"
    result = subprocess.run([*SERVE, "--kubeconfig", str(config)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-500:]
    assert "Traceback" not in result.stderr and str(config) in result.stderr


def test_the_private_key_is_not_written_through_a_symlink_planted_in_the_pki_folder(tmp_path: Path) -> None:
    """``--kubeconfig /tmp/kc --tls`` writes ``/tmp/pki/server.key``: a path anyone can plant a symlink at first.
    ``make_certificates`` follows it (touch, chmod, write): the file it points to is overwritten with the private
    key and its mode changed, as the user running the server (often root). The key (and the CA the kubeconfig then
    trusts) should be written to a new file of our own, never through an existing link."""
    from kubeflux.sim.apiserver.tls import make_certificates

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    victim.chmod(0o644)
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "server.key").symlink_to(victim)
    with contextlib.suppress(OSError):  # refusing to write through the link is as good
        make_certificates(tmp_path / "pki")
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert victim.stat().st_mode & 0o777 == 0o644


def test_a_cluster_served_on_the_ipv6_loopback_answers_there(tmp_path: Path) -> None:
    """``--address ::1`` is taken for loopback (no warning), the URL is bracketed and the certificate names ::1, but
    the listening socket is always AF_INET: "error: cannot listen on ::1:0: [Errno -9] Address family for hostname
    not supported"."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    config = tmp_path / "kubeconfig"
    with served("--address", "::1", "--kubeconfig", str(config), "--token", "s3cret"):
        api = kubernetes.config.new_client_from_config(config_file=str(config))
        try:
            assert len(kubernetes.client.CoreV1Api(api).list_node().items) == 2
        finally:
            api.close()


def test_a_tls_cluster_stopped_with_a_client_connected_stops_cleanly(tmp_path: Path) -> None:
    """SIGTERM while a client holds an idle keep-alive HTTPS connection (the official client always does): uvicorn
    waits out its graceful timeout and logs "ERROR: Cancel 0 running task(s), timeout graceful shutdown
    exceeded" on every stop. Over HTTP the same stop is immediate and silent."""
    config = tmp_path / "kubeconfig"
    server = subprocess.Popen(
        [*SERVE, "--kubeconfig", str(config), "--token", "s3cret"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    for line in server.stdout:
        if line.startswith("kubeconfig:"):
            break
    api = kubernetes.config.new_client_from_config(config_file=str(config))
    try:
        assert len(kubernetes.client.CoreV1Api(api).list_node().items) == 2  # the connection stays open
        server.send_signal(signal.SIGTERM)
        _out, err = server.communicate(timeout=60)
    finally:
        api.close()
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=60)
    assert server.returncode == 0
    assert "ERROR" not in err, err
