"""What the model sees of a conversation, from the messages on screen (Qt-free).

The engine keeps a turn in its context only when the turn completed: a stopped, failed or
interrupted answer is rolled back together with the question that led to it. The window keeps
those answers (marked) but each request it sends carries exactly the complete user/assistant
pairs of the branch on screen as its history (`GenerateRequest.history`), so the screen and the
model agree even after a stop, a branch switch or a restart.
"""

from __future__ import annotations

import itertools
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
    """The complete user -> assistant pairs of `path`, as chat-template messages. `images`
    (message id -> its StoredImages) puts each user message's images in its "images" key."""
    history: list[dict[str, str]] = []
    for user, answer in itertools.pairwise(path):
        if user.role != "user" or answer.role != "assistant":
            continue
        if answer.status not in IN_CONTEXT_STATUSES:
            continue
        said = {"role": "user", "content": user.content}
        carried = (images or {}).get(getattr(user, "id", -1))
        if carried:
            said["images"] = ",".join(i.sha256 for i in carried)
        history.append(said)
        message = {"role": "assistant", "content": answer.content}
        if answer.reasoning:
            # Templates that do not read reasoning_content ignore the key; those that do decide
            # themselves whether past reasoning is shown to the model.
            message["reasoning_content"] = answer.reasoning
        history.append(message)
    return history


def status_note(status: str) -> str:
    return NOTES.get(status, "")
