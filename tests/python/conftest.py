"""Shared fixtures of the Python tests: the built `strata` package and a strata-sim process.

The package is imported from $STRATA_BUILD_DIR/python (default: <repo>/build/python), where a
build configured with -DSTRATA_BUILD_PYTHON=ON assembles it; strata-sim from the same build.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Iterator, List, Optional

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("STRATA_BUILD_DIR", REPO / "build")).resolve()
PACKAGE_DIR = BUILD / "python"
SIM = BUILD / "sdk" / "apps" / "strata-sim" / "strata-sim"
TEST_DATA = REPO / "tests" / "data"
SPM_MODEL = TEST_DATA / "strata-test-spm.model"

if not list((PACKAGE_DIR / "strata").glob("_strata*.so")):
    raise RuntimeError(
        f"the strata extension is not built in {PACKAGE_DIR}/strata: configure with "
        "-DSTRATA_BUILD_PYTHON=ON and build the strata_python target, or set STRATA_BUILD_DIR")
sys.path.insert(0, str(PACKAGE_DIR))


class Sim:
    """A strata-sim process on 127.0.0.1, port 0, replying with a scripted trajectory."""

    def __init__(self, trajectory: Optional[List[dict]], tmp: pathlib.Path, extra: List[str],
                 grpc: bool = False):
        if not SIM.exists():
            raise RuntimeError(f"strata-sim is not built at {SIM} (build the strata_sim target)")
        args = [str(SIM), "--host", "127.0.0.1", "--port", "0", "--grpc-port",
                "0" if grpc else "-1", *extra]
        if trajectory is not None:
            path = tmp / "trajectory.jsonl"
            path.write_text("".join(json.dumps(m) + "\n" for m in trajectory))
            args += ["--trajectory", str(path)]
        self.process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        if "http" not in fields:
            self.close()
            raise RuntimeError(f"strata-sim printed no address: {line!r}")
        self.base_url = f"http://{fields['http']}/v1"
        self.grpc_target = fields.get("grpc", "")  # "host:port" when started with grpc=True

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def start_sim(tmp_path: pathlib.Path) -> Iterator:
    sims: List[Sim] = []

    def start(trajectory: Optional[List[dict]] = None, *extra: str, grpc: bool = False) -> Sim:
        sim = Sim(trajectory, tmp_path, list(extra), grpc)
        sims.append(sim)
        return sim

    yield start
    for sim in sims:
        sim.close()


@pytest.fixture
def subprocess_env() -> dict:
    """The environment of a second interpreter that imports the same build of strata."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR), env.get("PYTHONPATH")]))
    return env


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "slow: minutes long (a full build); `scripts/test --quick` deselects it with "
        "-m 'not slow', `scripts/test` runs it")
