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
