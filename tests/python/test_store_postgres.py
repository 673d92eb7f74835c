"""strata.Agent and strata.Store on a PostgreSQL store: a postgresql:// URL wherever a store path
is taken chooses it. The server is a real one (Debian's postgresql, installed by scripts/setup),
started in a temporary directory on a free port, as `nobody` when run as root; a missing server
is a failure."""

import glob
import os
import pathlib
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

import strata

SCRIPT = [{"role": "assistant", "content": f"answer {i}"} for i in range(2)]


@pytest.fixture
def postgres_url():
    initdb = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    assert initdb, "no PostgreSQL server under /usr/lib/postgresql: run scripts/setup"
    bindir = pathlib.Path(initdb[-1]).parent
    root = pathlib.Path(tempfile.mkdtemp(prefix="strata-pg-"))
    as_user = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = ["runuser", "-u", "nobody", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = root / "data"
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U",
                    "postgres", "--no-sync"], check=True, capture_output=True)
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"),
                    "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "-w",
                    "start"], check=True, capture_output=True)
    yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w",
                    "stop"], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def test_an_agent_on_postgresql_reopens_and_its_store_reads(start_sim, postgres_url):
    sim = start_sim(SCRIPT)
    agent = strata.Agent.create({"identity": {"id": "pg"}, "endpoint": {"base_url": sim.base_url},
                                 "store_path": postgres_url})
    agent.set_system_prompt("Short answers.")
    agent.run("question 0")
    del agent
    again = strata.Agent.open(postgres_url, "pg")
    again.run("question 1")
    store = strata.Store.open(postgres_url)
    assert store.path == postgres_url
    assert [a["id"] for a in store.agents()] == ["pg"]
    assert len(store.requests("pg")) == 2
