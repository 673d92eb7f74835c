"""strata.Store: reading what agents recorded (agents, request records, events, growth curves)."""

import json
import sqlite3

import pytest

import strata

SCRIPT = [{"role": "assistant", "content": f"answer {i}"} for i in range(3)]


def run_agent(sim, db):
    agent = strata.Agent.create({"identity": {"id": "stored"}, "endpoint": {"base_url": sim.base_url},
                                 "store_path": str(db)})
    agent.set_system_prompt("Short answers.")
    return [agent.run(f"question {i}").turns[0] for i in range(3)]


def test_store_reads_agents_records_and_growth(start_sim, tmp_path):
    sim = start_sim(SCRIPT)
    db = tmp_path / "agents.db"
    turns = run_agent(sim, db)
    store = strata.Store.open(str(db))
    assert store.path == str(db)
    agents = store.agents()
    assert [a["id"] for a in agents] == ["stored"]
    assert agents[0]["requests"] == 3
    records = store.requests("stored")
    assert len(records) == 3
    assert records[0] == turns[-1].record  # newest first, the same record the turn returned
    assert {r.request_id for r in records} == {t.record.request_id for t in turns}
    assert len(store.requests("stored", limit=1)) == 1
    growth = store.growth("stored")
    assert [g.turn for g in growth] == [t.growth.turn for t in turns]
    assert growth[-1].layer_tokens == turns[-1].growth.layer_tokens
    assert isinstance(store.events("stored"), list)
    stats = store.stats()
    assert stats["agents"] == 1 and stats["requests"] == 3
    backup = tmp_path / "copy.db"
    store.backup(str(backup))
    assert strata.Store.open(str(backup)).growth("stored") == growth


def test_store_growth_carries_the_summary_requests_tokens(start_sim, tmp_path):
    sim = start_sim(SCRIPT)
    db = tmp_path / "agents.db"
    turns = run_agent(sim, db)
    for t in turns:  # no compaction, no summary request
        g = t.growth
        assert (g.summary_input_tokens, g.summary_cached_tokens, g.summary_output_tokens) == (0, 0, 0)
    summarized = turns[1].growth.turn
    with sqlite3.connect(str(db)) as conn:  # as if that turn's summary request had been sent
        conn.execute("UPDATE growth SET summary_input_tokens = 2150, summary_cached_tokens = 2048, "
                     "summary_output_tokens = 310 WHERE turn = ?", (summarized,))
    conn.close()
    growth = strata.Store.open(str(db)).growth("stored")
    assert [(g.summary_input_tokens, g.summary_cached_tokens, g.summary_output_tokens)
            for g in growth] == [(2150, 2048, 310) if g.turn == summarized else (0, 0, 0)
                                 for g in growth]
    assert growth[1].to_dict()["summary_cached_tokens"] == 2048


def test_store_errors(tmp_path):
    with pytest.raises(strata.NotFound):
        strata.Store.open(str(tmp_path / "missing.db"))
    not_a_db = tmp_path / "text.db"
    not_a_db.write_text("this is not a database " * 100)
    with pytest.raises(strata.Error) as info:
        strata.Store.open(str(not_a_db))
    assert isinstance(info.value, (strata.DataLoss, strata.FailedPrecondition))
    created = strata.Store.open(str(tmp_path / "new.db"), read_only=False, create_if_missing=True)
    assert created.agents() == []
    with pytest.raises(strata.NotFound):
        created.growth("nobody")
