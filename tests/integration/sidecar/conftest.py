"""Fixtures of the strata-sidecar integration tests (helpers in sidecar_testing.py)."""

from __future__ import annotations

import pathlib
import sys
from typing import Iterator, List

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sidecar_testing import Sidecar, Sim  # noqa: E402


@pytest.fixture
def start_sim(tmp_path: pathlib.Path) -> Iterator:
    sims: List[Sim] = []

    def start(trajectory=None, extra=()):
        sim = Sim(tmp_path, trajectory, extra)
        sims.append(sim)
        return sim

    yield start
    for sim in sims:
        sim.close()


@pytest.fixture
def start_sidecar(tmp_path: pathlib.Path) -> Iterator:
    sidecars: List[Sidecar] = []

    def start(args=(), **kwargs):
        sidecar = Sidecar(tmp_path, list(args), **kwargs)
        sidecars.append(sidecar)
        return sidecar

    yield start
    for sidecar in sidecars:
        sidecar.close()
