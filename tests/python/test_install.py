"""`pip install ./bindings/python` into a fresh venv (with the system site packages, as Debian's
pip requires), then `import strata` in that venv, its console scripts, and docs/python.md's quick
start run from the venv as the page says. The in-tree build backend reuses this test run's build
directory, so nothing is compiled twice and nothing is downloaded."""

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

from conftest import BUILD, REPO
from test_docs import python_blocks


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
    assert messages == "[{'role': 'user', 'content': 'hi'}]"  # the caller's dict, as given
    check_programs_and_quick_start(venv, env, tmp_path)


def quick_start_command():
    """The documented command that starts strata-sim (the quick start's first sh block)."""
    text = (REPO / "docs" / "python.md").read_text()
    quick = text[text.index("## Quick start"):]
    block = re.search(r"```sh\n(.*?)```", quick, re.S).group(1)
    command = block.replace("\\\n", " ").splitlines()[0].rstrip(" &")
    return shlex.split(command)


def check_programs_and_quick_start(venv, env, tmp_path):
    bin_dir = venv / "bin"
    for name in ("strata", "strata-sim", "strata-sidecar"):
        assert (bin_dir / name).is_file(), f"pip installed no {name} console script"
        helped = subprocess.run([str(bin_dir / name), "--help"], capture_output=True, text=True,
                                env=env, timeout=60)
        assert helped.returncode == 0, (name, helped.stderr)
        assert "usage" in (helped.stdout + helped.stderr).lower(), name
    # The quick start as written, from the checkout, but on port 0 (a test binds no fixed port).
    command = quick_start_command()
    assert command[0] == ".venv/bin/strata-sim"
    command[0] = str(bin_dir / "strata-sim")
    command[command.index("--port") + 1] = "0"
    sim = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True, env=env)
    try:
        fields = dict(f.split("=", 1) for f in sim.stdout.readline().split()[1:])
        program = tmp_path / "quick_start.py"
        program.write_text("\n".join(python_blocks()))
        out = subprocess.run([str(venv / "bin" / "python"), str(program)],
                             cwd=REPO / "examples" / "python", capture_output=True, text=True,
                             env=dict(env, STRATA_ENDPOINT=f"http://{fields['http']}/v1"),
                             timeout=300)
        assert out.returncode == 0, out.stderr
        assert "1 answer" in out.stdout and "It runs a strata agent" in out.stdout
    finally:
        sim.terminate()
        sim.wait(timeout=30)


def test_program_path_finds_the_programs_of_the_build_the_package_comes_from():
    import strata
    from conftest import SIM
    assert pathlib.Path(strata.program_path("strata-sim")) == SIM
    with pytest.raises(ValueError, match="unknown program"):
        strata.program_path("strata-nothing")
