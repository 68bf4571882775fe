"""Opening a model: the parts a session runs on, loaded in order and freed in order.

`load_parts` loads, from one config and the model file's facts, the model (lean when experts
stream), its context, the abort flag, the expert streamer, the chat template, the image projector
and the draft model, and the prompt builder over them. A part that fails frees the ones already
made and raises SessionError with what happened and what to do. `Session.open` (session.py) is
its one caller; which settings a model opens with is decided before it, by the front-end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from workbench.backend import llama, mtmd
from workbench.backend.abort import AbortFlag
from workbench.config import Config, validate
from workbench.engine.chat.fallback import fallback_template
from workbench.engine.chat.template import ChatTemplate
from workbench.engine.chat.think import ThinkControl, probe_think_control
from workbench.engine.kv_memory import KvMemory
from workbench.engine.model_setup import default_model, expert_override, load_failure_message
from workbench.engine.prompt import PromptBuilder
from workbench.engine.requests import SessionError
from workbench.engine.speculation.drafters import DraftModelError, ModelDrafter
from workbench.engine.streaming import StreamingRuntime
from workbench.file_kind import TextFileError, read_utf8_text
from workbench.moe.layout import ModelFacts, ModelFileError, read_model_facts
from workbench.moe.lean_load import lean_load
from workbench.moe.projector import ProjectorFacts, read_projector_facts
from workbench.moe.registry import NotStreamableError
from workbench.moe.streamer import StreamerError

log = logging.getLogger("workbench.session")


def check_openable(config: Config) -> tuple[Path, ModelFacts]:
    """What `Session.open` refuses before it loads anything: settings that do not validate, a
    model file that is missing or not a whole GGUF. Raises SessionError; loads nothing, so a
    caller may ask before closing the model it has open."""
    problems = validate(config)
    if problems:
        raise SessionError("; ".join(p.message for p in problems))
    path = Path(config.model) if config.model else default_model()
    try:
        facts = read_model_facts(path)
    except ModelFileError as exc:
        raise SessionError(str(exc)) from exc
    if config.spec_draft_model:
        check_draft_model(Path(config.spec_draft_model), facts)
    return path, facts


def check_draft_model(path: Path, target: ModelFacts) -> None:
    """SessionError for a draft model that is not a whole GGUF (a FIFO, a folder, a text file)
    or whose vocabulary differs in size from the target's, from the headers alone, before
    either model loads (the token-by-token comparison still runs on the loaded pair)."""
    try:
        draft = read_model_facts(path)
    except ModelFileError as exc:
        raise SessionError(f"the draft model (--spec-draft-model): {exc}") from exc
    if min(draft.n_tokens, target.n_tokens) > 0 and draft.n_tokens != target.n_tokens:
        raise SessionError(
            f"the draft model {path.name} does not share {target.path.name}'s vocabulary (its "
            f"vocabulary has {draft.n_tokens} tokens and the model's {target.n_tokens}), so "
            "its tokens would mean other text. Choose a draft model of the same family and "
            "tokenizer, or use n-gram drafting (--spec ngram), which needs none")


@dataclass(slots=True)
class ModelParts:
    """What an open session runs on; None where the config asks for none (or not yet made)."""

    model: llama.Model | None = None
    ctx: llama.Context | None = None
    kv: KvMemory | None = None
    abort: AbortFlag | None = None
    streaming: StreamingRuntime | None = None
    template: ChatTemplate | None = None
    template_origin: str = "none (raw text)"
    think_control: ThinkControl = ThinkControl.TEMPLATE
    projector: mtmd.Projector | None = None
    projector_facts: ProjectorFacts | None = None
    drafter: ModelDrafter | None = None  # the draft model (spec_draft_model)
    prompts: PromptBuilder | None = None

    def close(self) -> None:
        """Free in order: the streamer after the context (which calls into it) and before the
        model (whose tensors it rebound and now restores); the projector before the model."""
        if self.prompts is not None:
            self.prompts.close()  # its decoded images belong to the projector
        for obj in (self.drafter, self.ctx, self.streaming, self.abort, self.projector,
                    self.model):
            if obj is not None:
                obj.close()

    def warnings(self, n_ctx: int) -> list[str]:
        """Things the user should know about these parts' settings (e.g. the cache cliff)."""
        out = []
        trained = self.model.n_ctx_train if self.model else 0
        if trained > 0 and n_ctx > trained:
            out.append(f"the context ({n_ctx} tokens) is longer than the {trained} this "
                       f"model was trained on: past {trained} tokens its answers may turn to "
                       f"noise; set --n-ctx {trained} or less")
        if self.streaming:
            out.extend(self.streaming.warnings)
            lean = self.streaming.lean
            if lean is not None and not lean.armed:
                out.append(lean.note)
        return out

    def resolved_settings(self, config: Config) -> dict[str, object]:
        """Every setting as it is in force: automatic and fallback choices resolved."""
        settings = config.to_dict()
        if self.streaming is not None:
            info = self.streaming.info
            settings["cache_mb"] = round(info.budget.mib) if info.budget.enabled else 0
            settings["o_direct"] = info.o_direct
            settings["io_threads"] = info.lanes
            settings["lean_load"] = info.lean_load
        return settings


