"""From a conversation to prompt tokens: template rendering, thinking control, BOS exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.backend import llama
from workbench.engine.chat.reasoning import (
    ReasoningParser,
    detect_reasoning_format,
    parser_for_prompt,
)
from workbench.engine.chat.template import ChatTemplate, TemplateError
from workbench.engine.chat.think import ThinkControl, no_think_prefill

Message = dict[str, str]


@dataclass(slots=True)
class Prompt:
    tokens: list[int]
    text: str  # what was fed after BOS (rendered template, prefill included), or the raw text
    user_message: Message | None  # None when the text went to the model raw
    parser: ReasoningParser  # splits the generation that follows this prompt
    notes: list[str] = field(default_factory=list)


class PromptBuilder:
    """Renders a conversation for one model (or passes raw text when there is no template)."""

    def __init__(self, model: llama.Model, template: ChatTemplate | None,
                 think_control: ThinkControl) -> None:
        self.model = model
        self.template = template
        self.think_control = think_control

    def build(self, history: list[Message], text: str, *, think: bool,
              system_prompt: str) -> Prompt:
        if self.template is None:
            return self._raw(text)
        user_message = {"role": "user", "content": text}
        messages = [*history, user_message]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        try:
            rendered = self.template.render(
                messages, add_generation_prompt=True, enable_thinking=think
            )
        except TemplateError as exc:
            prompt = self._raw(text)
            prompt.notes.append(str(exc))  # says that this turn goes to the model as plain text
            return prompt
        prefilled = not think and self.think_control is ThinkControl.PREFILL
        if prefilled:
            rendered += no_think_prefill(self.template)
        # The template may write BOS itself; tokenize without specials and add it exactly once.
        bos_text = self.template.bos_token
        had_bos = bool(bos_text) and rendered.startswith(bos_text)
        if had_bos:
            rendered = rendered[len(bos_text):]
        tokens = self.model.tokenize(rendered, add_special=False, parse_special=True)
        if had_bos or self.model.add_bos:
            tokens.insert(0, self.model.bos)
        if prefilled:
            # The prefill already closed the reasoning span: the stream is the answer.
            parser = ReasoningParser(detect_reasoning_format(None))
        else:
            # Starts inside reasoning when the prompt left a span open (e.g. ends with "<think>").
            parser = parser_for_prompt(detect_reasoning_format(self.template), rendered)
        return Prompt(tokens, rendered, user_message, parser)

    def extend(self, prompt: Prompt, answer_so_far: str) -> None:
        """Continue: the prompt goes on with an answer's beginning, so the model generates on
        from its end. Tokenized on its own (no specials parsed: it is model output), as its
        tokens were fed when they were generated, so the KV memory's copy of them is reused;
        the parser reads it first, so the answer it builds starts with it."""
        if not answer_so_far:
            return
        prompt.tokens.extend(self.model.tokenize(answer_so_far, add_special=False,
                                                 parse_special=False))
        prompt.text += answer_so_far
        prompt.parser.feed(answer_so_far)

    def _raw(self, text: str) -> Prompt:
        tokens = self.model.tokenize(text, add_special=True, parse_special=True)
        return Prompt(tokens, text, None, ReasoningParser(detect_reasoning_format(None)))
