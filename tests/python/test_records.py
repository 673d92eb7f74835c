"""Typed records: strata/_records.py is generated from the C++ headers (bindings/python/
gen_records.py), its classes' fields are exactly the keys the C++ JSON carries, records are frozen
dataclasses, and mypy --strict catches a misspelled field or kind."""

import dataclasses
import importlib.util
import json
import subprocess
import sys
import typing

import pytest

import strata
from conftest import PACKAGE_DIR, REPO
from strata import _strata

GENERATOR = REPO / "bindings" / "python" / "gen_records.py"


def test_the_committed_records_are_what_the_headers_generate():
    out = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_generator_notices_a_member_added_to_a_struct(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gen_records", GENERATOR)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    include = tmp_path / "strata"
    include.mkdir()
    for header in gen.INCLUDE.glob("*.h"):
        (include / header.name).write_text(header.read_text())
    record_h = include / "record.h"
    record_h.write_text(record_h.read_text().replace(
        "  std::string error;                  // message when code != kOk",
        "  std::string error;                  // message when code != kOk\n"
        "  int64_t retries_left = 0;  // a new member"))
    monkeypatch.setattr(gen, "INCLUDE", include)
    assert "retries_left: int = _absent(0)" in gen.generate()
    assert gen.generate() != (REPO / "bindings/python/strata/_records.py").read_text()


def test_each_class_has_exactly_the_keys_of_the_cpp_json():
    samples = json.loads(_strata._record_samples())
    classes = {cls.__name__: cls for cls in strata._records.RECORD_TYPES}
    assert set(samples) == set(classes)
    for name, sample in samples.items():
        fields = [f.name for f in dataclasses.fields(classes[name])]
        assert sorted(fields) == sorted(sample), name
        record = classes[name]._from(sample)
        assert record.to_dict() == sample


def test_records_are_frozen_dataclasses_with_typed_fields():
    sample = json.loads(_strata._record_samples())["RequestRecord"]
    record = strata.RequestRecord._from(sample)
    assert dataclasses.is_dataclass(record)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.input_tokens = 3  # type: ignore[misc]
    assert record.code == "OK" and record.cached_tokens_reported == 1
    assert record["code"] == "OK"  # the dict-style access of earlier versions still works
    # A key the C++ JSON leaves out when empty reads as its default.
    del sample["degradation"]
    assert strata.RequestRecord._from(sample).degradation == ""


MYPY_MISTAKES = '''
import strata

def check(turn: strata.Turn, store: strata.Store) -> None:
    tokens: int = turn.record.input_tokenz
    kind: strata.DeltaKind = "contnet"
    code: strata.StatusCodeName = "INVALID_ARGUMENTS"
    history: str = turn.growth.layer_tokens["history"]
    for event in store.events("a"):
        print(event.payloadd)
    print(turn.compactions[0].explanation.upper(), turn.response.usage.cached_tokenz)
'''


def test_mypy_strict_catches_misspelled_fields_and_kinds(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed for this interpreter (Debian package mypy)")
    bad = tmp_path / "bad.py"
    bad.write_text(MYPY_MISTAKES)
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(bad)],
                         cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout
    for line, what in [(5, "input_tokenz"), (6, "contnet"), (7, "INVALID_ARGUMENTS"),
                       (8, "history"), (10, "payloadd"), (11, "cached_tokenz")]:
        assert f"bad.py:{line}:" in out.stdout, (line, out.stdout)
    for what in ["input_tokenz", "payloadd", "cached_tokenz"]:
        assert f'has no attribute "{what}"' in out.stdout, out.stdout


def test_the_config_typeddicts_name_every_key_of_a_normalized_configuration():
    def check(value, typed, where):
        hints = typing.get_type_hints(typed)
        assert set(value) <= set(hints), (where, set(value) - set(hints))
        for key, v in value.items():
            hint = hints[key]
            if isinstance(v, dict) and typing.is_typeddict(hint):
                check(v, hint, f"{where}.{key}")

    config = strata.normalize_config({"identity": {"id": "x"}})
    check(config, strata.AgentConfig, "config")
    assert set(config) == set(typing.get_type_hints(strata.AgentConfig))


MYPY_CONFIG = '''
import strata

config: strata.AgentConfig = {"identity": {"id": "a"}, "budget": {"windw": 8192}}
window: str = strata.normalize_config(config)["budget"]["window"]
'''


def test_mypy_strict_catches_a_misspelled_config_key(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed for this interpreter (Debian package mypy)")
    bad = tmp_path / "bad_config.py"
    bad.write_text(MYPY_CONFIG)
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(bad)],
                         cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stdout
    assert "bad_config.py:4:" in out.stdout and '"windw"' in out.stdout, out.stdout
    assert "bad_config.py:5:" in out.stdout, out.stdout
