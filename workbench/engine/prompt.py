"""From a conversation to prompt tokens: template rendering, thinking control, BOS exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.backend import llama, mtmd
from workbench.engine.chat.reasoning import (
    ReasoningParser,
    detect_reasoning_format,
    parser_for_prompt,
    reasoning_continuation,
)
from workbench.engine.chat.template import ChatTemplate, TemplateError
from workbench.engine.chat.think import ThinkControl, no_think_prefill
from workbench.engine.images import (
    ImageInput,
    ImageInputError,
    check_image,
    image_token_ids,
    message_images,
)
from workbench.engine.tools.calls import ToolCalling
from workbench.engine.tools.formats import detect_tool_format
from workbench.engine.tools.messages import tool_messages

Message = dict[str, str]
MAX_DECODED = 64  # decoded images kept between turns (each is width × height × 3 bytes)


def _raw_parser() -> ReasoningParser:
    """Raw text has no reasoning markers, and its continuation is kept character for character."""
    return ReasoningParser(detect_reasoning_format(None), trim=False)


@dataclass(slots=True)
class ImageSpan:
    """Where one image sits in a prompt's tokens, and the chunk that evaluates it."""

    start: int  # its first position
    n_pos: int  # positions it takes (== its stand-in ids in Prompt.tokens)
    sha256: str
    chunk: mtmd.Chunk


@dataclass(slots=True)
class Prompt:
    tokens: list[int]  # images stand in as negative ids (engine/images.py)
    text: str  # what was fed after BOS (rendered template, prefill included), or the raw text
    user_message: Message | None  # None when the text went to the model raw
    parser: ReasoningParser  # splits the generation that follows this prompt
    notes: list[str] = field(default_factory=list)
    images: list[ImageSpan] = field(default_factory=list)
    chunks: mtmd.Chunks | None = None  # owns the images' chunks; close() after the turn
    # Continue: the answer so far's tokens at the end of `tokens` (the sampler's penalties see
    # them, as they saw them while that answer was generated).
    n_continued: int = 0

    @property
    def kv_cells(self) -> int:
        """KV cells the prompt needs: its positions, plus the embeddings an image has beyond
        its positions on an M-RoPE model (one cell per embedding; images.kv_cells)."""
        return len(self.tokens) + sum(max(0, s.chunk.n_tokens - s.n_pos) for s in self.images)

    def image_at(self, pos: int) -> ImageSpan | None:
        """The image whose positions include `pos`, if any."""
        for span in self.images:
            if span.start <= pos < span.start + span.n_pos:
                return span
        return None

    def whole_images_below(self, pos: int) -> int:
        """`pos`, or the start of the image it falls inside: half an image cannot be kept in
        the memory, its embeddings are decoded from one encode."""
        inside = self.image_at(pos)
        return inside.start if inside is not None and inside.start < pos else pos

    def close(self) -> None:
        if self.chunks is not None:
            self.chunks.close()
            self.chunks = None


