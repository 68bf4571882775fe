"""The config tree: declarations, validate() rules, signature, dict round trip, CLI and docs."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workbench import config as C
from workbench.config import (
    BY_NAME,
    SETTINGS,
    Config,
    ConfigError,
    Problem,
    Setting,
    signature,
    validate,
)
from workbench.config_cli import DOCS_COMMAND, add_arguments, config_from_args, settings_markdown

REPO = Path(__file__).resolve().parents[2]
SAMPLING = Config(temp=0.7)  # a config under which the sampling knobs matter
# ...and one under which every knob matters (streaming with automatic cache sizing).
ACTIVE = SAMPLING.replace(moe_stream=True, cache_auto=True, spec="ngram")


def other_value(s: Setting, value: Any) -> Any:
    """A different value of the same type that is still within the declared range."""
    if s.type == "bool":
        return not value
    if s.type == "str":
        return value + "x"
    if s.type == "choice":
        return next(c for c in s.choices if c != value)
    if s.type == "float":
        return value / 2 if value else 0.5
    return value - 1 if s.max is not None and value + 1 > s.max else value + 1


def settings_of(problems: list[Problem]) -> list[str]:
    return [p.setting for p in problems]


# -- The tree walk: every declaration is well formed ---------------------------------------

def test_names_are_unique_identifiers() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names))
    assert all(n.isidentifier() and n == n.lower() for n in names)


def test_attribute_names_are_the_engine_contract() -> None:
    assert [s.name for s in SETTINGS] == [
        "model", "n_ctx", "n_batch", "n_ubatch", "n_threads", "chat_template", "chat_template_file",
        "mmproj",
        "temp", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
        "frequency_penalty", "repeat_last_n", "seed", "n_predict", "think", "system_prompt",
        "answer_format", "answer_schema", "tools", "tool_choice", "auto_title",
        "token_alternatives",
        "moe_stream", "cache_mb", "cache_auto", "cache_floor_mb", "cache_ceil_mb", "io_threads",
        "o_direct", "dense_weights", "lean_load", "cache_policy", "cache_guard",
        "cache_warm_start", "prefetch", "n_expert_used", "drop_cold_frac", "drop_renorm",
        "drop_prefill", "expert_substitute", "expert_substitute_prefill", "kv_pool_mb",
        "kv_disk_mb", "spec", "spec_draft_max", "spec_draft_model"]


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_every_default_passes_its_own_type_and_range(s: Setting) -> None:
    assert C.type_ok(s, s.default), f"{s.name}: default {s.default!r} is not a {s.type}"
    assert C.range_problem(s, s.default) == ""
    for value, meaning in s.special:
        assert C.type_ok(s, value) and C.range_problem(s, value) == "", (value, meaning)


def test_the_default_config_is_valid() -> None:
    assert validate(Config()) == []
    assert validate(SAMPLING) == []


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_every_numeric_setting_declares_a_unit_or_why_not(s: Setting) -> None:
    if s.numeric:
        assert s.unit is not None, f"{s.name} needs unit= (or unit='' with unit_reason=)"
        assert s.unit or s.unit_reason, f"{s.name} has unit='' without a unit_reason"
    else:
        assert s.min is None and s.max is None and not s.unit


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_requires_names_a_real_setting(s: Setting) -> None:
    if s.requires is None:
        return
    name, op, value = s.requires
    assert name in BY_NAME and name != s.name
    assert op in C.OPS
    assert C.type_ok(BY_NAME[name], value)


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_labels_and_help_read_consistently(s: Setting) -> None:
    for text in (s.label, s.help):
        assert text and text == text.strip() and "\n" not in text
        assert text[0].isupper(), f"{s.name}: {text!r} should start with a capital"
    assert not s.help.endswith("."), f"{s.name}: help ends without a period, like the others"
    assert len(s.help) <= 100


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_group_scope_choices_and_flags_are_declared(s: Setting) -> None:
    assert s.group in {g.name for g in C.GROUPS}
    assert s.scope in ("load", "request")
    assert s.flag == "--" + s.name.replace("_", "-")
    assert all(len(f) == 2 and f[0] == "-" for f in s.short)
    assert all(f.startswith("--") for f in (*s.aliases, *s.false_aliases))
    assert not s.false_aliases or s.type == "bool"
    if s.type == "choice":
        assert s.choices and s.default in s.choices
    else:
        assert s.choices == ()


def test_flags_and_old_names_do_not_collide() -> None:
    flags = [f for s in SETTINGS for f in (*s.flags, *s.false_aliases)]
    assert len(flags) == len(set(flags))
    assert not set(C.RENAMED) & set(BY_NAME)
    assert len(C.RENAMED) == sum(len(s.renamed_from) for s in SETTINGS)


def test_every_group_has_settings_and_a_blurb() -> None:
    for group in C.GROUPS:
        assert group.blurb and not group.blurb.endswith(".")
        assert any(s.group == group.name for s in SETTINGS), group.name


def test_config_fields_match_the_declarations() -> None:
    C.check_config_class(Config)  # also runs at import
    fields = [(f.name, f.type, dataclasses.field(default=f.default))
              for f in dataclasses.fields(Config)]
    assert [f.default for f in dataclasses.fields(Config)] == [s.default for s in SETTINGS]

    changed = [(n, t, dataclasses.field(default=2048) if n == "n_ctx" else d) for n, t, d in fields]
    with pytest.raises(ConfigError, match="n_ctx"):
        C.check_config_class(dataclasses.make_dataclass("Drifted", changed))
    with pytest.raises(ConfigError, match=rf"no field for.*{SETTINGS[-1].name}"):
        C.check_config_class(dataclasses.make_dataclass("Short", fields[:-1]))


# -- validate(): each rule passes and fails --------------------------------------------------

FAILING = [
    # (changes, setting, expected fragment)
    ({"n_predict": 0}, "n_predict", "n_predict is 0 tokens; it must be from 1 to 1048576"),
    ({"moe_stream": True, "cache_auto": True, "cache_mb": 2000}, "cache_mb",
     "both size the expert cache"),
    ({"moe_stream": True, "io_threads": 9}, "io_threads", "9"),
    ({"n_predict": -5}, "n_predict", "set --n-predict to a value from 1 to 1048576"),
    ({"n_threads": 0}, "n_threads",
     f"n_threads is 0 threads; it must be from 1 to {C.MAX_THREADS}"),
    ({"n_ctx": 0, "n_predict": 8}, "n_ctx", "n_ctx is 0 tokens; it must be from 16 to 1048576"),
    ({"n_ctx": 15, "n_predict": 8}, "n_ctx", "set --n-ctx to a value from 16 to 1048576"),
    ({"n_batch": 0}, "n_batch", "n_batch is 0 tokens; it must be from 1 to 65536"),
    ({"n_ubatch": -1}, "n_ubatch", "from 0 to 65536 tokens (0 = follows n_batch)"),
    ({"n_ubatch": 4097}, "n_ubatch", "n_ubatch=4097 exceeds n_ctx=4096: the compute buffers "
                                     "would be reserved for a batch that cannot occur"),
    ({"n_predict": 4096}, "n_predict", "tokens to generate (4096) must be smaller than the "
                                       "context (4096) to leave room for the prompt"),
    ({"n_predict": 600, "n_ctx": 512}, "n_predict", "raise --n-ctx above 600"),
    ({"temp": math.nan}, "temp", "temp is nan; it must be a finite number"),
    ({"temp": math.inf}, "temp", "finite"),
    ({"temp": -0.1}, "temp", "temp is -0.1; it must be from 0 to 100 (0 = greedy)"),
    ({"temp": 0.7, "top_k": -1}, "top_k", "top_k is -1 tokens; it must be from 0 to 1048576"),
    ({"temp": 0.7, "top_p": 0.0}, "top_p", "it must be above 0 and at most 1"),
    ({"temp": 0.7, "top_p": 1.01}, "top_p", "set --top-p to a value above 0 and at most 1"),
    ({"temp": 0.7, "seed": -2}, "seed", "from -1 to 4294967294 (-1 = random)"),
    ({"temp": 0.7, "seed": 2**32 - 1}, "seed", "seed is 4294967295"),
    ({"n_ctx": "4096"}, "n_ctx", "n_ctx must be a whole number like 4096, not '4096' (str)"),
    ({"n_threads": True}, "n_threads", "must be a whole number"),
    ({"temp": "hot"}, "temp", "temp must be a number like 0.0, not 'hot'"),
    ({"think": "yes"}, "think", "think must be true or false"),
    ({"model": None}, "model", "model must be text"),
    # Issue 12, case 2: numbers that reached native code and aborted, hung or wrapped there.
    ({"n_threads": 100_000}, "n_threads", f"n_threads is 100000 threads; it must be from 1 to "
                                          f"{C.MAX_THREADS}"),
    ({"n_threads": 20_000}, "n_threads", "set --n-threads to a value from 1"),
    ({"n_ctx": 4_294_967_312}, "n_ctx", "n_ctx is 4294967312 tokens; it must be from 16 to "
                                        "1048576"),
    ({"n_batch": 10**9}, "n_batch", "from 1 to 65536"),
    ({"moe_stream": True, "cache_mb": C.MEMORY_MIB + 1}, "cache_mb",
     f"from 0 to {C.MEMORY_MIB} MiB"),
    ({"temp": 1e9}, "temp", "from 0 to 100"),
]
PASSING = [
    {"n_predict": 1}, {"n_threads": 1}, {"n_ctx": 16, "n_predict": 8}, {"n_batch": 1},
    {"n_ubatch": 0}, {"n_ubatch": 4096}, {"n_predict": 4095}, {"temp": 0}, {"temp": 1.5},
    {"temp": 0.7, "top_k": 0}, {"temp": 0.7, "top_p": 1.0}, {"temp": 0.7, "top_p": 1e-6},
    {"temp": 0.7, "seed": -1}, {"temp": 0.7, "seed": 0}, {"temp": 0.7, "seed": 2**32 - 2},
    {"model": "/models/qwen.gguf"}, {"chat_template": False, "think": False},
]


@pytest.mark.parametrize(("changes", "setting", "fragment"), FAILING, ids=str)
def test_rule_fails_with_a_message_that_says_what_to_do(
        changes: dict[str, Any], setting: str, fragment: str) -> None:
    problems = validate(Config().replace(**changes))
    assert settings_of(problems) == [setting], problems
    assert fragment in problems[0].message
    assert str(problems[0]).startswith(f"{setting}: ")


@pytest.mark.parametrize("changes", PASSING, ids=str)
def test_rule_passes_at_its_edge(changes: dict[str, Any]) -> None:
    assert validate(Config().replace(**changes)) == []


@pytest.mark.parametrize("s", [s for s in SETTINGS if s.numeric], ids=lambda s: s.name)
def test_every_declared_bound_is_enforced_and_named(s: Setting) -> None:
    base = ACTIVE.replace(n_ctx=2**20)  # active knobs, room for any n_predict or n_ubatch
    if s.min is not None:
        below = s.min if s.min_exclusive else s.min - 1
        problems = validate(base.replace(**{s.name: below}))
        assert settings_of(problems) == [s.name]
        assert C.fmt_number(s.min) in problems[0].message and s.flag in problems[0].message
    if s.max is not None:
        problems = validate(base.replace(**{s.name: s.max + 1}))
        assert settings_of(problems) == [s.name]
        assert C.fmt_number(s.max) in problems[0].message


def test_validate_returns_every_problem() -> None:
    cfg = Config(n_threads=0, n_batch=0, temp=0.5, top_k=-3, top_p=2.0, n_predict=0, think=1)
    assert sorted(settings_of(validate(cfg))) == sorted(
        ["n_threads", "n_batch", "top_k", "top_p", "n_predict", "think"])


def test_relations_stay_quiet_while_a_participant_is_itself_invalid() -> None:
    # n_ctx=0 is one mistake: not also "n_predict must be smaller" and "n_ubatch exceeds".
    assert settings_of(validate(Config(n_ctx=0, n_ubatch=64))) == ["n_ctx"]
    assert settings_of(validate(Config(n_ctx="big"))) == ["n_ctx"]


def test_sampling_knobs_are_inert_under_greedy() -> None:
    wild = {"top_k": -1, "top_p": 7.0, "seed": -9}
    assert validate(Config(temp=0.0, **wild)) == []
    assert settings_of(validate(Config(temp=0.2, **wild))) == ["top_k", "top_p", "seed"]
    # A broken temp leaves the knobs unjudged instead of failing in the comparison.
    assert settings_of(validate(Config(temp="warm", **wild))) == ["temp"]


def test_inactive_reason_says_why_a_widget_is_disabled() -> None:
    top_k = BY_NAME["top_k"]
    assert C.inactive_reason(top_k, Config()) == "Only used when temp > 0 (temp is 0 (greedy) now)"
    assert C.inactive_reason(top_k, SAMPLING) == ""
    assert C.inactive_reason(BY_NAME["n_ctx"], Config()) == ""
    reason = C.inactive_reason(BY_NAME["think"], Config(chat_template=False))
    assert reason == "Only used when chat_template is on (chat_template is off now)"


def test_a_later_rule_appended_to_rules_runs() -> None:
    def check_no_qwen(cfg: Config) -> list[Problem]:
        return [Problem("model", "no qwen today")] if "qwen" in cfg.model else []

    C.RULES.append(check_no_qwen)
    try:
        assert validate(Config(model="qwen.gguf")) == [Problem("model", "no qwen today")]
    finally:
        C.RULES.remove(check_no_qwen)
    assert validate(Config(model="qwen.gguf")) == []


# -- signature --------------------------------------------------------------------------------

@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_signature_covers_load_settings_only(s: Setting) -> None:
    base = Config()
    changed = base.replace(**{s.name: other_value(s, s.default)})
    if s.scope == "load":
        assert C.signature(changed) != C.signature(base)
    else:
        assert C.signature(changed) == C.signature(base)


def test_signature_is_stable() -> None:
    sig = C.signature(Config(n_ctx=2048))
    assert sig == C.signature(Config.from_dict({"n_ctx": 2048}))
    assert len(sig) == 16 and int(sig, 16) >= 0


# -- dicts --------------------------------------------------------------------------------------

def test_dict_round_trip_through_json() -> None:
    cfg = Config(n_ctx=2048, temp=0.7, seed=42, think=False, system_prompt="Be brief")
    d = cfg.to_dict()
    assert list(d) == [s.name for s in SETTINGS]
    assert Config.from_dict(json.loads(json.dumps(d))) == cfg
    assert Config.from_dict({}) == Config()


def test_unknown_keys_are_named() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'n_ctxx'; did you mean 'n_ctx'"):
        Config.from_dict({"n_ctxx": 1})
    with pytest.raises(ConfigError, match="unknown setting 'colour'; known settings: model"):
        Config.from_dict({"colour": "red"})
    with pytest.raises(ConfigError, match="unknown setting 'chatm1'; did you mean 'chat_template'"):
        Config().replace(chatm1=False)  # close to an old name: suggest the current one
    with pytest.raises(ConfigError, match="unknown setting 'tempp'"):
        Config().replace(tempp=1.0)


def test_renamed_keys_load_into_their_new_names() -> None:
    cfg = Config.from_dict({"model_path": "a.gguf", "chatml": False})
    assert (cfg.model, cfg.chat_template) == ("a.gguf", False)
    with pytest.raises(ConfigError, match="'model_path' and 'model' both set model"):
        Config.from_dict({"model_path": "a.gguf", "model": "b.gguf"})


def test_replace_returns_a_new_frozen_config() -> None:
    base = Config()
    assert base.replace(n_ctx=1024).n_ctx == 1024 and base.n_ctx == 4096
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.n_ctx = 1  # type: ignore[misc]


def test_diff_from_defaults() -> None:
    assert Config().diff_from_defaults() == {}
    assert Config(n_ctx=2048, think=False).diff_from_defaults() == {"n_ctx": 2048, "think": False}


# -- CLI ------------------------------------------------------------------------------------

def parse(argv: list[str], base: Config | None = None, groups: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(prog="workbench", exit_on_error=False)
    add_arguments(parser, groups)
    return config_from_args(parser.parse_args(argv), base)


def test_cli_flags_parse() -> None:
    cfg = parse(["-c", "2048", "-n", "16", "--temp", "0.7", "--no-think"])
    assert cfg == Config(n_ctx=2048, n_predict=16, temp=0.7, think=False)


def test_untyped_flags_leave_the_base_untouched() -> None:
    base = Config(n_threads=3, top_k=7, think=False, system_prompt="x", model="m.gguf")
    assert parse([], base) == base
    assert parse(["--top-p", "0.5"], base) == base.replace(top_p=0.5)
    assert parse(["--think"], base) == base.replace(think=True)


def test_cli_aliases() -> None:
    cfg = parse(["--ctx-size", "1024", "--threads", "2", "--ubatch", "64", "-m", "q.gguf",
                 "--raw", "-t", "3"])
    assert cfg == Config(n_ctx=1024, n_threads=3, n_ubatch=64, model="q.gguf",
                         chat_template=False)


@pytest.mark.parametrize("s", SETTINGS, ids=lambda s: s.name)
def test_every_setting_has_a_working_flag(s: Setting) -> None:
    value = other_value(s, s.default)
    negated = f"--no-{s.flag[2:]}"
    argv = [s.flag if value else negated] if s.type == "bool" else [s.flag, str(value)]
    assert getattr(parse(argv), s.name) == value


def test_groups_limit_the_flags() -> None:
    assert parse(["--temp", "0.3"], groups=["Sampling"]).temp == 0.3
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parse(["-c", "512"], groups=["Sampling"])
    with pytest.raises(ConfigError, match="unknown settings group"):
        parse([], groups=["Colours"])


def test_bad_cli_values_are_argparse_errors() -> None:
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        parse(["-c", "lots"])


def test_help_shows_defaults_units_and_conditions() -> None:
    parser = argparse.ArgumentParser(prog="workbench")
    add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert "(default: 4096 tokens)" in text
    assert "(0 = no limit; default: 40 tokens; only used when temp > 0)" in text
    assert "--think, --no-think" in text and "same as --no-chat-template" in text


# -- docs/settings.md -------------------------------------------------------------------------

def test_docs_are_current() -> None:
    committed = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == settings_markdown(), f"docs/settings.md is stale; run: {DOCS_COMMAND}"


def test_docs_list_every_setting_under_its_group() -> None:
    text = settings_markdown()
    for s in SETTINGS:
        section = text[text.index(f"## {s.group}\n"):]
        assert f"(`{s.name}`) | `" in section.split("\n## ")[0], s.name
        assert f"`{s.flag}`" in text


def test_docs_command_prints_the_docs() -> None:
    out = subprocess.run([sys.executable, "-m", "workbench.config_cli"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    assert out == settings_markdown()


def test_streaming_knobs_are_inert_while_streaming_is_off() -> None:
    assert validate(Config(io_threads=99, cache_mb=-5, cache_auto=True)) == []
    assert settings_of(validate(Config(moe_stream=True, io_threads=99))) == ["io_threads"]


def test_dropping_takes_upstreams_flag_and_is_refused_without_the_lru_cache() -> None:
    cfg = parse(["--drop-cold-experts", "0.75", "--drop-in-prefill", "--no-drop-renorm"])
    assert (cfg.drop_cold_frac, cfg.drop_prefill, cfg.drop_renorm) == (0.75, True, False)
    assert parse(["--drop-cold-frac", "0.5"]).drop_cold_frac == 0.5
    assert Config().drop_cold_frac == 0.0  # off by default
    # The CLI keeps it off with a cache too (the 75 % default is the window's alone).
    assert parse(["--moe-stream", "--cache-mb", "512"]).drop_cold_frac == 0.0
    assert parse(["--drop-no-renorm"]).drop_renorm is False  # upstream's spelling
    off = [p.message for p in validate(cfg)]
    assert len(off) == 1 and "expert streaming is off" in off[0] and "--cache-mb" in off[0]
    no_cache = [p.message for p in validate(cfg.replace(moe_stream=True))]
    assert len(no_cache) == 1 and "unconditional cut" in no_cache[0]
    assert validate(cfg.replace(moe_stream=True, cache_mb=256)) == []
    assert validate(cfg.replace(moe_stream=True, cache_auto=True)) == []
    nan = validate(cfg.replace(moe_stream=True, cache_mb=256, drop_cold_frac=math.nan))
    assert [p.setting for p in nan] == ["drop_cold_frac"] and "finite" in nan[0].message
    assert validate(cfg.replace(moe_stream=True, cache_mb=256, drop_cold_frac=1.5))
    # A load-scope setting: a change reopens the model.
    base = Config(moe_stream=True, cache_mb=256)
    assert signature(base) != signature(base.replace(drop_cold_frac=0.75))
    assert signature(base.replace(drop_cold_frac=0.75)) != signature(
        base.replace(drop_cold_frac=0.75, drop_prefill=True))


def test_a_gated_setting_off_its_default_is_ignored_not_applied_while_its_gate_fails() -> None:
    """Dropping needs the LRU cache: while streaming is off, the value in force is the default
    (the panel applies this; validate() still refuses the raw combination from a CLI)."""
    drop = C.BY_NAME["drop_cold_frac"]
    raw = Config(drop_cold_frac=0.75)
    assert validate(raw)  # the command line still hears why
    assert C.without_ignored(raw) == Config() and validate(C.without_ignored(raw)) == []
    assert C.gate_reason(drop, raw).startswith("Ignored: 0.75 is kept but not used until")
    streaming = raw.replace(moe_stream=True, cache_mb=256)
    assert C.without_ignored(streaming) == streaming and C.gate_reason(drop, streaming) == ""
    assert C.gate_reason(drop, Config()).startswith("Only used when expert streaming")
