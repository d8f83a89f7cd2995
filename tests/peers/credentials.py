"""Credentials for the loopback APNs and FCM peers (tests.peers.apns_fcm): one self-signed certificate
per directory, an APNs signing key and an FCM service account, made here so no test needs real ones."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import secrets
import ssl
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def tls_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost; the cert file is also the CA to trust. Peers
    started on one directory share it, so one PUSH_TLS_CA_FILE trusts them all."""
    cert_path, key_path = directory / "peer-cert.pem", directory / "peer-key.pem"
    if cert_path.exists() and key_path.exists():
        return cert_path, key_path
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def apns_key(directory: Path) -> tuple[Path, Any]:
    """An APNs-style .p8 signing key (P-256, PKCS#8 PEM) and its public key."""
    key = ec.generate_private_key(ec.SECP256R1())
    path = directory / "AuthKey.p8"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return path, key.public_key()


def service_account(directory: Path, *, token_uri: str, project_id: str = "demo-project") -> tuple[Path, Any]:
    """A service-account JSON whose token_uri is `token_uri`, and its public key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    info = {
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": secrets.token_hex(20),
        "private_key": pem,
        "client_email": f"pusher@{project_id}.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    }
    path = directory / "service-account.json"
    path.write_text(json.dumps(info))
    return path, key.public_key()


# --- the servers ----------------------------------------------------------------------------------------


def server_tls(directory: Path, protocols: list[str]) -> tuple[ssl.SSLContext, Path]:
    ca_file, key_file = tls_certificate(directory)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(ca_file, key_file)
    context.set_alpn_protocols(protocols)
    return context, ca_file
