"""Constrained, inspectable token picking: llama.cpp's grammar sampler and the sampling chain,
applied to a candidate array the engine can read back.

`llama_sampler_sample` hides the distribution it drew from; a turn that asks for
log-probabilities or runs under a grammar needs it. So `Picker` does what that call does, in
steps: the grammar (when any) masks the candidates, the session's filters (penalties, top-k,
top-p, min-p, temperature) reshape them, the pick (greedy or the seeded draw) chooses one, and
every stage accepts the token. The log-probabilities are those of the candidates the pick chose
from: the distribution after the same filters. The grammar's own time (apply and accept) is
measured apart, so it can be reported and is never billed to the decode.

JSON schemas become GBNF through the pinned llama-cpp-python's converter (`llama_grammar`);
`schema_to_gbnf` refuses, naming it, any keyword that converter would silently ignore, so an
answer made under the grammar always validates against the schema it was given.
"""

from __future__ import annotations

import ctypes
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import llama_cpp.llama_cpp as ll
import numpy as np
from llama_cpp import llama_grammar

from workbench.backend.llama import Context, LlamaError, Model, Penalties

# llama_token_data as numpy sees it: one record per candidate, the layout llama.h declares.
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
assert TOKEN_DATA.itemsize == ctypes.sizeof(ll.llama_token_data)

# Keywords the converter would drop without a word: an answer could then break them.
IGNORED_KEYWORDS = (
    "multipleOf", "uniqueItems", "minProperties", "maxProperties", "not", "if", "then", "else",
    "dependentRequired", "dependentSchemas", "patternProperties", "propertyNames", "contains",
    "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems",
)
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
KNOWN_FORMATS = ("date", "time", "date-time", "uuid", "uuid1", "uuid2", "uuid3", "uuid4",
                 "uuid5")
MAX_ENUM_RANGE = 1000  # a bounded integer becomes this many alternatives at most
# Integers from 0 and from 1 up, without the converter's optional minus sign (at most 16
# digits, as its own integer rule).
NATURAL_RULES = {0: '("0" | [1-9] [0-9]{0,15}) space', 1: "[1-9] [0-9]{0,15} space"}
# A number from 0 up: the converter's number rule without the leading minus.
NON_NEGATIVE_NUMBER = ('("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,15})? '
                       "space")


class SchemaError(ValueError):
    """A JSON schema the grammar cannot enforce; the message names the feature and where."""


class GrammarError(ValueError):
    """A GBNF grammar that llama.cpp's parser refused."""


def schema_to_gbnf(schema: Any) -> str:
    """The GBNF grammar whose every sentence is a JSON text that validates against `schema`;
    SchemaError names the first feature it cannot enforce."""
    if not isinstance(schema, dict):
        raise SchemaError("the schema must be a JSON object")
    _check(schema, "#")
    converter = _BoundedConverter(prop_order={}, allow_fetch=False, dotall=False,
                                  raw_pattern=False)
    try:
        resolved = converter.resolve_refs(json.loads(json.dumps(schema)), "request")
        converter.visit(resolved, "")
    except (AssertionError, ValueError, KeyError, TypeError, IndexError, RecursionError) as exc:
        raise SchemaError(f"the schema cannot be turned into a grammar: {exc or type(exc)}"
                          ) from None
    return str(converter.format_grammar())


