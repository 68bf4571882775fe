"""The ordering of dropping's quality cost, where it holds by construction.

On a one-layer top-2 MoE whose expert cache never evicts, scoring a fixed text, a larger
`drop_cold_frac` never scores a lower KL, at any position:

- one layer: attention's keys and values are computed from the embeddings, before the MoE, so
  the router sees the same input at every position whatever was dropped before; a position's
  logits depend on what is dropped at that position alone;
- a cache that never evicts holds every expert loaded so far. By induction a larger fraction
  drops a superset of slots (a drop needs a miss and a weight under frac/k; the larger fraction
  loaded fewer experts, so it misses at least as often) and so holds a subset of experts;
- top-2: the pinned top expert is never dropped, so the droppable slot is the second one. At a
  position both fractions drop it (the same output: KL equal) or only the larger does (KL of
  the smaller is 0).

Where it does not hold by construction (docs/quality.md, "Ordering"): with more layers a drop
changes the hidden state that routes the next layer and, through the memory, later positions,
so the dropped sets stop being nested; with a cache that evicts, the run that loaded more also
evicted other experts; with top-k > 2 two fractions can drop different non-empty sets at one
position, and dropping more is not always further from the reference. There a larger fraction
usually, not always, scores a higher KL.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from workbench.bench import quality
from workbench.config import Config

TEXT = ("The keeper climbed the stair at dusk, trimmed the wick and wound the clock; the light "
        "swept the rocks twice a minute until dawn, and the ships kept their distance.")
FRACS = (0.0, 0.5, 0.75, 1.0)


@pytest.fixture(scope="module")
def one_layer_moe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from workbench.moe.synth import write_synthetic_moe

    out = tmp_path_factory.mktemp("models") / "one-layer-moe.gguf"
    return write_synthetic_moe(out, arch="qwen3moe", size="tiny", n_layer=1)[0]


def _kl(model: Path, frac: float) -> np.ndarray:
    # 4 MiB holds the layer's 8 experts (1.5 MiB): nothing is ever evicted.
    config = Config(model=str(model), chat_template=False, n_ctx=256, n_threads=1, n_batch=32,
                    n_ubatch=1, moe_stream=True, cache_mb=4, o_direct=False,
                    drop_cold_frac=frac)
    return quality.score_text(config, TEXT).series.kl


@pytest.mark.slow
def test_more_aggressive_dropping_never_scores_lower_kl_where_it_holds_by_construction(
        one_layer_moe):
    kls = {frac: _kl(one_layer_moe, frac) for frac in FRACS}
    assert (kls[0.0] == 0.0).all()  # off is lossless
    for lower, higher in pairwise(FRACS):
        a, b = kls[lower], kls[higher]
        assert a.size == b.size > 100
        worse = np.flatnonzero(b < a)
        assert worse.size == 0, f"frac {higher} scored lower KL than {lower} at {worse[:5]}"
        # Both dropped the one droppable slot: the same output, to the bit.
        both = (a > 0) & (b > 0)
        assert (a[both] == b[both]).all()
        assert b.mean() >= a.mean()
    # Not vacuous: the fractions drop at different positions, and some positions at every one.
    assert (kls[0.5] > 0).any()
    assert (kls[1.0] > kls[0.5]).any()