class PromptBuilder:
    """Renders a conversation for one model (or passes raw text when there is no template)."""

    def __init__(self, model: llama.Model, template: ChatTemplate | None,
                 think_control: ThinkControl, projector: mtmd.Projector | None = None) -> None:
        self.model = model
        self.template = template
        self.think_control = think_control
        self.projector = projector
        # Decoded images by hash: a later turn re-tokenizes the whole conversation, and
        # decoding the same file every turn would be wasted work.
        self._bitmaps: dict[str, mtmd.Bitmap] = {}
        # An image's first stand-in id -> its embeddings beyond its positions (M-RoPE models
        # only): what images.kv_cells adds for it wherever its stand-ins are, the KV mirror too.
        self.extra_cells: dict[int, int] = {}

    def close(self) -> None:
        for bitmap in self._bitmaps.values():
            bitmap.close()
        self._bitmaps.clear()

    def build(self, history: list[Message], text: str, *, think: bool,
              system_prompt: str, images: tuple[ImageInput, ...] = (),
              table: dict[str, ImageInput] | None = None, raw: bool = False,
              tools: ToolCalling | None = None, message: Message | None = None) -> Prompt:
        """The prompt for `text` (with `images`) after `history`. `table` holds the bytes of
        every image the history refers to. ImageInputError when an image cannot be used.
        `raw`: the text alone, as is, even when there is a template. `tools`: the template
        shows them (engine/tools/messages.py); `message`: the last message when it is not the
        user's text (a tool's reply)."""
        if self.template is None or raw:
            return self._raw(text, images)
        user_message = dict(message) if message is not None else {"role": "user",
                                                                  "content": text}
        if images:
            user_message["images"] = ",".join(i.sha256 for i in images)
        messages = [*history, user_message]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        ordered = [h for m in messages for h in message_images(m)]
        source = self.template.source
        shown = tool_messages([self._for_template(m) for m in messages], source, tools,
                              detect_tool_format(source))
        declared = ([t.declared for t in tools.tools] if tools is not None and tools.calls_allowed
                    else None)
        try:
            rendered = self.template.render(shown, add_generation_prompt=True,
                                            enable_thinking=think, tools=declared)
        except TemplateError as exc:
            prompt = self._raw(text, images)
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
        lookup = {**(table or {}), **{i.sha256: i for i in images}}
        spans: list[ImageSpan] = []
        chunks = None
        if ordered and self.projector is not None:
            tokens, spans, chunks = self._multimodal(rendered, ordered, lookup)
        else:
            tokens = self.model.tokenize(rendered, add_special=False, parse_special=True)
        if had_bos or self.model.add_bos:
            tokens.insert(0, self.model.bos)
            for span in spans:
                span.start += 1
        if prefilled:
            # The prefill already closed the reasoning span: the stream is the answer.
            parser = ReasoningParser(detect_reasoning_format(None))
        else:
            # Starts inside reasoning when the prompt left a span open (e.g. ends with "<think>").
            parser = parser_for_prompt(detect_reasoning_format(self.template), rendered)
        prompt = Prompt(tokens, rendered, user_message, parser, images=spans, chunks=chunks)
        if ordered and self.projector is None:
            prompt.notes.append(
                f"this conversation has {len(ordered)} image(s) the model cannot see: it was "
                "opened without an image projector (choose the model's mmproj file in the model "
                "picker to show them to it)")
        return prompt

    def extend(self, prompt: Prompt, answer_so_far: str, reasoning_so_far: str = "") -> None:
        """Continue: the prompt goes on with an answer's beginning, so the model generates on
        from its end. Tokenized on its own (no specials parsed: it is model output), as its
        tokens were fed when they were generated, so the KV memory's copy of them is reused;
        the parser reads it first, so the answer it builds starts with it.

        With reasoning, the stream is rebuilt around it (reasoning_continuation); its markers
        are parsed as specials, since that is how the model wrote them (ContinueError when the
        format cannot be rebuilt)."""
        if reasoning_so_far:
            pieces = reasoning_continuation(prompt.parser.fmt, reasoning_so_far, answer_so_far,
                                            opened=prompt.parser.in_reasoning)
        elif answer_so_far:
            pieces = [(answer_so_far, False)]
        else:
            return
        for text, marker in pieces:
            tokens = self.model.tokenize(text, add_special=False, parse_special=marker)
            prompt.tokens.extend(tokens)
            prompt.n_continued += len(tokens)
            prompt.text += text
            prompt.parser.feed(text)

    def _for_template(self, message: Message) -> Message:
        """The message as the template sees it: an image is its marker before the text."""
        hashes = message_images(message)
        out = {k: v for k, v in message.items() if k != "images"}
        if hashes and self.projector is not None:
            out["content"] = mtmd.default_marker() * len(hashes) + "\n" + out.get("content", "")
        return out

    def _multimodal(self, rendered: str, ordered: list[str], lookup: dict[str, ImageInput]
                    ) -> tuple[list[int], list[ImageSpan], mtmd.Chunks]:
        projector = self.projector
        assert projector is not None
        if len(self._bitmaps) > MAX_DECODED:  # a long session of many pictures
            for old in [h for h in self._bitmaps if h not in set(ordered)]:
                self._bitmaps.pop(old).close()
        bitmaps = []
        for sha in ordered:
            bitmap = self._bitmaps.get(sha)
            if bitmap is None:
                image = lookup.get(sha)
                if image is None:
                    raise ImageInputError(
                        f"an image of this conversation ({sha[:8]}) is missing from the store: "
                        "start a new chat or edit the message that carried it")
                check_image(image)
                try:
                    bitmap = projector.bitmap(image.data, sha)
                except mtmd.ImageError as exc:
                    raise ImageInputError(f"{image.label} is not a usable image: {exc}. "
                                          "Attach a PNG or JPEG file instead") from exc
                self._bitmaps[sha] = bitmap
            bitmaps.append(bitmap)
        try:
            chunks = projector.tokenize(rendered, bitmaps)
        except mtmd.ProjectorError as exc:
            raise ImageInputError(str(exc)) from exc
        tokens: list[int] = []
        spans: list[ImageSpan] = []
        for chunk in chunks.items:
            if chunk.kind == mtmd.CHUNK_TEXT:
                tokens.extend(chunk.tokens)
            else:
                spans.append(ImageSpan(len(tokens), chunk.n_pos, chunk.image_id, chunk))
                stand_ins = image_token_ids(chunk.image_id, chunk.n_pos)
                if chunk.n_tokens > chunk.n_pos and stand_ins:
                    self.extra_cells[stand_ins[0]] = chunk.n_tokens - chunk.n_pos
                tokens.extend(stand_ins)
        return tokens, spans, chunks

    def _raw(self, text: str, images: tuple[ImageInput, ...] = ()) -> Prompt:
        if images and self.projector is not None:
            marked = mtmd.default_marker() * len(images) + text
            bos = [self.model.bos] if self.model.add_bos else []
            tokens, spans, chunks = self._multimodal(marked, [i.sha256 for i in images],
                                                     {i.sha256: i for i in images})
            for span in spans:
                span.start += len(bos)
            return Prompt(bos + tokens, marked, None, _raw_parser(), images=spans, chunks=chunks)
        tokens = self.model.tokenize(text, add_special=True, parse_special=True)
        return Prompt(tokens, text, None, _raw_parser())
