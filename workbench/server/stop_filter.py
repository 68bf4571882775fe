"""Stop strings on a stream: text that may be the start of one is held back until it is not.

The engine ends the turn once the generated text contains a stop string
(GenerateRequest.stop); the client must see the text before it and nothing of it, streamed or
not. Pure: fed the answer's deltas, it returns what may be sent now.
"""

from __future__ import annotations


def cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """`text` up to its first stop string, and whether there was one."""
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return (text[:min(found)], True) if found else (text, False)


def stop_tail_bytes(text: str, stops: tuple[str, ...]) -> int:
    """The UTF-8 bytes of `text` from its first stop string on (0 without one): what the
    client does not get, nor the log-probabilities of its tokens."""
    kept, hit = cut_at_stop(text, stops)
    return len(text.encode()) - len(kept.encode()) if hit else 0


class StopFilter:
    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def feed(self, delta: str) -> str:
        """What of the text so far may be sent after `delta` arrived ("" once stopped)."""
        if self.stopped:
            return ""
        if not self.stops:
            return delta
        text = self._held + delta
        cut, hit = cut_at_stop(text, self.stops)
        if hit:
            self.stopped = True
            self._held = ""
            return cut
        keep = self._partial(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep]

    def flush(self) -> str:
        """The end of the stream: what was held back was not a stop string after all."""
        out, self._held = ("" if self.stopped else self._held), ""
        return out

    def _partial(self, text: str) -> int:
        """Length of the longest end of `text` that begins some stop string."""
        best = 0
        for stop in self.stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
