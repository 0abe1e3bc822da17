"""The certificates ``cluster serve --tls`` makes: signed by their CA, naming every address a client may dial."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from kubeflux.sim.apiserver.tls import make_certificates


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_server_certificate_is_signed_by_the_ca_and_names_loopback_and_the_address(tmp_path: Path) -> None:
    files = make_certificates(tmp_path / "pki", "10.1.2.3")
    ca, server = _load(files.ca), _load(files.certificate)
    server.verify_directly_issued_by(ca)
    ca_key = ca.public_key()
    assert isinstance(ca_key, ec.EllipticCurvePublicKey)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.IPAddress)) >= {
        ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.1.2.3")
    }
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert files.key.stat().st_mode & 0o777 == 0o600


def test_a_wildcard_address_names_the_machine_not_0_0_0_0(tmp_path: Path) -> None:
    names = _load(make_certificates(tmp_path, "0.0.0.0").certificate).extensions
    alternative = names.get_extension_for_class(x509.SubjectAlternativeName).value
    assert socket.gethostname() in alternative.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("0.0.0.0") not in alternative.get_values_for_type(x509.IPAddress)


def test_a_restart_keeps_the_ca_so_clients_that_trusted_it_still_do(tmp_path: Path) -> None:
    first = make_certificates(tmp_path, "127.0.0.1")
    trusted = first.ca.read_bytes()
    second = make_certificates(tmp_path, "127.0.0.1", ["cluster.example", "192.0.2.7"])
    assert second.ca.read_bytes() == trusted  # same CA, new server certificate signed by it
    _load(second.certificate).verify_directly_issued_by(_load(first.ca))
    names = _load(second.certificate).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "cluster.example" in names.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("192.0.2.7") in names.get_values_for_type(x509.IPAddress)
    assert (tmp_path / "ca.key").stat().st_mode & 0o777 == 0o600


def test_a_link_planted_where_a_key_goes_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n", encoding="utf-8")
    folder = tmp_path / "pki"
    folder.mkdir()
    (folder / "server.key").symlink_to(victim)
    files = make_certificates(folder)
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert not files.key.is_symlink() and files.key.stat().st_mode & 0o777 == 0o600
