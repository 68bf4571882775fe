"""Structured output and log-probabilities through the real `openai` client (slow: the default
chat model). Every answer made under a schema parses and validates against it (jsonschema);
the log-probabilities match a direct forward pass over the same tokens."""

from __future__ import annotations

import json

import httpx
import jsonschema
import numpy as np
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ASK = [{"role": "user", "content": "Describe a cat called Tom as JSON."}]

# Strings are bounded so that an answer always closes within max_tokens: the grammar makes
# every answer valid, but an answer cut by the token limit is a cut answer.
NAME = {"type": "string", "maxLength": 12}
SCHEMAS = {
    "nested objects, required": {
        "type": "object", "required": ["name", "owner"], "additionalProperties": False,
        "properties": {"name": NAME, "owner": {
            "type": "object", "required": ["name", "city"], "additionalProperties": False,
            "properties": {"name": NAME, "city": NAME}}}},
    "arrays with bounds": {
        "type": "object", "required": ["toys"],
        "properties": {"toys": {"type": "array", "items": NAME, "minItems": 1, "maxItems": 3}}},
    "enums": {
        "type": "object", "required": ["colour", "mood"],
        "properties": {"colour": {"enum": ["black", "white", "ginger"]},
                       "mood": {"type": "string", "enum": ["calm", "wild"]}}},
    "bounded numbers": {
        "type": "object", "required": ["age", "lives", "weight"],
        "properties": {"age": {"type": "integer", "minimum": 1, "maximum": 30},
                       "lives": {"type": "integer", "minimum": 0},
                       "weight": {"type": "number", "minimum": 0}}},
    "patterns": {
        "type": "object", "required": ["code", "born"],
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
                       "born": {"type": "string", "format": "date"}}},
    "booleans, null, anyOf": {
        "type": "object", "required": ["indoor", "chip"],
        "properties": {"indoor": {"type": "boolean"},
                       "chip": {"anyOf": [{"type": "null"}, {"type": "integer",
                                                              "minimum": 0, "maximum": 99}]}}},
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_a_json_schema_answer_parses_and_validates(served, name):
    schema = SCHEMAS[name]
    reply = served.client().chat.completions.create(
        model="any", messages=ASK, max_tokens=120, temperature=0,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "cat", "strict": True, "schema": schema}})
    choice = reply.choices[0]
    assert choice.finish_reason == "stop", choice.message.content
    jsonschema.validate(json.loads(choice.message.content), schema)
    figures = reply.model_extra["x_workbench"]
    assert figures["grammar_ms_per_token"] > 0  # measured, outside the decode time


def test_json_object_streams_a_valid_object_even_when_sampled(served):
    text = "".join(c.choices[0].delta.content or "" for c in served.client().chat.completions
                   .create(model="any", messages=ASK, max_tokens=120, temperature=1.0, seed=7,
                           stream=True, response_format={"type": "json_object"},
                           stop=None)
                   if c.choices)
    assert isinstance(json.loads(text), dict), text


def test_a_completion_follows_its_grammar(served):
    reply = served.client().completions.create(
        model="any", prompt="Is the sky green? Answer:", max_tokens=8, temperature=0,
        extra_body={"grammar": 'root ::= " " ("yes" | "no") "."'})
    # A completion is the prompt's next characters, exactly: the grammar's leading space too.
    assert reply.choices[0].text in (" yes.", " no.")
    assert reply.choices[0].finish_reason == "stop"


def test_unsupported_schemas_and_bad_grammars_are_400s_that_say_why(served):
    with httpx.Client(base_url=served.base, timeout=30) as http:
        r = http.post("/chat/completions", json={
            "messages": ASK, "response_format": {"type": "json_schema", "json_schema": {
                "name": "x", "schema": {"type": "array", "uniqueItems": True}}}})
        assert r.status_code == 400 and "uniqueItems" in r.json()["error"]["message"]
        r = http.post("/completions", json={"prompt": "a", "grammar": "root ::= ("})
        assert r.status_code == 400 and "grammar" in r.json()["error"]["message"]
    # The server goes on serving.
    assert served.client().completions.create(model="any", prompt="1, 2,", max_tokens=2)


