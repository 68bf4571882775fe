"""Bounded load: 8 clients x 5 growing conversations at once; every answer complete, in order
per client, none lost, and the process's memory flat across the rounds."""

from __future__ import annotations

import asyncio
import time

import psutil
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CLIENTS, ROUNDS = 8, 5


async def _client(served, i: int, log: list) -> list:
    import openai

    client = openai.AsyncOpenAI(base_url=served.base, api_key="none", max_retries=0, timeout=120)
    messages = [{"role": "system", "content": f"You are assistant number {i}."}]
    replies = []
    try:
        for turn in range(ROUNDS):
            messages.append({"role": "user", "content": f"Say a word that starts with "
                                                        f"{'ABCDEFGH'[i]} (turn {turn})."})
            if turn % 2:
                stream = await client.chat.completions.create(
                    model="any", messages=messages, max_tokens=4, temperature=0, stream=True,
                    stream_options={"include_usage": True})
                text, finish, usage = "", None, None
                async for chunk in stream:
                    if chunk.choices:
                        text += chunk.choices[0].delta.content or ""
                        finish = chunk.choices[0].finish_reason or finish
                    usage = chunk.usage or usage
            else:
                reply = await client.chat.completions.create(
                    model="any", messages=messages, max_tokens=4, temperature=0)
                text, finish, usage = (reply.choices[0].message.content,
                                       reply.choices[0].finish_reason, reply.usage)
            log.append((i, turn, time.monotonic()))
            replies.append((turn, text, finish, usage))
            messages.append({"role": "assistant", "content": text})
    finally:
        await client.close()
    return replies


def _round(served) -> list[list]:
    async def run() -> list[list]:
        log: list = []
        return await asyncio.gather(*(_client(served, i, log) for i in range(CLIENTS)))

    return asyncio.run(run())


def test_eight_clients_five_requests_each(served):
    rss = psutil.Process().memory_info().rss
    completed = served.runner.completed
    started = time.monotonic()
    _round(served)  # warm-up: the pool fills with these conversations' states
    warm = psutil.Process().memory_info().rss
    results = _round(served)
    seconds = time.monotonic() - started
    after = psutil.Process().memory_info().rss
    assert served.runner.completed - completed == 2 * CLIENTS * ROUNDS  # none lost
    assert served.runner.admission.refused == 0
    for replies in results:
        assert [turn for turn, *_ in replies] == list(range(ROUNDS))  # in order per client
        for _turn, _text, finish, usage in replies:
            assert finish in ("stop", "length")  # complete
            assert usage is not None and usage.completion_tokens > 0
        # Each later turn continued its own conversation's kept state.
        assert sum(u.prompt_tokens_details.cached_tokens > 0 for *_, u in replies[1:]) >= 3
    growth = (after - warm) / (1 << 20)
    print(f"load: {2 * CLIENTS * ROUNDS} requests in {seconds:.1f} s; RSS {rss / (1 << 20):.0f} "
          f"-> {warm / (1 << 20):.0f} (warm) -> {after / (1 << 20):.0f} MiB (+{growth:.1f})")
    assert growth < 32, f"RSS grew {growth:.1f} MiB over a round of {CLIENTS * ROUNDS} requests"
    assert served.idle()
