"""strata.Tokenizer and strata.ChatTemplate: the lower level, exact counts as the server's."""

import json

import pytest

import strata
from conftest import SPM_MODEL

SPEC = f"spm:{SPM_MODEL}"


def test_spm_tokenizer_encodes_counts_and_decodes():
    tok = strata.Tokenizer.from_spec(SPEC)
    assert not tok.is_estimate
    assert tok.name.startswith("spm:")
    ids = tok.encode("hello world, hello strata")
    assert ids and all(isinstance(i, int) for i in ids)
    assert tok.count("hello world, hello strata") == len(ids)
    assert tok.decode(ids) == "hello world, hello strata"


def test_estimate_tokenizer_counts_bytes_and_encodes_nothing():
    tok = strata.Tokenizer.from_spec("estimate:4")
    assert tok.is_estimate
    assert tok.count("x" * 40) == 10
    assert tok.count("") == 0
    assert tok.encode("abc") == []


def test_missing_tokenizer_file_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "nope.model"
    with pytest.raises(strata.Error) as info:
        strata.Tokenizer.from_spec(f"spm:{missing}")
    assert str(missing) in info.value.message


def test_glm5_template_renders_a_messages_list_dict_or_json():
    ct = strata.ChatTemplate.glm5()
    assert ct.name.startswith("glm-5.3")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    text = ct.render(messages)
    assert text == ct.render({"messages": messages}) == ct.render(json.dumps({"messages": messages}))
    assert "<|system|>" in text and "Be brief." in text and "<|user|>" in text
    assert text.endswith("<|assistant|><think>") or "<|assistant|>" in text[-20:]
    no_prompt = strata.ChatTemplate.glm5(add_generation_prompt=False).render(messages)
    assert "<|assistant|>" not in no_prompt


def test_count_tokens_is_tokenizer_count_of_render_plus_overhead():
    tok = strata.Tokenizer.from_spec(SPEC)
    for ct in (strata.ChatTemplate.glm5(), strata.ChatTemplate.generic(per_message_tokens=5)):
        messages = [{"role": "user", "content": "count me exactly, please"}]
        expected = tok.count(ct.render(messages)) + ct.overhead_tokens(messages)
        assert ct.count_tokens(messages, tok) == expected
    generic = strata.ChatTemplate.generic(per_message_tokens=5, per_request_tokens=3)
    assert generic.overhead_tokens([{"role": "user", "content": "a"}] * 2) == 2 * 5 + 3


def test_template_errors_carry_the_cpp_message():
    with pytest.raises(strata.InvalidArgument) as info:
        strata.ChatTemplate.glm5().render({"model": "m"})
    assert "messages" in info.value.message
    with pytest.raises(ValueError):
        strata.ChatTemplate.from_name("chatml")
    assert strata.ChatTemplate.from_name("generic").name == strata.ChatTemplate.generic().name


def test_templates_by_name():
    assert strata.ChatTemplate.names() == ["glm-5.3", "glm-4.7", "generic"]
    assert strata.ChatTemplate.from_name("glm5").name == strata.ChatTemplate.glm5().name
    assert strata.ChatTemplate.from_name("glm-4.7").name == strata.ChatTemplate.glm47().name
    with pytest.raises(strata.InvalidArgument) as info:
        strata.ChatTemplate.from_name("chatml")
    assert "glm-5.3" in info.value.message
    messages = [{"role": "user", "content": "hi"}]
    # GLM-5.3 always opens the assistant turn with <think>; GLM-4.7's prompt differs from it.
    assert strata.ChatTemplate.glm5().render(messages) != strata.ChatTemplate.glm47().render(messages)


def test_constructors_refuse_arbitrary_objects():
    with pytest.raises(TypeError):
        strata.Tokenizer(object())
    with pytest.raises(TypeError):
        strata.ChatTemplate(object())
