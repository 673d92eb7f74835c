"""Runs one test file of this folder under pytest. Exit 77 (a ctest skip, reason printed) when a
capability is missing (python3-grpcio, python3-pytest, python3-protobuf); a program the tests need
that is not built (strata-sidecar, strata-sim, the generated stubs) is a failure."""

import importlib.util
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def skip(reason: str) -> None:
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(77)


for module, package in (("grpc", "python3-grpcio"), ("pytest", "python3-pytest"),
                        ("google.protobuf", "python3-protobuf")):
    if importlib.util.find_spec(module) is None:
        skip(f"the Python module {module} is missing (Debian package {package})")

sys.path.insert(0, str(HERE))
import sidecar_testing  # noqa: E402

missing = sidecar_testing.missing_programs()
if missing:
    print("FAILED: not built: " + ", ".join(missing) + " (build the strata_sidecar and strata_sim "
          "targets)", flush=True)
    sys.exit(1)

import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", str(HERE / sys.argv[1]), *sys.argv[2:]]))
