"""`pip install ./bindings/python` from scratch: a fresh venv (with the system site packages, as
Debian's pip requires) and no build directory, so the in-tree backend runs a full CMake configure
and build of the extension and everything it links, then `import strata` works in that venv.
Slow (the whole SDK is compiled): marked `slow`, so `scripts/test --quick` leaves it out and
`scripts/test` runs it."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import BUILD, REPO


@pytest.mark.slow
def test_pip_install_from_scratch_configures_and_builds_then_imports(tmp_path):
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot create a venv (install python3-venv): {made.stderr.strip()}")
    python = venv / "bin" / "python"
    # The backend's build directory: empty. Beside the suite's build directory when there is one
    # (inside the checkout, so that ccache, whose base directory is the checkout, can reuse the
    # suite's objects) and with its build type; else in the test's temporary directory.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "STRATA_PY_BUILD_DIR", "STRATA_BUILD_DIR")}
    build_dir = tmp_path / "build"
    if (BUILD / "CMakeCache.txt").is_file():
        suite_cache = (BUILD / "CMakeCache.txt").read_text()
        build_type = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", suite_cache, re.M)
        if build_type and build_type.group(1):
            env["STRATA_PY_BUILD_TYPE"] = build_type.group(1)
        build_dir = BUILD / f"pip-from-scratch-{os.getpid()}"
        shutil.rmtree(build_dir, ignore_errors=True)
    env["STRATA_PY_BUILD_DIR"] = str(build_dir)
    # The extension only: the programs the wheel can carry (strata, strata-sim, strata-sidecar)
    # would double this test's time; test_install.py checks them from the suite's build.
    env["STRATA_PY_PROGRAMS"] = "0"
    started = time.monotonic()
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-v",
         str(REPO / "bindings" / "python")],
        capture_output=True, text=True, env=env, timeout=7200)
    seconds = time.monotonic() - started
    assert install.returncode == 0, install.stdout[-5000:] + install.stderr[-5000:]
    print(f"pip install from scratch: {seconds:.0f} s")
    # The backend configured this (previously absent) directory and built the SDK in it.
    cache = (build_dir / "CMakeCache.txt").read_text()
    assert "STRATA_BUILD_PYTHON:BOOL=ON" in cache
    assert re.search(rf"^Python_EXECUTABLE:\w+={re.escape(os.path.realpath(python))}$", cache, re.M)
    assert list(build_dir.glob("sdk/src/core/libstrata_core.a"))
    check = subprocess.run(
        [str(python), "-c",
         "import strata; print(strata.__file__); "
         "print(strata.Tokenizer.from_spec('estimate:4').count('x' * 40)); "
         "ctx = strata.Context({'identity': {'id': 'a'}}); ctx.append_user('hi'); "
         "print(ctx.build().messages)"],
        capture_output=True, text=True, env={k: v for k, v in env.items()
                                             if k != "STRATA_PY_BUILD_DIR"},
        cwd=tmp_path, timeout=120)
    assert check.returncode == 0, check.stderr
    location, count, messages = check.stdout.splitlines()
    assert pathlib.Path(location).is_relative_to(venv)
    assert count == "10"
    assert messages == "[{'role': 'user', 'content': 'hi'}]"
    shutil.rmtree(build_dir, ignore_errors=True)
