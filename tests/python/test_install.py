"""`pip install ./bindings/python` into a fresh venv (with the system site packages, as Debian's
pip requires), then `import strata` in that venv. The in-tree build backend reuses this test run's
build directory, so nothing is compiled twice and nothing is downloaded."""

import os
import pathlib
import subprocess
import sys

import pytest

from conftest import BUILD, REPO


def test_pip_install_into_a_venv_then_import(tmp_path):
    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot create a venv (install python3-venv): {made.stderr.strip()}")
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["STRATA_PY_BUILD_DIR"] = str(BUILD)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
         str(REPO / "bindings" / "python")],
        capture_output=True, text=True, env=env, timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    check = subprocess.run(
        [str(python), "-c",
         "import strata, sys; print(strata.__file__); "
         "print(strata.Tokenizer.from_spec('estimate:4').count('x' * 40)); "
         "print(strata.trim_messages([{'role': 'user', 'content': 'hi'}], 1000).messages)"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert check.returncode == 0, check.stderr
    location, count, messages = check.stdout.splitlines()
    assert pathlib.Path(location).is_relative_to(venv)
    assert count == "10"
    assert messages == "[{'content': 'hi', 'role': 'user'}]"
