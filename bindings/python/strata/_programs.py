"""The programs that come with the package: ``strata`` (the CLI), ``strata-sim`` (the endpoint
simulator) and ``strata-sidecar``. ``pip install`` puts them in the wheel (``strata/_bin/``) and
installs console scripts of the same names, which run them with the script's arguments."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import List, NoReturn, Optional

PROGRAMS = ("strata", "strata-sim", "strata-sidecar")

_HERE = pathlib.Path(__file__).resolve().parent


def program_path(name: str) -> str:
    """The path of the program ``name`` ("strata", "strata-sim" or "strata-sidecar"): the copy
    in the installed wheel, else (the package imported from a CMake build's ``python/``
    directory) the one in that build. Raises FileNotFoundError saying how to get it."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown program {name!r} (one of {', '.join(PROGRAMS)})")
    candidates = [_HERE / "_bin" / name, _HERE.parent.parent / "sdk" / "apps" / name / name]
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(
        f"{name} is not installed with this strata package ({_HERE}): install it with the "
        "programs (pip install ./bindings/python, without STRATA_PY_PROGRAMS=0), or build the "
        f"{name} target in the CMake build")


def _exec(name: str, argv: Optional[List[str]] = None) -> NoReturn:
    try:
        path = program_path(name)
    except FileNotFoundError as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(127)
    if not os.access(path, os.X_OK):  # an installer that dropped the mode bits
        os.chmod(path, 0o755)
    args = sys.argv[1:] if argv is None else argv
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name, *args])


def strata_main() -> NoReturn:
    """The ``strata`` console script."""
    _exec("strata")


def strata_sim_main() -> NoReturn:
    """The ``strata-sim`` console script."""
    _exec("strata-sim")


def strata_sidecar_main() -> NoReturn:
    """The ``strata-sidecar`` console script."""
    _exec("strata-sidecar")
