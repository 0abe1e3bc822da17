"""TLS for the served cluster: a self-signed CA and a server certificate signed by it, as kind and KWOK set up.

``kubeflux cluster serve --tls`` makes them once per start in a folder beside the kubeconfig (``ca.crt``,
``server.crt``, ``server.key``; the key readable by its owner only) and writes the CA into the kubeconfig
(``certificate-authority-data``), so kubectl and the official client verify the server as they would a real one.
The certificate names every address a client may use: ``localhost``, the loopback addresses and the address
listened on. Keys are ECDSA P-256 (fast to make, accepted by Go's and Python's TLS); certificates last a year.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["TlsFiles", "make_certificates"]

_VALID = datetime.timedelta(days=365)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    ca: Path
    """The CA's certificate (PEM): what clients trust."""
    certificate: Path
    """The server's certificate (PEM), signed by the CA."""
    key: Path
    """The server's private key (PEM, unencrypted, mode 0600)."""


def _names(host: str) -> list[x509.GeneralName]:
    """The subject alternative names: loopback, ``host``, and for a wildcard address (``0.0.0.0``) the machine's
    own name, which is what clients elsewhere will dial (its addresses are not looked up: a resolver without a
    network would stall the start)."""
    dns = {"localhost"}
    addresses = {"127.0.0.1", "::1"}
    hosts = [socket.gethostname()] if host in ("0.0.0.0", "::", "") else [host]
    for name in hosts:
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


def make_certificates(folder: Path, host: str = "127.0.0.1") -> TlsFiles:
    """A new CA and server certificate for ``host`` in ``folder`` (created; files replaced)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubeflux-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
        .add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(folder / "ca.crt", folder / "server.crt", folder / "server.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.chmod(0o600)
    files.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files
