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


def tool_conversation(turns):
    messages = [{"role": "system", "content": "sys"}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"task {i} " + "x " * 50})
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\": \"f\"}"}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "name": "read",
                         "content": "y " * 80})
        messages.append({"role": "assistant", "content": f"done {i}"})
    return messages


def assert_paired(messages):
    open_calls = set()
    for m in messages:
        for c in m.get("tool_calls") or []:
            open_calls.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls
    results = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    assert open_calls <= results  # no call left without its result either


def test_kept_messages_are_the_callers_own_dicts_every_key_kept():
    messages = tool_conversation(3)
    messages[1]["metadata"] = {"source": "ui"}  # a key strata does not know
    result = strata.trim_messages(messages, 100000)
    assert result.messages == messages
    assert all(kept is given for kept, given in zip(result.messages, messages))
    assert result.messages[3]["name"] == "read"
    trimmed = strata.trim_messages(tool_conversation(30), 3000, policy="sliding")
    assert all("name" in m for m in trimmed.messages if m["role"] == "tool")


def test_a_masked_tool_result_is_a_copy_with_only_its_content_changed():
    messages = tool_conversation(30)
    result = strata.trim_messages(messages, 6000, policy="observation-masking")
    masked = [m for m in result.messages if m["role"] == "tool" and m not in messages]
    assert masked, "the mask policy masked nothing"
    for m in masked:
        original = next(g for g in messages if g.get("tool_call_id") == m["tool_call_id"])
        assert {k: v for k, v in m.items() if k != "content"} == \
            {k: v for k, v in original.items() if k != "content"}
    assert_paired(result.messages)


def test_a_tokenizer_object_is_accepted_and_counts_as_its_spec_does():
    messages = conversation(40)
    tokenizer = strata.Tokenizer.from_spec("estimate:3")
    by_object = strata.trim_messages(messages, 2000, tokenizer=tokenizer)
    by_spec = strata.trim_messages(messages, 2000, tokenizer="estimate:3")
    assert by_object.messages == by_spec.messages
    assert by_object.input_tokens == by_spec.input_tokens <= 2000
    with pytest.raises(TypeError, match="strata.Tokenizer or a tokenizer spec"):
        strata.trim_messages(messages, 2000, tokenizer=42)  # type: ignore[arg-type]


def test_content_part_lists_are_accepted_and_kept_as_given():
    parts = [{"type": "text", "text": "look at this " + "word " * 30},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    messages = [{"role": "system", "content": [{"type": "text", "text": "sys"}]}]
    for i in range(30):
        messages.append({"role": "user", "content": parts})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    fits = strata.trim_messages(messages, 100000)
    assert fits.messages == messages
    trimmed = strata.trim_messages(messages, 1500)
    assert trimmed.input_tokens <= 1500 < fits.input_tokens
    assert trimmed.messages[0] is messages[0]
    assert trimmed.messages[-1] is messages[-1]
    with pytest.raises(strata.InvalidArgument, match=r"messages\[0\].content"):
        strata.trim_messages([{"role": "user", "content": [42]}], 1000)


@pytest.mark.parametrize("strategy", ["last", "first"])
def test_strategies_keep_the_newest_or_oldest_that_fit_never_splitting_a_call(strategy):
    messages = tool_conversation(30)
    calls = []

    def counter(msgs):
        calls.append(len(msgs))
        return sum(len(str(m.get("content") or "")) // 4 + 4 for m in msgs)

    result = strata.trim_messages(messages, 1500, strategy=strategy, token_counter=counter)
    assert calls and result.input_tokens == counter(result.messages) <= 1500
    assert result.messages[0] is messages[0]  # the system message
    rest = result.messages[1:]
    if strategy == "last":
        assert rest == messages[len(messages) - len(rest):]
        assert rest[0]["role"] != "tool"
    else:
        assert rest == messages[1:1 + len(rest)]
    assert_paired(result.messages)
    # One more group would not have fit.
    assert len(rest) < len(messages) - 1 and result.report is None


def test_strategy_first_counts_with_the_tokenizer_and_template_by_default():
    messages = conversation(40)
    result = strata.trim_messages(messages, 2000, strategy="first")
    assert result.messages == messages[:len(result.messages)]
    assert result.input_tokens <= 2000
    template = strata.ChatTemplate.glm5()
    assert result.input_tokens == template.count_tokens(
        result.messages, strata.Tokenizer.from_spec("estimate"))


def test_a_token_counter_needs_a_strategy():
    with pytest.raises(ValueError, match="token_counter needs strategy"):
        strata.trim_messages(conversation(2), 1000, token_counter=len)
    with pytest.raises(ValueError, match="strategy must be"):
        strata.trim_messages(conversation(2), 1000, strategy="middle")  # type: ignore[arg-type]
