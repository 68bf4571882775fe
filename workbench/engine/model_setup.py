"""Decisions made when a model is opened: overrides, plain-words load errors, the run info."""

from __future__ import annotations

from pathlib import Path

from workbench import __version__
from workbench.backend import llama
from workbench.config import Config
from workbench.engine.metrics import RunInfo
from workbench.engine.model_identity import model_identity
from workbench.engine.requests import SessionError
from workbench.moe.layout import ModelFacts


def expert_override(cfg: Config, facts: ModelFacts) -> tuple[tuple[str, int], ...]:
    """The kv override that makes the graph route fewer experts (validated against the file)."""
    if cfg.n_expert_used <= 0:
        return ()
    if not facts.is_moe:
        raise SessionError(
            f"Active experts was set to {cfg.n_expert_used}, but {facts.path.name} is not a MoE "
            "model (it has no experts). Set it back to the model default (0)."
        )
    if cfg.n_expert_used > facts.n_expert:
        raise SessionError(
            f"Active experts was set to {cfg.n_expert_used}, but {facts.path.name} has only "
            f"{facts.n_expert} experts per layer. Choose at most {facts.n_expert}."
        )
    return ((f"{facts.arch}.expert_used_count", cfg.n_expert_used),)


def load_failure_message(path: Path, facts: ModelFacts, detail: str) -> str:
    reasons = llama.recent_errors()
    if any("unknown model architecture" in r for r in reasons):
        return (
            f"{path.name} is a GGUF for the architecture '{facts.arch}', which this llama.cpp "
            f"(llama-cpp-python {llama.llama_cpp_python_version()}) does not know. Use a model "
            "of a supported architecture, or update the workbench."
        )
    tail = f" llama.cpp said: {reasons[-1]}" if reasons else ""
    return f"{detail}.{tail} Check that the file is a complete, supported GGUF model."


def build_run_info(path: Path, model: llama.Model, facts: ModelFacts, config: Config,
                   chat_template: bool, settings: dict[str, object]) -> RunInfo:
    return RunInfo(
        engine_version=__version__,
        llama_cpp_python_version=llama.llama_cpp_python_version(),
        model=model_identity(path),
        arch=facts.arch,
        n_layer=model.n_layer,
        n_expert=facts.n_expert,
        n_expert_used=config.n_expert_used or facts.n_expert_used,
        n_vocab=model.n_vocab,
        n_ctx_train=model.n_ctx_train,
        chat_template=chat_template,
        settings=settings,
    )


def default_model() -> Path:
    from workbench.embedded import EmbeddedModelError, default_model_path

    try:
        return default_model_path()
    except EmbeddedModelError as exc:  # no network on a first start: a message, not a traceback
        raise SessionError(str(exc)) from exc
