"""strata-sidecar --help lists every flag and the hash-token subcommand."""

from __future__ import annotations

import subprocess

from sidecar_testing import SIDECAR


def test_help_lists_the_hash_token_subcommand_and_the_proxy_flags():
    out = subprocess.run([str(SIDECAR), "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "strata-sidecar hash-token < token.txt" in out.stdout, out.stdout
    for flag in ("--oversized", "--recall-tool", "--drain-timeout-ms"):
        assert flag in out.stdout, flag
    hashed = subprocess.run([str(SIDECAR), "hash-token"], input="secret\n", capture_output=True,
                            text=True, timeout=30)
    assert hashed.stdout.strip() == \
        "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
