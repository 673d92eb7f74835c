"""strata.trim_messages: LangChain-style trimming of an OpenAI messages list into a budget."""

import pytest

import strata


def conversation(turns):
    messages = [{"role": "system", "content": "You are a careful assistant."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i}: " + "words " * 40})
        messages.append({"role": "assistant", "content": f"answer {i}: " + "more words " * 40})
    return messages


def test_a_list_that_fits_is_returned_unchanged():
    messages = conversation(2)
    result = strata.trim_messages(messages, 100000)
    assert result.messages == messages
    assert result.report is None
    assert result.input_tokens > 0


def test_trimming_fits_the_budget_keeps_the_system_first_and_reports():
    messages = conversation(40)
    result = strata.trim_messages(messages, 2000)
    assert result.input_tokens <= 2000
    assert len(result.messages) < len(messages)
    assert result.messages[0] == messages[0]
    assert result.messages[-1]["content"] == messages[-1]["content"]
    report = result.report
    assert isinstance(report, strata.CompactionReport)
    assert report.tokens_before > 2000 >= report.tokens_after
    assert report.to_dict()["policy"] == report.policy
    d = result.to_dict()
    assert d["report"] == report.to_dict() and d["messages"] == result.messages


def test_tool_results_stay_with_their_calls():
    messages = [{"role": "system", "content": "sys"}]
    for i in range(30):
        messages.append({"role": "user", "content": f"task {i} " + "x " * 50})
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\": \"f\"}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "y " * 80})
        messages.append({"role": "assistant", "content": f"done {i}"})
    result = strata.trim_messages(messages, 3000, policy="sliding")
    open_calls = set()
    for m in result.messages:
        for c in m.get("tool_calls") or []:
            open_calls.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls


def test_a_budget_dict_is_an_agent_budget_configuration():
    messages = conversation(40)
    budget = {"window": 8192, "target": {"fraction": 0.5}}
    figures = strata.resolve_budget(budget)
    assert figures["window"] == 8192
    assert figures["target_tokens"] < figures["trigger_tokens"] <= figures["usable_input_tokens"]
    result = strata.trim_messages(messages, budget)
    assert result.report is not None
    assert result.report.tokens_before > figures["usable_input_tokens"] >= result.input_tokens


def test_exact_counting_with_a_tokenizer_and_template():
    from conftest import SPM_MODEL
    messages = conversation(3)
    result = strata.trim_messages(messages, 100000, tokenizer=f"spm:{SPM_MODEL}")
    tok = strata.Tokenizer.from_spec(f"spm:{SPM_MODEL}")
    assert result.input_tokens == strata.ChatTemplate.glm5().count_tokens(messages, tok)


def test_bad_budget_is_invalid_argument():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.trim_messages(conversation(1), {"window": -5})
    assert "window" in info.value.message