def _check(node: Any, where: str) -> None:
    """Refuse what the converter would not enforce, walking every subschema."""
    if isinstance(node, list):
        for i, item in enumerate(node):
            _check(item, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    for key in IGNORED_KEYWORDS:
        if key in node:
            raise SchemaError(f"'{key}' (at {where}) is not supported in a schema")
    ref = node.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#"):
        raise SchemaError(f"'$ref' to {ref!r} (at {where}): only local references ('#/...') "
                          "are supported")
    fmt = node.get("format")
    if fmt is not None and fmt not in KNOWN_FORMATS:
        raise SchemaError(f"'format': {fmt!r} (at {where}) is not supported (supported: "
                          f"{', '.join(KNOWN_FORMATS)})")
    if "pattern" in node and ("minLength" in node or "maxLength" in node):
        raise SchemaError(f"'minLength'/'maxLength' together with 'pattern' (at {where}) is "
                          "not supported: put the length in the pattern")
    if ("minLength" in node or "maxLength" in node) and node.get("type") != "string":
        raise SchemaError(f"'minLength'/'maxLength' (at {where}) need \"type\": \"string\"")
    if any(b in node for b in BOUNDS):
        _bounds_rule(node, where)  # raises when it cannot be enforced
    for key, value in node.items():
        if key in ("enum", "const", "default", "examples", "description", "title"):
            continue
        if key in ("properties", "$defs", "definitions"):
            if isinstance(value, dict):
                for name, sub in value.items():
                    _check(sub, f"{where}/{key}/{name}")
        elif isinstance(value, dict | list):
            _check(value, f"{where}/{key}")


def _bounds_rule(node: dict[str, Any], where: str) -> str | list[int]:
    """How a bounded number is enforced: the integers allowed (a small range), or a grammar
    rule (0 or 1 and up); SchemaError for any other bound."""
    kind = node.get("type")
    lo, hi = node.get("minimum"), node.get("maximum")
    if (xlo := node.get("exclusiveMinimum")) is not None:
        lo = xlo + 1 if kind == "integer" and isinstance(xlo, int) else None
        if kind != "integer":
            raise SchemaError(f"'exclusiveMinimum' on a {kind or 'value'} (at {where}) is not "
                              "supported")
    if (xhi := node.get("exclusiveMaximum")) is not None:
        hi = xhi - 1 if kind == "integer" and isinstance(xhi, int) else None
        if kind != "integer":
            raise SchemaError(f"'exclusiveMaximum' on a {kind or 'value'} (at {where}) is not "
                              "supported")
    if kind == "integer":
        if lo is not None and hi is not None and _whole(lo) and _whole(hi):
            lo_i, hi_i = int(lo), int(hi)
            if hi_i < lo_i:
                raise SchemaError(f"the bounds at {where} allow no integer")
            if hi_i - lo_i < MAX_ENUM_RANGE:
                return list(range(lo_i, hi_i + 1))
        elif hi is None and lo in (0, 1):
            return NATURAL_RULES[int(lo)]
        raise SchemaError(f"'minimum'/'maximum' on an integer (at {where}) are supported as a "
                          f"range of at most {MAX_ENUM_RANGE} values, or a minimum of 0 or 1 "
                          "alone")
    if kind == "number" and lo == 0 and hi is None:
        return NON_NEGATIVE_NUMBER
    raise SchemaError(f"'minimum'/'maximum' on a {kind or 'value'} (at {where}) are not "
                      "supported (only a minimum of 0 alone, or bounds on an integer)")


def _whole(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and float(x).is_integer()


class _BoundedConverter(llama_grammar.SchemaConverter):  # type: ignore[misc]
    """The pinned converter, plus the bounded numbers `_bounds_rule` allows (it has none)."""

    def visit(self, schema: dict[str, Any], name: str) -> str:
        if isinstance(schema, dict) and any(b in schema for b in BOUNDS):
            rule = _bounds_rule(schema, name or "#")
            unbounded = {k: v for k, v in schema.items() if k not in BOUNDS}
            if isinstance(rule, list):
                return str(super().visit({**unbounded, "enum": rule}, name))
            rule_name = name + "-" if name in llama_grammar.RESERVED_NAMES else name or "root"
            return str(self._add_rule(rule_name, rule))
        return str(super().visit(schema, name))


@dataclass(frozen=True, slots=True)
class Alternative:
    token: int
    logprob: float


@dataclass(frozen=True, slots=True)
class Pick:
    """A picked token and the distribution it was picked from (after the same filters)."""

    token: int
    logprob: float
    top: tuple[Alternative, ...] = ()  # the likeliest candidates, best first


@dataclass(frozen=True, slots=True)
class ChainSettings:
    temp: float
    top_k: int
    top_p: float
    min_p: float
    seed: int
    penalties: Penalties | None = None


class Picker:
    """One turn's token picker: grammar (optional), filters, pick; see the module docstring."""

    def __init__(self, model: Model, chain: ChainSettings, *, grammar: str = "",
                 root: str = "root", n_top: int = 0, triggers: tuple[str, ...] = ()) -> None:
        self._n_top = n_top
        self._grammar: int | None = None
        self._filters: int | None = None
        self._pick: int | None = None
        self.grammar_ns = 0  # the grammar's apply and accept time, summed over the turn
        self.last_grammar_ns = 0  # ... for the last pick alone
        self._model = model
        # Lazy: free until the generated text matches a trigger (see `_await_trigger`).
        self._triggers = tuple(re.compile(t.encode()) for t in triggers)
        self._awaiting = bool(grammar and triggers)
        self._said = b""  # the text generated while awaiting a trigger
        self.grammar_refused = False  # the text at the trigger was not one the grammar allows
        if grammar:
            ptr = ll.llama_sampler_init_grammar(model.vocab, grammar.encode(), root.encode())
            if not ptr:
                raise GrammarError("llama.cpp could not parse the grammar (GBNF): check its "
                                   f"rules, and that it defines '{root}'")
            self._grammar = ptr
        params = ll.llama_sampler_chain_default_params()
        params.no_perf = True
        self._filters = ll.llama_sampler_chain_init(params)
        pen = chain.penalties
        if pen is not None and pen.active:
            ll.llama_sampler_chain_add(self._filters, ll.llama_sampler_init_penalties(
                model.n_vocab, pen.last_n, pen.repeat, pen.frequency, pen.presence))
        if chain.temp > 0:
            if chain.top_k > 0:
                ll.llama_sampler_chain_add(self._filters, ll.llama_sampler_init_top_k(chain.top_k))
            ll.llama_sampler_chain_add(self._filters, ll.llama_sampler_init_top_p(chain.top_p, 1))
            if chain.min_p > 0:
                ll.llama_sampler_chain_add(self._filters,
                                           ll.llama_sampler_init_min_p(chain.min_p, 1))
            ll.llama_sampler_chain_add(self._filters, ll.llama_sampler_init_temp(chain.temp))
            seed = chain.seed if chain.seed >= 0 else ll.LLAMA_DEFAULT_SEED
            self._pick = ll.llama_sampler_init_dist(seed)
        self._n_vocab = model.n_vocab
        self._cands = np.zeros(model.n_vocab, dtype=TOKEN_DATA)
        self._ids = np.arange(model.n_vocab, dtype=np.int32)
        self._array = ll.llama_token_data_array(
            data=self._cands.ctypes.data_as(ctypes.POINTER(ll.llama_token_data)),
            size=model.n_vocab, selected=-1, sorted=False)

    def pick(self, ctx: Context) -> Pick:
        """The next token from the context's last logits, accepted by every stage."""
        if self._filters is None:
            raise LlamaError("the picker was closed")
        cands, arr = self._cands, self._array
        cands["id"] = self._ids
        cands["logit"] = ctx.logits()
        cands["p"] = 0.0
        arr.size, arr.selected, arr.sorted = self._n_vocab, -1, False
        ref = ctypes.byref(arr)
        grammar_ns = 0
        holds = self._grammar is not None and not self._awaiting and not self.grammar_refused
        if holds:
            t0 = time.perf_counter_ns()
            ll.llama_sampler_apply(self._grammar, ref)
            grammar_ns = time.perf_counter_ns() - t0
        ll.llama_sampler_apply(self._filters, ref)
        live = cands[: arr.size]
        logits = live["logit"].astype(np.float64)
        finite = np.isfinite(logits)
        if not finite.any():
            raise LlamaError("no token is allowed here (the grammar and the filters left none)")
        if self._pick is not None:
            ll.llama_sampler_apply(self._pick, ref)
            index = int(arr.selected)
        else:
            index = int(np.argmax(np.where(finite, logits, -np.inf)))
        token = int(live["id"][index])
        top = np.max(logits[finite])
        logz = top + np.log(np.sum(np.exp(logits[finite] - top)))
        logprob = float(logits[index] - logz)
        alternatives: tuple[Alternative, ...] = ()
        if self._n_top > 0:
            order = np.argsort(-np.where(finite, logits, -np.inf), kind="stable")
            order = order[: min(self._n_top, int(finite.sum()))]
            alternatives = tuple(Alternative(int(live["id"][i]), float(logits[i] - logz))
                                 for i in order)
        if holds:
            t0 = time.perf_counter_ns()
            ll.llama_sampler_accept(self._grammar, token)
            grammar_ns += time.perf_counter_ns() - t0
        elif self._awaiting:
            t0 = time.perf_counter_ns()
            self._await_trigger(token)
            grammar_ns += time.perf_counter_ns() - t0
        ll.llama_sampler_accept(self._filters, token)
        if self._pick is not None:
            ll.llama_sampler_accept(self._pick, token)
        self.last_grammar_ns = grammar_ns
        self.grammar_ns += grammar_ns
        return Pick(token=token, logprob=logprob, top=alternatives)

    def _await_trigger(self, token: int) -> None:
        """llama.cpp's lazy grammar, done here: once the text generated so far matches a
        trigger pattern (whole), the grammar holds from the first capture group on, that text
        fed to it first. Fed through its mask, token by token: llama.cpp's own lazy sampler
        throws through the C API (and aborts the process) when the model's text at the trigger
        is one the grammar refuses; here the grammar stands aside for the rest of the turn."""
        self._said += self._model.token_to_piece(token)
        for pattern in self._triggers:
            match = pattern.fullmatch(self._said)
            if match is None:
                continue
            start = next((match.start(i) for i in range(1, pattern.groups + 1)
                          if match.group(i)), match.start())
            self._awaiting = False
            text = self._said[start:].decode("utf-8", errors="replace")
            self._said = b""
            for piece in self._model.tokenize(text, add_special=False, parse_special=True):
                if not self._allows(piece):
                    self.grammar_refused = True
                    return
                ll.llama_sampler_accept(self._grammar, piece)
            return

    def _allows(self, token: int) -> bool:
        """Whether the grammar allows `token` next (its mask over that one candidate)."""
        one = np.zeros(1, dtype=TOKEN_DATA)
        one["id"] = token
        arr = ll.llama_token_data_array(
            data=one.ctypes.data_as(ctypes.POINTER(ll.llama_token_data)), size=1, selected=-1,
            sorted=False)
        ll.llama_sampler_apply(self._grammar, ctypes.byref(arr))
        return bool(np.isfinite(one["logit"][0]))

    @property
    def constrained(self) -> bool:
        return self._grammar is not None

    def close(self) -> None:
        for name in ("_grammar", "_filters", "_pick"):
            ptr = getattr(self, name)
            if ptr:
                ll.llama_sampler_free(ptr)
                setattr(self, name, None)
