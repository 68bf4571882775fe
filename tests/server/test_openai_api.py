"""The server with the real `openai` client and raw httpx requests, on a localhost port.

Slow tests: they load the default chat model once (conftest.chat_engine) and keep generations
short (max_tokens <= 48)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Greedy, the model goes on counting: a generation that lasts as long as it is allowed to.
COUNTING = {"prompt": "1, 2, 3, 4, 5, 6, 7,", "temperature": 0}
QUESTION = [{"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": "What colour is the sky on a clear day?"}]


def _chat(client, messages, **kw):
    kw.setdefault("max_tokens", 16)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(model="any", messages=messages, **kw)


def _stream(client, messages, **kw):
    """The streamed answer: (content, reasoning, chunks)."""
    kw.setdefault("max_tokens", 16)
    kw.setdefault("temperature", 0)
    chunks = list(client.chat.completions.create(model="any", messages=messages, stream=True,
                                                 **kw))
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                        for c in chunks if c.choices)
    return content, reasoning, chunks


def test_models_lists_the_loaded_model(served):
    models = served.client().models.list()
    assert [m.id for m in models.data] == [served.model]
    assert "SmolLM2" in served.model


def test_a_chat_answer_with_usage_and_the_workbench_figures(served):
    reply = _chat(served.client(), QUESTION)
    choice = reply.choices[0]
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    assert reply.model == served.model and reply.id.startswith("chatcmpl-")
    assert 0 < reply.usage.completion_tokens <= 16
    assert reply.usage.prompt_tokens > 10
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    figures = reply.model_extra["x_workbench"]
    assert figures["tokens_per_second"] > 0 and figures["ttft_seconds"] > 0
    # A dense model streams no experts: no hit rate, no expert bytes read (unmeasured, not 0).
    assert figures["cache_hit_pct"] == -1 and figures["read_bytes"] == -1


def test_streaming_gives_the_same_answer_with_usage_and_figures_at_the_end(served):
    client = served.client()
    whole = _chat(client, QUESTION).choices[0].message.content
    content, _, chunks = _stream(client, QUESTION, stream_options={"include_usage": True})
    assert content == whole
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].model_extra["x_workbench"]["tokens_per_second"] > 0
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens > 0
    assert last.model_extra["x_workbench"]["read_bytes"] == -1
    assert len({c.id for c in chunks}) == 1
    # Without include_usage no usage chunk comes.
    _, _, plain = _stream(client, QUESTION)
    assert all(c.usage is None for c in plain)


def test_a_growing_conversation_reuses_its_prefix_and_says_how_much(served):
    client = served.client()
    first = _chat(client, QUESTION)
    answer = first.choices[0].message.content
    grown = [*QUESTION, {"role": "assistant", "content": answer},
             {"role": "user", "content": "And at sunset?"}]
    second = _chat(client, grown)
    cached = second.usage.prompt_tokens_details.cached_tokens
    # Everything the first request read is held: its whole prompt at least.
    assert cached >= first.usage.prompt_tokens
    assert cached < second.usage.prompt_tokens
    assert second.model_extra["x_workbench"]["n_reused"] == cached
    # Negative control: another conversation shares too little (the chat template's opening)
    # to take this one's state; it reads its prompt afresh, and the first one keeps its state.
    other = _chat(client, [{"role": "user", "content": "Name a prime number."}])
    assert other.usage.prompt_tokens_details.cached_tokens == 0
    again = _chat(client, [*grown, {"role": "assistant",
                                    "content": second.choices[0].message.content},
                           {"role": "user", "content": "Thanks."}])
    assert again.usage.prompt_tokens_details.cached_tokens >= second.usage.prompt_tokens


def test_stop_strings_end_the_answer_before_them_streamed_or_not(served):
    client = served.client()
    full = _chat(client, QUESTION, max_tokens=24).choices[0].message.content
    words = full.split()
    assert len(words) >= 3, full
    stop = " " + words[2]
    expected = full[:full.index(stop)]
    reply = _chat(client, QUESTION, max_tokens=24, stop=[stop, "never-appears"])
    assert reply.choices[0].message.content == expected
    assert reply.choices[0].finish_reason == "stop"
    # The engine stopped there too: not all 24 tokens were generated.
    assert reply.usage.completion_tokens < 24
    content, _, chunks = _stream(client, QUESTION, max_tokens=24, stop=stop)
    assert content == expected
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_sampling_fields_reach_the_sampler(served):
    client = served.client()
    sampling = {"temperature": 1.5, "top_p": 0.9, "presence_penalty": 0.5,
                "frequency_penalty": 0.5, "max_tokens": 12, "extra_body": {"min_p": 0.05}}
    a = _chat(client, QUESTION, seed=11, **sampling)
    b = _chat(client, QUESTION, seed=11, **sampling)
    c = _chat(client, QUESTION, seed=12, **sampling)
    greedy = _chat(client, QUESTION, max_tokens=12)
    assert a.choices[0].message.content == b.choices[0].message.content  # same seed
    assert len({a.choices[0].message.content, c.choices[0].message.content,
                greedy.choices[0].message.content}) > 1
    # The server's own settings are back after each request (greedy, reproducible).
    assert served.engine._session.config.temp == 0.0


def test_a_request_leaves_the_sessions_settings_untouched(served):
    """A request is a value (issue 37): its settings travel with it, so the open session (the
    window's, under Tools > Serve) is neither changed nor put back."""
    session = served.engine._session
    before = session.config
    answer = _chat(served.client(), QUESTION, temperature=0.7, seed=3, top_p=0.8, max_tokens=8)
    assert answer.choices[0].message.content
    assert session.config is before  # not even replaced by an equal value: never touched


def test_a_request_without_a_system_message_gets_the_models_default(served):
    """Issue 39: API clients get the assistant the window gets. The bundled model's default
    system prompt is applied to a request without a system message; a request's own replaces
    it (the prompt then holds that one only)."""
    from workbench.engine.model_defaults import model_defaults

    default = model_defaults(served.engine._session.config.model).system_prompt
    assert default  # the bundled model has one
    client = served.client()
    question = [{"role": "user", "content": "What is the capital of France?"}]
    plain = _chat(client, question, max_tokens=4)
    stated = _chat(client, [{"role": "system", "content": default}, *question], max_tokens=4)
    # The same prompt, token for token: the second is read entirely from the first's state.
    assert plain.usage.prompt_tokens == stated.usage.prompt_tokens
    assert stated.usage.prompt_tokens_details.cached_tokens == stated.usage.prompt_tokens - 1
    own = _chat(client, [{"role": "system", "content": "Be brief."}, *question], max_tokens=4)
    assert own.usage.prompt_tokens < plain.usage.prompt_tokens  # replaced, not added to


def test_raw_completions_streamed_and_not(served):
    client = served.client()
    reply = client.completions.create(model="any", prompt="The capital of France is",
                                      max_tokens=6, temperature=0)
    assert reply.choices[0].text and reply.object == "text_completion"
    assert reply.usage.completion_tokens <= 6
    streamed = list(client.completions.create(model="any", prompt="The capital of France is",
                                              max_tokens=6, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == reply.choices[0].text
    # The raw prompt is read as is: a few tokens, not a chat template around it.
    assert reply.usage.prompt_tokens < 10


# ---- bad input: raw requests ----------------------------------------------------------------

@pytest.mark.parametrize(("body", "param"), [
    (b"{not json", None),
    (b'{"messages": "hello"}', "messages"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "n": 3}', "n"),
])
def test_bad_requests_are_400_with_an_openai_error_body(served, body, param):
    r = httpx.post(served.base + "/chat/completions", content=body,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert served.idle()


def test_settings_the_engine_refuses_are_400(served):
    r = httpx.post(served.base + "/chat/completions", json={
        "messages": QUESTION, "temperature": -2, "max_tokens": 4})
    assert r.status_code == 400 and "temp" in r.json()["error"]["message"]
    assert served.engine._session.config.temp == 0.0


def test_a_prompt_too_long_for_the_context_is_a_400_streamed_or_not(served):
    long = [{"role": "user", "content": "word " * 1500}]  # the context is 1024 tokens
    for stream in (False, True):
        r = httpx.post(served.base + "/chat/completions", timeout=60,
                       json={"messages": long, "max_tokens": 8, "stream": stream})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "context_length_exceeded"
    # The client library raises the matching exception.
    import openai

    with pytest.raises(openai.BadRequestError):
        _chat(served.client(), long)


def test_an_oversized_body_is_refused_before_it_is_read(served):
    body = json.dumps({"messages": [{"role": "user", "content": "x" * (70 << 10)}]})
    r = httpx.post(served.base + "/chat/completions", content=body)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"

    def chunks():
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(80):
            yield b"x" * 1024
        yield b'"}]}'

    r = httpx.post(served.base + "/chat/completions", content=chunks())  # no Content-Length
    assert r.status_code == 413


def test_unknown_routes_and_methods_have_openai_error_bodies(served):
    r = httpx.get(served.base + "/nothing-here")
    assert r.status_code == 404 and "no route" in r.json()["error"]["message"]
    r = httpx.get(served.base + "/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["message"]


def test_unknown_fields_are_ignored(served):
    r = httpx.post(served.base + "/chat/completions", json={
        "messages": QUESTION, "max_tokens": 4, "temperature": 0, "some_future_field": [1, 2],
        "metadata": {"x": "y"}})
    assert r.status_code == 200, r.text


# ---- auth and the queue -----------------------------------------------------------------------

def test_an_api_key_is_checked_on_every_route(chat_engine):
    import openai

    from tests.server.conftest import start_server

    served, stop = start_server(chat_engine, api_key="s3cret")
    try:
        for method, path in (("GET", "/v1/models"), ("POST", "/v1/chat/completions"),
                             ("POST", "/v1/completions"), ("GET", "/health"),
                             ("GET", "/v1/unknown")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                r = httpx.request(method, served.url + path, headers=headers, json={})
                assert r.status_code == 401, (path, headers)
                assert r.json()["error"]["code"] == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=served.base, api_key="wrong", max_retries=0).models.list()
        assert [m.id for m in served.client().models.list().data] == [served.model]
        assert _chat(served.client(), QUESTION, max_tokens=2).usage.completion_tokens > 0
    finally:
        stop()


def test_past_the_queue_bound_a_request_gets_429_with_retry_after(chat_engine):
    from tests.server.conftest import start_server

    served, stop = start_server(chat_engine, max_waiting=1)
    try:
        body = {**COUNTING, "max_tokens": 64, "stream": True}
        url = served.base + "/completions"
        with httpx.Client(timeout=60) as a, httpx.Client(timeout=60) as b:
            with a.stream("POST", url, json=body) as running:
                lines = running.iter_lines()
                next(line for line in lines if line.startswith("data: "))  # it is on the engine
                waiting = threading.Thread(
                    target=lambda: b.post(url, json=body))
                waiting.start()
                while served.runner.admission.in_flight < 2:
                    pass
                r = httpx.post(url, json=body)
                assert r.status_code == 429
                assert int(r.headers["Retry-After"]) >= 1
                assert r.json()["error"]["type"] == "rate_limit_error"
                rest = [line for line in lines if line]
            waiting.join(60)
        assert rest[-1] == "data: [DONE]"
        assert served.idle() and served.runner.admission.refused == 1
    finally:
        stop()


# ---- disconnects ------------------------------------------------------------------------------

def test_a_client_that_leaves_mid_stream_stops_its_generation(served):
    body = {**COUNTING, "max_tokens": 200, "stream": True}
    seen = 0
    with httpx.Client(timeout=60) as client, \
            client.stream("POST", served.base + "/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                seen += 1
                if seen == 4:
                    rid = json.loads(line[6:])["id"]
                    break
    result = served.recorder.result_of(rid)
    assert result.stop_reason == "stopped"
    # The engine noticed at the next token it sent: a token or two later, not 200.
    assert served.recorder.tokens[rid] <= seen + 2
    assert served.idle(5)
    # The engine is free and its state sound: the next request is answered in full.
    assert _chat(served.client(), QUESTION).choices[0].finish_reason in ("stop", "length")


def test_a_client_that_leaves_a_whole_answer_stops_it_too(served):
    n_before = len(served.recorder.ended)
    body = {**COUNTING, "max_tokens": 600}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(served.base + "/completions", json=body, timeout=0.5)
    assert served.idle(5)
    request, result = served.recorder.ended[n_before]
    # It left after 0.5 s (some 50 tokens at this model's pace); the engine stopped soon after,
    # far from the 600 it would have run to unheard.
    assert result.stop_reason == "stopped" and served.recorder.tokens[request.id] < 300
