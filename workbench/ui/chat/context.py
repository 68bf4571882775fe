"""What the model sees of a conversation, from the messages on screen (Qt-free).

The engine keeps a turn in its context only when the turn completed: a stopped, failed or
interrupted answer is rolled back together with the question that led to it. The window keeps
those answers (marked) but each request it sends carries exactly the complete user/assistant
turns of the branch on screen as its history (`GenerateRequest.history`), so the screen and the
model agree even after a stop, a branch switch or a restart. A turn that called tools carries
its calls and their results (model_history below).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class MessageLike(Protocol):
    role: str
    content: str
    reasoning: str
    status: str


IN_CONTEXT_STATUSES = ("complete",)

NOTES = {
    "stopped": "Stopped: this partial answer is kept here, but it and the question above it are "
               "not part of the model's context.",
    "interrupted": "Interrupted: the app closed while this answer was being written. It is kept "
                   "here but is not part of the model's context; regenerate to get a full one.",
    "error": "Not part of the model's context.",
    "rejected": "Not sent to the model.",
    "streaming": "",
    "complete": "",
}


ELSEWHERE_NOTE = ("Being written by another workbench window: reopen the conversation to see "
                  "more. It is not part of this window's model context.")


def model_history(path: Sequence[MessageLike],
                  images: Mapping[int, Sequence[Any]] | None = None) -> list[dict[str, str]]:
    """The complete turns of `path`, as chat-template messages. `images` (message id -> its
    StoredImages) puts each user message's images in its "images" key.

    A turn is a user message and what answered it: an answer, or an answer that called tools,
    the tools' results ('tool' messages) and the answer that went on from them. An answer's
    `tool_calls` are kept together with all their results, as the chat template (and the
    server's API) expects them; the turn ends before an answer that is not complete or whose
    calls are not all answered, and a turn with no complete answer is left out whole."""
    history: list[dict[str, str]] = []
    starts = [i for i, m in enumerate(path) if m.role == "user"]
    for at, end in zip(starts, [*starts[1:], len(path)][:len(starts)], strict=True):
        kept = _answered(path[at + 1:end])
        if not kept:
            continue
        user = path[at]
        said = {"role": "user", "content": user.content}
        carried = (images or {}).get(getattr(user, "id", -1))
        if carried:
            said["images"] = ",".join(i.sha256 for i in carried)
        history.extend([said, *kept])
    return history


def _answered(turn: Sequence[MessageLike]) -> list[dict[str, str]]:
    """The messages after a user message that belong in the model's context (see above)."""
    kept: list[dict[str, str]] = []
    i = 0
    while i < len(turn):
        answer = turn[i]
        if answer.role != "assistant" or answer.status not in IN_CONTEXT_STATUSES:
            break
        results = list(itertools.takewhile(lambda m: m.role == "tool", turn[i + 1:]))
        calls = call_ids(getattr(answer, "tool_calls", ""))
        if calls and not set(calls) <= {getattr(r, "tool_call_id", "") for r in results}:
            break  # calls still waiting for their results: not the model's context yet
        message = {"role": "assistant", "content": answer.content}
        if answer.reasoning:
            # Templates that do not read reasoning_content ignore the key; those that do decide
            # themselves whether past reasoning is shown to the model.
            message["reasoning_content"] = answer.reasoning
        if calls:
            message["tool_calls"] = getattr(answer, "tool_calls", "")
        kept.append(message)
        kept.extend(tool_message(r) for r in results if calls)
        i += 1 + len(results)
    return kept


def tool_message(result: MessageLike) -> dict[str, str]:
    """A tool's result as the engine (and the server's API) takes it: role 'tool', the call it
    answers, the tool's name."""
    message = {"role": "tool", "content": result.content,
               "tool_call_id": getattr(result, "tool_call_id", "")}
    if name := getattr(result, "tool_name", ""):
        message["name"] = name
    return message


def call_ids(tool_calls: str) -> list[str]:
    """The ids of an answer's calls (its `tool_calls` JSON text; "" none)."""
    if not tool_calls:
        return []
    return [str(c.get("id", "")) for c in json.loads(tool_calls) if isinstance(c, dict)]


def status_note(status: str) -> str:
    return NOTES.get(status, "")


def tool_turn(path: Sequence[MessageLike], images: Mapping[int, Sequence[Any]] | None = None
              ) -> tuple[list[dict[str, str]], dict[str, str]] | None:
    """The history and the last message of the turn that goes on from tool results: `path`
    ends with the last result of an answer's calls (None when it does not). The results come
    through model_history as they will after a reload, so the model sees the same either way."""
    if not path or path[-1].role != "tool":
        return None
    messages = model_history(path, images)
    if not messages or messages[-1].get("role") != "tool":
        return None  # calls not all answered yet
    return messages[:-1], messages[-1]
