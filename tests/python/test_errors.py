"""Status codes as exceptions: one strata.Error subclass per canonical code, carrying the C++
message with the C++ API names it mentions in their Python spelling."""

import pytest

import strata
from strata import _errors

CANONICAL = {
    1: ("CANCELLED", strata.Cancelled),
    2: ("UNKNOWN", strata.Unknown),
    3: ("INVALID_ARGUMENT", strata.InvalidArgument),
    4: ("DEADLINE_EXCEEDED", strata.DeadlineExceeded),
    5: ("NOT_FOUND", strata.NotFound),
    6: ("ALREADY_EXISTS", strata.AlreadyExists),
    7: ("PERMISSION_DENIED", strata.PermissionDenied),
    8: ("RESOURCE_EXHAUSTED", strata.ResourceExhausted),
    9: ("FAILED_PRECONDITION", strata.FailedPrecondition),
    10: ("ABORTED", strata.Aborted),
    11: ("OUT_OF_RANGE", strata.OutOfRange),
    12: ("UNIMPLEMENTED", strata.Unimplemented),
    13: ("INTERNAL", strata.Internal),
    14: ("UNAVAILABLE", strata.Unavailable),
    15: ("DATA_LOSS", strata.DataLoss),
    16: ("UNAUTHENTICATED", strata.Unauthenticated),
}


@pytest.mark.parametrize("value", sorted(CANONICAL))
def test_every_canonical_code_has_its_exception(value):
    name, cls = CANONICAL[value]
    err = _errors.from_status(value, "what went wrong")
    assert type(err) is cls
    assert isinstance(err, strata.Error)
    assert (err.code, err.code_value, err.message) == (name, value, "what went wrong")
    assert str(err) == f"{name}: what went wrong"


def test_an_unknown_code_is_unknown_with_its_number():
    err = _errors.from_status(99, "m")
    assert isinstance(err, strata.Unknown) and err.code == "UNKNOWN_CODE_99"


def test_exceptions_also_subclass_the_matching_builtin():
    assert issubclass(strata.InvalidArgument, ValueError)
    assert issubclass(strata.NotFound, LookupError)
    assert issubclass(strata.DeadlineExceeded, TimeoutError)
    assert issubclass(strata.Unavailable, ConnectionError)


def test_bad_tokenizer_spec_raises_invalid_argument_with_the_cpp_message():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.Tokenizer.from_spec("bogus")
    assert info.value.message.startswith('unknown tokenizer spec "bogus"')
    assert info.value.code == "INVALID_ARGUMENT"


def test_bad_config_names_the_key_path():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.Agent.create({"identity": {"id": "a"}, "budget": {"window": "big"}})
    assert "budget.window" in info.value.message


def test_unknown_config_key_is_refused():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.Agent.create({"identity": {"id": "a"}, "endpoint": {"base_ur": "x"}})
    assert "base_ur" in info.value.message


def test_open_of_an_unknown_agent_is_not_found(tmp_path):
    db = str(tmp_path / "agents.db")
    agent = strata.Agent.create({"identity": {"id": "present"}, "store_path": db})
    del agent
    with pytest.raises(strata.NotFound) as info:
        strata.Agent.open(db, "absent")
    assert "absent" in info.value.message


def test_create_with_a_taken_id_is_already_exists(tmp_path):
    db = str(tmp_path / "agents.db")
    first = strata.Agent.create({"identity": {"id": "a"}, "store_path": db})
    with pytest.raises(strata.AlreadyExists):
        strata.Agent.create({"identity": {"id": "a"}, "store_path": db})
    assert first.id == "a"


def test_recall_of_an_unknown_id_is_not_found():
    agent = strata.Agent.create({"identity": {"id": "a"}})
    with pytest.raises(strata.NotFound) as info:
        agent.recall("r-0000000000000000")
    assert "r-0000000000000000" in info.value.message


def test_unknown_layer_is_invalid_argument_naming_the_layers():
    agent = strata.Agent.create({"identity": {"id": "a"}})
    with pytest.raises(strata.InvalidArgument) as info:
        agent.put_document("readme", "text", layer="attic")
    assert '"attic"' in info.value.message and "docs" in info.value.message


def test_tool_result_for_an_unknown_call_changes_nothing():
    agent = strata.Agent.create({"identity": {"id": "a"}})
    agent.append_user("hi")
    before = agent.messages()
    with pytest.raises(strata.InvalidArgument) as info:
        agent.append_tool_result("call_7", "output")
    assert "call_7" in info.value.message
    assert agent.messages() == before


def test_malformed_messages_name_the_index():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.trim_messages([{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}],
                             1000)
    assert info.value.message.startswith('messages[1]: unknown role "wizard"')


def test_a_budget_that_cannot_hold_the_system_prompt_is_resource_exhausted():
    with pytest.raises(strata.ResourceExhausted):
        strata.trim_messages([{"role": "system", "content": "word " * 2000},
                              {"role": "user", "content": "hi"}], 100)


def test_python_type_errors_are_raised_before_reaching_cpp():
    with pytest.raises(TypeError):
        strata.Agent.create(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        strata.trim_messages([], "100")  # type: ignore[arg-type]


def test_messages_name_the_python_api_not_the_cpp_one():
    agent = strata.Agent.create({"identity": {"id": "no-endpoint"}})
    with pytest.raises(strata.FailedPrecondition) as e:
        agent.run("hi")
    assert "AgentServices" not in e.value.message
    assert "endpoint.base_url" in e.value.message and "Agent.open" in e.value.message
    from strata._errors import python_message
    assert python_message("set OpenOptions::retokenize to recount") == \
        "pass retokenize=True to Agent.open to recount"
    assert python_message("append their results with AppendToolResult first") == \
        "append their results with append_tool_result (or dispatch_tool_calls) first"
    assert "Timeouts::" not in python_message(
        "a long prefill needs a larger Timeouts::first_byte or prefill_per_100k_tokens")


def test_a_new_agent_has_empty_messages_and_a_zero_prediction():
    agent = strata.Agent.create({"identity": {"id": "new"}})
    assert agent.messages() == []
    assert agent.input_tokens() == 0
    prediction = agent.predict()
    assert (prediction.input_tokens, prediction.predicted_cached_tokens,
            prediction.compaction_due, prediction.compaction) == (0, 0, False, None)


def test_a_compaction_report_carries_the_policys_explanation():
    messages = [{"role": "system", "content": "sys"}]
    for i in range(40):
        messages += [{"role": "user", "content": f"question {i}: " + "words " * 40},
                     {"role": "assistant", "content": f"answer {i}: " + "more words " * 40}]
    report = strata.trim_messages(messages, 2000).report
    assert report is not None
    assert "chosen: boundary" in report.explanation and "saving" in report.explanation
    assert report.to_dict()["explanation"] == report.explanation