def load_parts(config: Config, facts: ModelFacts, path: Path,
               progress: Callable[[float], bool] | None = None,
               routes: tuple[bool, int | None, bool] = (False, None, False),
               warm_dir: Path | None = None) -> ModelParts:
    """Every part `config` asks for; on any failure the parts made so far are freed."""
    parts = ModelParts()
    try:
        _load(parts, config, facts, path, progress, routes, warm_dir)
    except BaseException:
        parts.close()
        raise
    return parts


def _load(parts: ModelParts, cfg: Config, facts: ModelFacts, path: Path,
          progress: Callable[[float], bool] | None, routes: tuple[bool, int | None, bool],
          warm_dir: Path | None) -> None:
    overrides = expert_override(cfg, facts)
    if cfg.moe_stream:
        try:
            parts.streaming = StreamingRuntime(cfg, facts, record_routes=routes[0],
                                               max_route_loads=routes[1], warm_dir=warm_dir,
                                               record_scores=routes[2])
        except (NotStreamableError, StreamerError) as exc:
            raise SessionError(str(exc)) from exc
    streaming = parts.streaming
    # Armed for the load alone: the streamer reads the experts itself, so llama.cpp need not
    # read the whole file up front.
    lean = (lean_load(facts.shards, streaming.lean_blank())
            if streaming is not None and cfg.lean_load else nullcontext())
    try:
        with lean as report:
            model = parts.model = llama.Model(
                path, llama.ModelParams(kv_overrides_int=overrides), progress)
    except llama.LlamaError as exc:
        raise SessionError(load_failure_message(path, facts, str(exc))) from exc
    if streaming is not None:
        streaming.lean = report
    n_batch = min(cfg.n_batch, cfg.n_ctx)
    try:
        ctx = parts.ctx = llama.Context(
            model,
            llama.ContextParams(
                n_ctx=cfg.n_ctx, n_batch=n_batch, n_ubatch=min(cfg.n_ubatch, n_batch),
                n_threads=cfg.n_threads,
                eval_callback=streaming.eval_callback if streaming else None,
            ),
        )
    except llama.LlamaError as exc:
        raise SessionError(str(exc)) from exc
    parts.kv = KvMemory(ctx)
    parts.abort = AbortFlag()
    parts.abort.install(ctx.ptr)
    if streaming is not None:
        try:
            streaming.attach(ctx, model, parts.abort)
        except (RuntimeError, StreamerError) as exc:
            raise SessionError(f"expert streaming could not start: {exc}") from exc
    if cfg.chat_template:
        parts.template, parts.template_origin = _chat_template(model, cfg, facts, path)
        parts.think_control = probe_think_control(parts.template)
    if cfg.mmproj:
        parts.projector_facts, parts.projector = _load_projector(model, cfg, Path(cfg.mmproj))
    if cfg.spec_draft_model:
        try:
            parts.drafter = ModelDrafter(Path(cfg.spec_draft_model), model,
                                         n_ctx=cfg.n_ctx, n_threads=cfg.n_threads)
        except DraftModelError as exc:
            raise SessionError(str(exc)) from exc
    parts.prompts = PromptBuilder(model, parts.template, parts.think_control, parts.projector)


def _load_projector(model: llama.Model, cfg: Config, path: Path
                    ) -> tuple[ProjectorFacts, mtmd.Projector]:
    try:
        facts = read_projector_facts(path)
    except ModelFileError as exc:
        raise SessionError(str(exc)) from exc
    try:
        return facts, mtmd.Projector(path, model, cfg.n_threads)
    except mtmd.ProjectorError as exc:
        n_embd = mtmd.model_n_embd(model)
        width = facts.projection_dim
        if "mismatch" in str(exc) or (width > 0 and width != n_embd):
            raise SessionError(
                f"the image projector {path.name} does not fit this model: it makes "
                f"embeddings {width if width > 0 else 'of another'} wide and "
                f"{model.path.name} reads {n_embd}. Choose the mmproj file made for "
                "this model (usually beside it).") from exc
        raise SessionError(f"{exc}. Choose the model's mmproj file in the model picker."
                           ) from exc


def _chat_template(model: llama.Model, cfg: Config, facts: ModelFacts, path: Path
                   ) -> tuple[ChatTemplate, str]:
    """The template the turns render with, and where it came from."""
    source = model.chat_template()
    origin = "model file"
    if cfg.chat_template_file:
        template_path = Path(cfg.chat_template_file)
        source = read_template_file(template_path)
        origin = f"file {template_path.name}"
    if not source:
        source, name = fallback_template(facts.arch)
        origin = f"built-in {name} (the model file has none)"
        log.info("%s has no chat template; using the built-in %s template", path.name, name)
    template = ChatTemplate(source=source, bos_token=model.token_text(model.bos),
                            eos_token=model.token_text(model.eos),
                            name=f"the chat template ({origin})")
    return template, origin


def read_template_file(path: Path) -> str:
    """A chat template file's text; SessionError says what is wrong with it and what to do."""
    fix = "Choose another file, or clear the setting to use the model's own template."
    try:
        return read_utf8_text(path)
    except TextFileError as exc:
        # An empty one too: silently using another template would make the model behave
        # unlike what was chosen.
        raise SessionError(f"{exc.sentence(f'the chat template {path}')}. {fix}") from exc