def _direct_logprobs(model_path, prompt: str, tokens: list[int]) -> list[np.ndarray]:
    """log-softmax of the logits before each of `tokens`, from a fresh context that reads the
    prompt and then each token, as the session did."""
    from workbench.backend import llama

    model = llama.Model(model_path, llama.ModelParams())
    ctx = llama.Context(model, llama.ContextParams(n_ctx=512, n_batch=512, n_ubatch=0,
                                                   n_threads=1))
    try:
        prompt_tokens = model.tokenize(prompt, add_special=True, parse_special=True)
        assert ctx.decode(prompt_tokens) == 0
        out = []
        for tok in tokens:
            logits = ctx.logits().astype(np.float64)
            out.append(logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum())))
            assert ctx.decode_one(tok) == 0
        return out
    finally:
        ctx.close()
        model.close()


def test_logprobs_match_a_direct_forward_pass(served, chat_model_path):
    prompt = "The capital of France is"
    reply = served.client().completions.create(model="any", prompt=prompt, max_tokens=8,
                                               temperature=0, logprobs=3)
    lp = reply.choices[0].logprobs
    assert len(lp.tokens) == reply.usage.completion_tokens == len(lp.token_logprobs)
    ids = served.recorder.picked[reply.id]
    direct = _direct_logprobs(chat_model_path, prompt, ids)
    for i, (row, tok) in enumerate(zip(direct, ids, strict=True)):
        assert lp.token_logprobs[i] == pytest.approx(row[tok], abs=0.05)
        best = np.argsort(-row)[:3]
        assert list(lp.top_logprobs[i].values()) == pytest.approx(list(row[best]), abs=0.05)
        assert tok == best[0]  # greedy: the likeliest token was picked


def test_chat_logprobs_stream_and_rebuild(served):
    client = served.client()
    whole = client.chat.completions.create(model="any", messages=ASK, max_tokens=10,
                                           temperature=0, logprobs=True, top_logprobs=2)
    content = whole.choices[0].logprobs.content
    assert len(content) == whole.usage.completion_tokens
    assert "".join(c.token for c in content) == whole.choices[0].message.content
    for entry in content:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 2
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob)  # greedy
    with client.beta.chat.completions.stream(model="any", messages=ASK, max_tokens=10,
                                             temperature=0, logprobs=True,
                                             top_logprobs=2) as stream:
        for _ in stream:  # the client's own accumulator rebuilds the answer from the deltas
            pass
        final = stream.current_completion_snapshot
    streamed = final.choices[0].logprobs.content
    assert [(c.token, round(c.logprob, 4)) for c in streamed] == [
        (c.token, round(c.logprob, 4)) for c in content]


def test_sampled_logprobs_come_from_the_filtered_distribution(served):
    reply = served.client().chat.completions.create(
        model="any", messages=ASK, max_tokens=10, temperature=0.7, top_p=0.5, seed=3,
        logprobs=True, top_logprobs=5)
    cut = 0
    for entry in reply.choices[0].logprobs.content:
        mass = sum(np.exp(a.logprob) for a in entry.top_logprobs)
        assert mass <= 1 + 1e-4
        assert entry.token in [a.token for a in entry.top_logprobs]
        if len(entry.top_logprobs) < 5:
            # top-p 0.5 left fewer than 5 candidates: they are the whole distribution the
            # token was drawn from, so their probabilities sum to 1.
            cut += 1
            assert mass == pytest.approx(1.0, abs=1e-4)
    assert cut > 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_logprobs_leave_out_the_stop_strings_tokens(served, stream):
    client = served.client()
    free = client.chat.completions.create(model="any", messages=ASK, max_tokens=24,
                                          temperature=0, logprobs=True).choices[0]
    tokens = [c.token for c in free.logprobs.content]
    # The stop string is a whole token a few tokens in, so it begins at a token boundary: a
    # token it begins inside keeps its place, as its first characters are kept text (the
    # partial case: tests/server/test_tool_units.py). Which words the model writes is this
    # machine's; the rule is not.
    at = next(i for i in range(3, len(tokens))  # its first match in the text is that token
              if tokens[i].strip()
              and "".join(tokens[:i + 1]).find(tokens[i]) == len("".join(tokens[:i])))
    stop = tokens[at]
    kwargs = dict(model="any", messages=ASK, max_tokens=24, temperature=0, stop=[stop],
                  logprobs=True)
    if stream:
        with client.chat.completions.stream(**kwargs) as events:
            for _ in events:
                pass
            reply = events.get_final_completion()
    else:
        reply = client.chat.completions.create(**kwargs)
    choice = reply.choices[0]
    assert choice.finish_reason == "stop" and stop not in choice.message.content
    joined = "".join(c.token for c in choice.logprobs.content)
    assert [c.token for c in choice.logprobs.content] == tokens[:at]
    assert joined.startswith(choice.message.content)
    assert stop not in joined  # none of the stop string's own tokens
