"""TLS of strata-sidecar's gRPC listener from PEM files, with a test CA made here by the openssl
command: server TLS, and mutual TLS with --tls-client-ca."""

from __future__ import annotations

import shutil

import grpc
import pytest

from sidecar_testing import make_ca, pb, rpc_error, sha256_hex, write_config

C = grpc.StatusCode

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="the openssl command is missing (Debian package openssl)")


def test_tls(tmp_path, start_sidecar):
    ca = make_ca(tmp_path)
    other = make_ca(tmp_path, "other-ca")
    token = "tls-tenant-token-Q7"
    config = write_config(tmp_path, {
        "tls": {"cert_file": str(ca["cert"]), "key_file": str(ca["key"])},
        "tenants": [{"name": "t", "token_sha256": [sha256_hex(token)]}]})
    sidecar = start_sidecar(["--config", str(config)])

    trusted = grpc.ssl_channel_credentials(root_certificates=ca["ca"].read_bytes())
    stub = sidecar.stub(token, credentials=trusted)
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="over-tls"))
    assert [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest()).agents] == ["over-tls"]
    health = sidecar.channel(credentials=trusted).unary_unary("/grpc.health.v1.Health/Check")
    assert health(b"", timeout=10) == b"\x08\x01"

    # A plaintext client, and a client that trusts another CA, are refused by the handshake.
    error = rpc_error(sidecar.stub(token).ListAgents, pb.ListAgentsRequest(), timeout=10)
    assert error.code() == C.UNAVAILABLE
    untrusted = grpc.ssl_channel_credentials(root_certificates=other["ca"].read_bytes())
    error = rpc_error(sidecar.stub(token, credentials=untrusted).ListAgents,
                      pb.ListAgentsRequest(), timeout=10)
    assert error.code() == C.UNAVAILABLE


def test_mutual_tls(tmp_path, start_sidecar):
    ca = make_ca(tmp_path)
    other = make_ca(tmp_path, "other-ca")
    sidecar = start_sidecar(["--tls-cert", str(ca["cert"]), "--tls-key", str(ca["key"]),
                             "--tls-client-ca", str(ca["ca"])])
    root = ca["ca"].read_bytes()
    with_cert = grpc.ssl_channel_credentials(
        root_certificates=root, private_key=ca["client_key"].read_bytes(),
        certificate_chain=ca["client_cert"].read_bytes())
    stub = sidecar.stub(credentials=with_cert)
    stub.CreateAgent(pb.CreateAgentRequest(agent_id="m"))
    assert stub.OpenAgent(pb.OpenAgentRequest(agent_id="m")).agent_id == "m"

    without = grpc.ssl_channel_credentials(root_certificates=root)
    error = rpc_error(sidecar.stub(credentials=without).ListAgents, pb.ListAgentsRequest(),
                      timeout=10)
    assert error.code() == C.UNAVAILABLE
    # A client certificate of another CA.
    foreign = grpc.ssl_channel_credentials(
        root_certificates=root, private_key=other["client_key"].read_bytes(),
        certificate_chain=other["client_cert"].read_bytes())
    error = rpc_error(sidecar.stub(credentials=foreign).ListAgents, pb.ListAgentsRequest(),
                      timeout=10)
    assert error.code() == C.UNAVAILABLE


def test_tls_key_that_does_not_match(tmp_path, start_sidecar):
    ca = make_ca(tmp_path)
    other = make_ca(tmp_path, "other-ca")
    sidecar = start_sidecar(["--tls-cert", str(ca["cert"]), "--tls-key", str(other["key"])],
                            expect_listening=False)
    assert sidecar.wait(timeout=30) == 1
    assert "tls.key_file: the key in" in sidecar.output()
    assert "does not match the certificate" in sidecar.output()
    (tmp_path / "not.pem").write_text("not a certificate")
    bad = start_sidecar(["--tls-cert", str(tmp_path / "not.pem"), "--tls-key", str(ca["key"])],
                        expect_listening=False)
    assert bad.wait(timeout=30) == 1
    assert "holds no PEM certificate" in bad.output()
