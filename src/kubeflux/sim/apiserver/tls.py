"""TLS for the served cluster: a self-signed CA and a server certificate signed by it, as kind and KWOK set up.

``kubeflux cluster serve --tls`` keeps them in a folder beside the kubeconfig (``ca.crt`` and ``ca.key``, made once
and reused by every later start, so a client that trusted the CA before a restart trusts the server after it;
``server.crt`` and ``server.key``, made at each start) and writes the CA into the kubeconfig
(``certificate-authority-data``), so kubectl and the official client verify the server as they would a real one.
Keys are readable by their owner only, and written without following a link planted in their place.
The certificate names every address a client may use: ``localhost``, the loopback addresses, the address listened
on (for a wildcard address, the machine's name) and any ``--tls-san`` given. Keys are ECDSA P-256 (fast to make,
accepted by Go's and Python's TLS); certificates last a year.

The real control plane's harness (:mod:`kubeflux.controlplane`) uses the same CA for the client certificates of its
users (:func:`client_certificate`: the user is the certificate's common name, its groups its organisations, as
kube-apiserver reads them) and for the service-account token signing key (:func:`signing_key`).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TlsFiles", "client_certificate", "make_certificates", "signing_key"]

_VALID = datetime.timedelta(days=365)
_CA_NAME = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubeflux-ca")])


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path
    """The CA's certificate (PEM): what clients trust."""
    certificate: Path
    """The server's certificate (PEM), signed by the CA."""
    key: Path
    """The server's private key (PEM, unencrypted, mode 0600)."""


def _names(host: str, extra: Sequence[str] = ()) -> list[x509.GeneralName]:
    """The subject alternative names: loopback, ``host``, and for a wildcard address (``0.0.0.0``) the machine's
    own name, which is what clients elsewhere will dial (its addresses are not looked up: a resolver without a
    network would stall the start; ``extra`` names them)."""
    dns = {"localhost"}
    addresses = {"127.0.0.1", "::1"}
    hosts = [socket.gethostname(), *_own_address()] if host in ("0.0.0.0", "::", "") else [host]
    for name in [*hosts, *extra]:
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            if name:
                dns.add(name)
        else:
            if not address.is_unspecified:
                addresses.add(name)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in sorted(dns)]
    names.extend(x509.IPAddress(ipaddress.ip_address(a)) for a in sorted(addresses))
    return names


def _own_address() -> list[str]:
    """The address this machine reaches others from (a UDP socket "connected" to a documentation address sends
    nothing and asks no resolver); none when it has no route."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            return [str(probe.getsockname()[0])]
    except OSError:
        return []


def _write_private(path: Path, data: bytes) -> None:
    """Write a key readable by its owner only; a link (or anything) in its place is replaced, never followed."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _existing_ca(folder: Path, now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """The CA kept in ``folder`` when it is whole, ours and valid for at least a day more."""
    cert_path, key_path = folder / "ca.crt", folder / "ca.key"
    if cert_path.is_symlink() or key_path.is_symlink() or not (cert_path.is_file() and key_path.is_file()):
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError, OSError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or cert.subject != _CA_NAME:
        return None
    if cert.public_key() != key.public_key() or cert.not_valid_after_utc < now + datetime.timedelta(days=1):
        return None
    return cert, key


def _new_ca(now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_CA_NAME)
        .issuer_name(_CA_NAME)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_certificates(folder: Path, host: str = "127.0.0.1", extra_names: Sequence[str] = ()) -> TlsFiles:
    """The CA kept in ``folder`` (made when there is none that can serve) and a new server certificate for
    ``host`` and ``extra_names`` signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    folder.mkdir(parents=True, exist_ok=True)
    kept = _existing_ca(folder, now)
    ca, ca_key = kept if kept is not None else _new_ca(now)
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + _VALID, ca.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(_names(host, extra_names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(folder / "ca.crt", folder / "server.crt", folder / "server.key")
    if kept is None:
        _write_private(folder / "ca.key", _pem_key(ca_key))
        files.ca.unlink(missing_ok=True)
        files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.certificate.unlink(missing_ok=True)
    files.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private(files.key, _pem_key(key))
    return files


def client_certificate(folder: Path, name: str, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
    """A client certificate (``NAME.crt``, ``NAME.key`` in ``folder``) for ``user`` in ``groups``, signed by the CA
    that :func:`make_certificates` keeps in ``folder``."""
    now = datetime.datetime.now(datetime.UTC)
    kept = _existing_ca(folder, now)
    if kept is None:
        raise FileNotFoundError(f"{folder}: no CA to sign with (make_certificates first)")
    ca, ca_key = kept
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + _VALID, ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    cert_path.unlink(missing_ok=True)
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    _write_private(key_path, _pem_key(key))
    return cert_path, key_path


def signing_key(folder: Path, name: str) -> tuple[Path, Path]:
    """A new key pair for signing tokens (``NAME.key``, private, and ``NAME.pub``), such as service-account tokens."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = folder / f"{name}.key", folder / f"{name}.pub"
    _write_private(private, _pem_key(key))
    public.unlink(missing_ok=True)
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public
