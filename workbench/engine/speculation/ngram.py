"""Prompt-lookup drafting: propose what followed the last time the context's tail appeared.

Upstream's rule (its `ngram_draft`): the corpus is the prompt, the answer so far and the token
just picked. Find the longest suffix of the corpus (at most `max_match` tokens) that also occurs
ending strictly before the corpus end; ties go to the most recent occurrence; overlap is allowed.
Below `min_match` tokens nothing is drafted; else the tokens that followed it are proposed, at
most `n_max`, clipped at the corpus end. Pure integer policy over a numpy array: the candidates
of the shortest match are found in one vectorised pass, then the most recent few hundred are
extended (upstream extends every one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_MATCH = 3
MAX_MATCH = 12
# Occurrences of the shortest match examined, most recent first: bounds a step's drafting cost
# on a degenerate corpus (one token repeated thousands of times) to a few hundred comparisons.
MAX_CANDIDATES = 256


def ngram_draft(corpus: Sequence[int] | np.ndarray, n_max: int, *, min_match: int = MIN_MATCH,
                max_match: int = MAX_MATCH) -> list[int]:
    """Up to `n_max` tokens that followed the longest earlier match of the corpus's tail."""
    c = np.asarray(corpus, dtype=np.int64)
    n = c.size
    if n_max <= 0 or min_match <= 0 or n < min_match + 1:
        return []
    m = min_match
    # Occurrences of the last m tokens that end at index <= n-2 (so something follows them).
    starts = n - m  # candidate start positions 0 .. starts-1
    hit = np.ones(starts, dtype=bool)
    for k in range(m):
        hit &= c[k:k + starts] == c[n - m + k]
    candidates = np.flatnonzero(hit)
    if candidates.size == 0:
        return []
    best_start, best_len = -1, 0
    for i in candidates[::-1][:MAX_CANDIDATES]:  # most recent first: a tie keeps the most recent
        i = int(i)
        length = m
        # Extend the match backwards while the tokens before both ends agree.
        while (length < max_match and i - (length - m) - 1 >= 0
               and c[i - (length - m) - 1] == c[n - length - 1]):
            length += 1
        if length > best_len:
            best_start, best_len = i, length
            if length >= max_match:
                break
    follow = best_start + m  # first token after the matched occurrence
    return [int(t) for t in c[follow: follow + n_max]]
