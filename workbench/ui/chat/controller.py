"""The chat's behaviour as coroutines: send, stop, regenerate, edit, switch versions, open chats.

It composes the engine bridge, the database worker and the chat's widgets (`ChatWidgets`); it
owns no thread and never blocks: every engine or database call is awaited. One generation runs
at a time. Before each one the engine is told which complete turns of the branch on screen are
the model's context.

The model and the settings in force are the session controller's (`ui/session_controller.py`):
this asks it (`model`, `config`) and listens to it (`model_changed`). The window uses only the
verbs (send, stop, regenerate, continue_answer, edit, switch_version, open_conversation,
rerun_with, draft_changed, cancel_title, close) and reads `conversation_id`, `generating` and
`last_answer_id`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.config import Config
from workbench.engine.images import ImageInput
from workbench.engine.requests import (
    GenerateRequest,
    GenerateResult,
    PrefillProgress,
    StopReason,
    TokenEvent,
)
from workbench.engine.tools.calls import ToolCalling
from workbench.engine.tools.turn import calls_json
from workbench.engine.turn_settings import TurnSettings
from workbench.store import Message, MessageStats, StoredImage, continued_stats
from workbench.ui.bridge import LoadedModel
from workbench.ui.chat import auto_title, token_view
from workbench.ui.chat.context import ELSEWHERE_NOTE, model_history, tool_turn
from workbench.ui.chat.qt_chat_view import QtChatView
from workbench.ui.chat.qt_composer import NO_PROJECTOR_HINT, QtComposer
from workbench.ui.chat.qt_tool_call_block import QtToolCallBlock
from workbench.ui.chat.regenerate_seed import plan_regenerate
from workbench.ui.chat.shown import ShownMessage
from workbench.ui.chat.stats_line import (
    kv_states_text,
    stats_from_result,
    thought_label,
)
from workbench.ui.chat.tool_turns import calling_of, pending_answer, stored_calls, tools_of
from workbench.ui.chat.tools_file import ToolsFile, ToolsFileError
from workbench.ui.chat.turn_recorder import TurnRecorder
from workbench.ui.db_worker import AsyncStore
from workbench.ui.qt_status_bar import QtStatusBar
from workbench.ui.session_controller import SessionController
from workbench.ui.telemetry.qt_expert_map import QtExpertMap
from workbench.ui.telemetry.qt_telemetry_panel import QtTelemetryPanel
from workbench.ui.ui_collector import shared_collector
from workbench.ui.ui_pacer import shared_pacer

log = logging.getLogger("workbench.ui")

_STATUS = {StopReason.EOS: "complete", StopReason.LENGTH: "complete",
           StopReason.STOPPED: "stopped", StopReason.ERROR: "error",
           StopReason.REJECTED: "rejected"}
FORECAST_DELAY_S = 0.3  # a pause in typing this long updates the draft's cost
YIELD_S = 0.001  # a pause that lets due timers and input run between two steps of work


@dataclass(frozen=True, slots=True)
class ChatWidgets:
    """The widgets a chat drives: the messages, the composer, the plots, the status bar."""

    chat: QtChatView
    composer: QtComposer
    telemetry: QtTelemetryPanel
    status: QtStatusBar
    expert_map: QtExpertMap | None = None


class ChatController:
    def __init__(
        self, session: SessionController, db: AsyncStore, widgets: ChatWidgets,
        on_conversations_changed: Callable[[], None] = lambda: None,
        on_turn_finished: Callable[[], None] = lambda: None,
        show_error: Callable[[str], None] = lambda text: None,
        show_info: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.session, self.bridge, self.db = session, session.bridge, db
        self.chat, self.composer = widgets.chat, widgets.composer
        self.telemetry, self.status = widgets.telemetry, widgets.status
        self.expert_map = widgets.expert_map
        self.on_conversations_changed = on_conversations_changed
        self.on_turn_finished = on_turn_finished  # a new run is stored (the runs list shows it)
        self.show_error = show_error  # the window's notice bar: what went wrong, what to do
        self.show_info = show_info  # ...and what happened that the user should know
        self.conversation_id: int | None = None
        self.path: list[Message] = []
        self.images: dict[int, list[StoredImage]] = {}  # the path's messages' images, by id
        self.generating = False
        self.stopping = False
        self.last_result: GenerateResult | None = None
        self.turns_done = 0  # finished generations (tests and the screenshot wait on it)
        self._writes: set[asyncio.Task[Any]] = set()  # throttled saves in flight
        # Tool results being stored (a block's Send result), one at a time: each goes under
        # the one before it, and the last one starts the answer that goes on from them.
        self._tool_tasks: set[asyncio.Task[Any]] = set()
        self._tool_lock = asyncio.Lock()
        self.tool_turns_done = 0  # results handled, stored or refused (tests wait on it)
        self._forecast_task: asyncio.Task[None] | None = None
        self._closed = False
        self._stop = threading.Event()  # this answer's Stop, for the engine before it starts
        # The automatic title being generated (one at a time), and its own Stop.
        self._title_task: asyncio.Task[None] | None = None
        self._title_stop = threading.Event()
        self.titles_done = 0  # title turns ended, named or not (tests wait on it)
        self.titles_cancelled = 0
        # The session asks before a load (none while an answer is in progress) and after an
        # Apply (the open conversation keeps the new settings), and tells of every model.
        session.answering = lambda: self.generating
        session.conversation = lambda: self.conversation_id
        session.listen(self)

    # ---- model --------------------------------------------------------------------------------

    @property
    def model(self) -> LoadedModel | None:
        """The open model (the session's)."""
        return self.session.model

    @property
    def config(self) -> Config:
        """The settings in force (the session's)."""
        return self.session.config

    def model_changed(self, model: LoadedModel | None) -> None:
        """The session opened a model, or the open one went (None)."""
        if model is None:
            self._stop_title()  # the model is going: its title turn with it
        if self.expert_map is not None:
            self.expert_map.set_model(model)
        self.telemetry.set_o_direct(model is not None and model.o_direct)
        if model is None:
            self.composer.set_ready(False, "Open a model to chat (File > Open model…)")
            self.composer.gauge.set_usage(-1, 0)
            return
        self.composer.set_ready(True)
        self.composer.set_sees_images(model.sees_images)
        self.composer.gauge.set_usage(self._used_from_path(), model.n_ctx)
        self.status.set_context(self.composer.gauge.used, model.n_ctx)

    @property
    def last_answer_id(self) -> int | None:
        """The answer that ends the branch on screen (what "re-run this turn" answers again)."""
        if self.path and self.path[-1].role == "assistant":
            return self.path[-1].id
        return None

    # ---- conversations ------------------------------------------------------------------------

    async def open_conversation(self, conversation_id: int | None) -> None:
        """Show a stored conversation (None: a new, empty one) with its plots."""
        if self.generating:
            return
        self.conversation_id = conversation_id
        if conversation_id is None:
            self.path = []
            self.images = {}
            self.chat.show_messages([])
            self.telemetry.clear()
            self._show_gauge(0)
            await self.session.use_conversation(None, {})
            return
        shown, path = await self.db.call(lambda s: _load_recovered(s, conversation_id))
        stored = await self.db.call(lambda s: s.conversation_settings(conversation_id))
        await self.session.use_conversation(conversation_id, stored)
        self.path = path
        self.images = {m.id: m.images for m in shown if m.images}
        self.chat.show_messages(_on_screen(shown))
        self._show_tool_calls()
        # Not this window's (it is not generating): another live window is writing it now.
        for message in path:
            widget = self.chat.widget_for(message.id)
            if message.status == "streaming" and widget is not None:
                widget.note.setText(ELSEWHERE_NOTE)
                widget.note.setVisible(True)
        await self._load_telemetry()
        self._show_gauge(self._used_from_path())

    async def _load_telemetry(self) -> None:
        """Every answer's tokens on the plots, one turn each: all the runs of an answer that
        was continued, in the order they ran."""
        answers = [(m.id, m.stats.run_id) for m in self.path
                   if m.role == "assistant" and m.stats.run_id is not None]
        cid = self.conversation_id

        def fetch(store: Any) -> list[list[list[dict[str, Any]]]]:
            runs: dict[int, list[int]] = {}
            for run in reversed(store.list_runs(conversation_id=cid)):  # oldest first
                runs.setdefault(run.message_id, []).append(run.id)
            out = []
            for mid, rid in answers:
                rows = []
                for each in runs.get(mid) or [rid]:
                    try:
                        rows.append(store.token_rows(each))
                    except KeyError:
                        rows.append([])
                out.append(rows)
            return out

        turns = await self.db.call(fetch)
        starts = self.telemetry.load_turns(turns)
        for (mid, _), x0, runs in zip(answers, starts, turns, strict=True):
            widget = self.chat.widget_for(mid)
            if widget is not None:
                widget.set_tokens(x0, [r.get("piece", "") for rows in runs for r in rows])

    async def switch_version(self, message_id: int) -> None:
        if self.generating or self.conversation_id is None:
            return
        await self.db.call(lambda s: s.switch_branch(message_id))
        await self.open_conversation(self.conversation_id)

    # ---- turns --------------------------------------------------------------------------------

    async def send(self, text: str) -> None:
        if self.generating or self.model is None:
            return
        attached = list(self.composer.attachments)
        if attached and not self.model.sees_images:  # attached for a model since closed
            self.composer.hint.setText(NO_PROJECTOR_HINT)
            return
        stored = [StoredImage(i.sha256, i.data, i.name) for i in attached]
        # From the moment Send is pressed this is an answer in progress: Stop works from here
        # (before the engine has it), and a second Enter does not send twice.
        self._begin_answer()
        history = model_history(self.path, self.images)
        cid, parent = self.conversation_id, self._tail_id()
        try:
            user = await self.db.call(lambda s: _store_user_message(s, cid, parent, text,
                                                                    stored))
        except Exception as exc:
            log.exception("storing the message failed")
            self._end_answer()
            self.show_error(f"Your message was not saved ({exc}). It is still in the message "
                            "box: free some disk space, or check the data folder, and send it "
                            "again.")
            return
        self.composer.clear_sent(text)
        self.composer.forecast.setText("")
        if self.conversation_id != user.conversation_id:
            self.conversation_id = user.conversation_id
            self.on_conversations_changed()
        self.path.append(user)
        if stored:
            self.images[user.id] = stored
        try:
            answer = await self.db.call(
                lambda s: s.add_message(user.conversation_id, user.id, "assistant",
                                        status="streaming"))
        except Exception as exc:
            log.exception("storing the answer's placeholder failed")
            self._end_answer()
            self.chat.append(ShownMessage.from_store(user, images=stored))
            self.show_error(f"Your message is saved, but the answer could not start ({exc}). "
                            "Free some disk space, then use Regenerate or send again.")
            return
        self.path.append(answer)
        self.chat.append(ShownMessage.from_store(user, images=stored))
        # One message widget per step of the loop, not two. A zero sleep would not do: its
        # callback runs ahead of timers already due, so those would wait for both steps.
        await asyncio.sleep(YIELD_S)
        await self._generate(text, answer, history, images=_inputs(stored))

    async def regenerate(self, answer_id: int) -> None:
        if self.generating or self.model is None:
            return
        index = next((i for i, m in enumerate(self.path) if m.id == answer_id), -1)
        if index < 1:
            return
        user = self.path[index - 1]
        history = model_history(self.path[: index - 1], self.images)
        message = None
        if user.role == "tool":  # an answer that went on from tool results: from them again
            if (turn := tool_turn(self.path[:index], self.images)) is None:
                return
            history, message = turn
        # A new version that can differ: a new seed when sampling; greedy says why it cannot.
        plan = plan_regenerate(self.config)
        if plan.config is not None and not await self.session.apply_conversation_settings(
                plan.config):
            return
        self.show_info(plan.note)
        self._begin_answer()
        try:
            answer = await self.db.call(lambda s: s.regenerate(answer_id))
        except Exception as exc:
            log.exception("storing the new version failed")
            self._end_answer()
            self.show_error(f"The new version could not be started ({exc}); nothing changed.")
            return
        await self._replace_tail(self.path[:index], answer)
        await self._generate(user.content, answer, history,
                             images=_inputs(self.images.get(user.id, [])), message=message)

    async def edit(self, user_id: int, text: str) -> None:
        if self.generating or self.model is None:
            return
        index = next((i for i, m in enumerate(self.path) if m.id == user_id), -1)
        if index < 0:
            return
        history = model_history(self.path[:index], self.images)
        cid = self.conversation_id

        def add(store: Any) -> tuple[Message, Message]:
            user = store.edit_message(user_id, text)
            return user, store.add_message(cid, user.id, "assistant", status="streaming")

        self._begin_answer()
        try:
            user, answer = await self.db.call(add)
        except Exception as exc:
            log.exception("storing the edit failed")
            self._end_answer()
            self.show_error(f"The edited message was not saved ({exc}); nothing changed. Edit "
                            "it again once the problem is fixed.")
            return
        await self._replace_tail(self.path[:index], user)
        self.path.append(answer)
        await self._generate(text, answer, history,
                             images=_inputs(self.images.get(user.id, [])))

    async def rerun_with(self, config: Config) -> bool:
        """Answer the last question again with `config` (a preset): apply it (reopening only
        when a load-time setting differs), then regenerate the last answer as a sibling. The
        first answer and its run are kept, so the two runs can be compared."""
        if self.model is None:
            self.show_error("Open a model first, then re-run a turn with a preset.")
            return False
        if self.generating:
            self.show_error("Stop the answer first, then re-run the turn.")
            return False
        if self.last_answer_id is None:
            self.show_error("Nothing to re-run yet: ask something, then re-run the turn with "
                            "a preset.")
            return False
        if not await self.session.apply(config, self.session.needs_reopen(config)):
            return False
        answer_id = self.last_answer_id  # read again: the apply awaited
        if answer_id is None:
            return False
        await self.regenerate(answer_id)
        return True

    async def continue_answer(self, answer_id: int) -> None:
        """Continue: generate on from the end of an answer cut short by the token limit or by
        Stop, appending to the same message (the engine's KV memory still holds its tokens): to
        its reasoning when it was cut there, else to its answer text."""
        if self.generating or self.model is None:
            return
        index = next((i for i, m in enumerate(self.path) if m.id == answer_id), -1)
        if index < 1:
            return
        if index != len(self.path) - 1:
            self.show_error("Only the last answer of the conversation can be continued; "
                            "Regenerate makes a new version of this one.")
            return
        answer, user = self.path[index], self.path[index - 1]
        history = model_history(self.path[: index - 1])
        message = None
        if user.role == "tool":  # it went on from tool results: they stay its question
            if (turn := tool_turn(self.path[:index], self.images)) is None:
                return
            history, message = turn
        self._begin_answer()
        try:
            await self.db.call(lambda s: s.update_message(answer_id, status="streaming"))
        except Exception as exc:
            log.exception("marking the answer as streaming failed")
            self._end_answer()
            self.show_error(f"The answer could not be continued ({exc}); it is unchanged.")
            return
        await self._generate(user.content, answer, history, continue_from=answer.content,
                             continue_reasoning=answer.reasoning, message=message)

    # ---- the draft's cost ------------------------------------------------------------------------

    def draft_changed(self, text: str) -> None:
        """The composer's text changed: forecast its cost once typing pauses."""
        if self._closed:  # the window is going: a new task would outlive its loop
            return
        if self._forecast_task is not None:
            self._forecast_task.cancel()
        self._forecast_task = asyncio.get_running_loop().create_task(self._forecast(text))

    async def close(self) -> None:
        """The window is shutting down: the draft's forecast, usually asleep in its typing
        pause, is cancelled and awaited, so no task is left pending when the loop goes."""
        self._closed = True
        task, self._forecast_task = self._forecast_task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _forecast(self, text: str) -> None:
        await asyncio.sleep(FORECAST_DELAY_S)  # tokenizing per keystroke would be wasted work
        text = text.strip()
        if not text or self.generating or self.model is None:
            self.composer.forecast.setText("")
            return
        cid = self.conversation_id
        try:
            forecast = await self.bridge.forecast(GenerateRequest(
                text=text, history=tuple(model_history(self.path, self.images)),
                history_images=self._history_images(), settings=TurnSettings.of(self.config),
                conversation=str(cid) if cid is not None else None))
        except Exception:  # an estimate is never worth an error message
            log.debug("forecast failed", exc_info=True)
            forecast = None
        self.composer.show_forecast(forecast)

    def stop(self) -> None:
        """Esc or the Stop button: the engine stops within a decode step, prefill included."""
        if not self.generating or self.stopping:
            return
        self.stopping = True
        self._stop.set()
        self.bridge.cancel()
        self.composer.set_stopping()
        self.status.set_state("stopping")

    async def _replace_tail(self, prefix: list[Message], new: Message) -> None:
        """The branch now ends with `new` (a fresh sibling): redraw from the stored tree."""
        self.path = [*prefix, new]
        shown, _ = await self.db.call(lambda s: _load_path(s, new.conversation_id))
        self.images = {m.id: m.images for m in shown if m.images}
        self.chat.show_messages(_on_screen(shown[:-1] if new.role == "assistant" else shown))
        self._show_tool_calls()
        if new.role == "user":
            return
        self.chat.append(shown[-1])

    def _begin_answer(self) -> None:
        self.generating, self.stopping = True, False
        self._stop = threading.Event()
        self.composer.set_busy(True)
        self.chat.set_actions_enabled(False)

    def _end_answer(self) -> None:
        self.generating = self.stopping = False
        self.composer.set_busy(False)
        self.chat.set_actions_enabled(True)

    def _history_images(self) -> tuple[ImageInput, ...]:
        """The images the path's messages refer to (the engine needs them to rebuild it)."""
        return tuple(i for carried in self.images.values() for i in _inputs(carried))

    def _tail_id(self) -> int | None:
        return self.path[-1].id if self.path else None

    async def _generate(self, text: str, answer: Message, history: list[dict[str, str]],
                        continue_from: str = "", continue_reasoning: str = "",
                        images: tuple[ImageInput, ...] = (),
                        message: dict[str, str] | None = None) -> None:
        """One answer's turn. `message`: what it answers when that is a tool's result (the
        last of its answer's calls; `text` is its content), not the user's `text`."""
        assert self.model is not None and self.generating  # _begin_answer() came first
        await self.cancel_title()  # the engine is this answer's: a title is not worth a wait
        continuing = bool(continue_from or continue_reasoning)
        widget = (self.chat.widget_for(answer.id)
                  or self.chat.append(ShownMessage.from_store(answer)))
        widget.begin_stream()
        if not self.stopping:  # a Stop pressed while the message was being stored says so
            self.status.set_state("prefill")
        shared_pacer().answer_started()
        await asyncio.sleep(YIELD_S)  # let the loop breathe between the message and the plots
        recorder = TurnRecorder()
        calling = self._tool_calling()
        series = _Series.start(self.telemetry, widget, continuing)
        result: GenerateResult | None = None
        run_id: int | None = None
        # No cycle collection while the answer streams: a full one walks every object of the
        # window and stalls the event loop for up to ~100 ms. Reference counting still frees
        # almost everything; the collector catches up after the answer.
        shared_collector().pause()
        try:
            run = await self.db.call(lambda s: s.create_run(self.model.run_info,
                                                            message_id=answer.id))
            run_id = run.id
            request = GenerateRequest(text=text, history=tuple(history),
                                      history_images=self._history_images(),
                                      settings=TurnSettings.of(self.config),
                                      n_predict=self.config.n_predict,
                                      conversation=str(answer.conversation_id),
                                      think=self.composer.think.isChecked(),
                                      continue_from=continue_from,
                                      continue_reasoning=continue_reasoning, images=images,
                                      decoding=token_view.decoding(self.config),
                                      tools=calling, message=message)
            async for event in self.bridge.generate(request, self._stop):
                if isinstance(event, TokenEvent):
                    self._on_token(event, recorder, widget)
                    if recorder.due_write():
                        self._save_partial(answer.id, recorder, run_id, series.x_start)
                elif isinstance(event, PrefillProgress):
                    if not self.stopping:
                        self.status.set_state("prefill", f"{event.done} of {event.total}")
                        widget.set_status_text(f"reading the prompt: {event.done} of "
                                               f"{event.total} tokens")
                else:
                    result = event
        except Exception as exc:  # the engine or the database failed: say so on the message
            log.exception("generation failed")
            result = GenerateResult(
                ok=False, stop_reason=StopReason.ERROR, text=recorder.answer,
                reasoning=recorder.reasoning,
                error=f"The answer failed: {exc}. The conversation is intact; try again, or "
                      "reopen the model if this repeats.")
        finally:
            shared_collector().resume()
            shared_pacer().answer_ended()
        assert result is not None
        if continuing and not recorder.rows:
            # Stopped (or failed) before a new token: the answer stays as it was.
            result.text = result.text or continue_from
            result.reasoning = result.reasoning or continue_reasoning
            if result.summary is None:
                result.stop_reason = StopReason.STOPPED if result.ok else result.stop_reason
        refused = continuing and not recorder.rows and result.stop_reason is StopReason.REJECTED
        if refused:  # e.g. reasoning the engine cannot rebuild: the notice says why
            self.show_error(result.error)
        await self._finish(answer, widget, recorder, result, run_id, series,
                           keep_stats=answer.stats if continuing and not recorder.rows
                           else None, continued=answer.stats if continuing else None,
                           unchanged=refused)

    def _on_token(self, event: TokenEvent, recorder: TurnRecorder, widget: Any) -> None:
        if not recorder.rows and not self.stopping:
            self.status.set_state("generating")
            widget.set_status_text("")
        recorder.on_token(event)
        self.telemetry.append(event.metrics, event.choice)
        if self.expert_map is not None:
            self.expert_map.add(event.expert_map)
        widget.stream_text(recorder.answer, recorder.reasoning, recorder.thinking_tokens)

    def _save_partial(self, answer_id: int, recorder: TurnRecorder, run_id: int | None,
                      x0: int) -> None:
        content, reasoning = recorder.answer, recorder.reasoning
        rows = recorder.unsaved_rows()
        # The stats link the message to its rows, so a crash keeps the telemetry reachable.
        stats = MessageStats(run_id=run_id, x_start=x0)

        def save(store: Any) -> None:
            if run_id is not None and rows:
                store.add_token_rows(run_id, rows)
            store.update_message(answer_id, content=content, reasoning=reasoning,
                                 stats=stats if run_id is not None else None)

        # Not awaited: the stream goes on. Ordered before the final write, because the
        # database worker runs calls in submission order.
        task = asyncio.get_running_loop().create_task(self.db.call(save))
        self._writes.add(task)
        task.add_done_callback(self._write_done)

    def _write_done(self, task: Any) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("saving a streaming answer failed", exc_info=task.exception())

    async def _finish(self, answer: Message, widget: Any, recorder: TurnRecorder,
                      result: GenerateResult, run_id: int | None, series: _Series,
                      keep_stats: MessageStats | None = None,
                      continued: MessageStats | None = None, unchanged: bool = False
                      ) -> None:
        status = answer.status if unchanged else _STATUS[result.stop_reason]
        # An answer that called tools keeps the text around its calls (often none); the calls
        # are kept apart, and shown as blocks.
        content = result.text if result.tool_calls else (result.text or recorder.answer)
        tool_calls = calls_json(result.tool_calls) if result.tool_calls else None
        reasoning = result.reasoning or recorder.reasoning
        stats = keep_stats or stats_from_result(result, think_s=recorder.thinking_seconds(),
                                                n_think=recorder.thinking_tokens)
        if continued is not None and keep_stats is None:
            # Generated on by Continue: stored combined, so the line under the answer (now
            # and when reopened) describes all of its runs, not only this one.
            stats = continued_stats(continued, stats)
        if run_id is not None and recorder.rows:
            stats = stats.replace(run_id=run_id, x_start=series.x_start)
        error = answer.error if unchanged else result.error
        if result.notes and not unchanged:
            error = "\n".join([error, *result.notes]).strip()
        if result.tool_error and not unchanged:  # it stays text: say why it is no call
            error = "\n".join([error, f"The answer opened a tool call that is not one "
                               f"({result.tool_error}); it is kept as text."]).strip()
        # Every row again, not only those the partial saves did not take: a partial save may
        # have failed, and rewriting a row is idempotent (the table keys it by turn and step).
        rows, summary = list(recorder.rows), result.summary

        def save(store: Any) -> Message:
            store.update_message(answer.id, content=content, reasoning=reasoning, status=status,
                                 stats=stats, error=error, tool_calls=tool_calls)
            if run_id is not None:
                if rows:
                    store.add_token_rows(run_id, rows)
                    if summary is not None:
                        store.finish_run(run_id, summary)
                else:
                    store.delete_run(run_id)
            return store.get_message(answer.id)

        if self._writes:  # a throttled save still queued must not land after the final one
            await asyncio.gather(*self._writes, return_exceptions=True)
        try:
            saved = await self.db.call(save)
            # What this conversation was last used with: it opens with these next time.
            await self.session.keep_conversation_settings(answer.conversation_id, quiet=True)
        except Exception as exc:
            log.exception("saving the answer failed")
            saved = answer
            saved.content, saved.reasoning, saved.status, saved.stats = (
                content, reasoning, status, stats)
            saved.error = f"{error}\nThe answer could not be saved: {exc}".strip()
            saved.tool_calls = tool_calls or saved.tool_calls
        self.path[-1] = saved
        siblings = await self.db.call(lambda s: s.siblings(saved.id))
        widget.update_from(ShownMessage.from_store(saved, siblings))
        widget.reasoning.finish(thought_label(stats, live=False))
        self._show_tool_calls()
        if recorder.rows:
            widget.set_tokens(series.x_start, series.earlier + recorder.pieces)
        if summary is not None:
            self.telemetry.show_summary(summary)
            self.status.set_rate(summary.tokens_per_second)
        self.last_result = result
        used = await self._kv_used()
        self._show_gauge(used)
        # Before the answer ends: whoever waits for the end sees everything of it in place.
        self.telemetry.show_kv_states(kv_states_text(await self.bridge.kv_states(),
                                                     str(self.conversation_id)))
        self._end_answer()
        self.status.set_state("idle")
        self.turns_done += 1
        self.on_conversations_changed()
        self.on_turn_finished()
        if status == "complete" and len(self.path) == 2 and self._wants_title():
            self._start_title(saved.conversation_id, self.path[0].content, saved.content)

    # ---- tool calls ---------------------------------------------------------------------------

    def _tool_calling(self) -> ToolCalling | None:
        """The conversation's tools for this turn (None: none); a stored declaration that
        cannot be used says so, and the turn runs without tools."""
        try:
            return calling_of(self.config)
        except ToolsFileError as exc:
            self.show_error(f"{exc}. This answer runs without tools: load the tools file again "
                            "in the conversation settings.")
            return None

    def _show_tool_calls(self) -> None:
        """A block for each call of each answer on screen: answered ones with their result,
        and only the calls of the answer the conversation waits on open for a result."""
        try:
            commands = (tools_of(self.config) or _NO_TOOLS).commands
        except ToolsFileError:
            commands = {}
        waiting = pending_answer(self.path)
        results = {m.tool_call_id: m.content for m in self.path if m.role == "tool"}
        for message in self.path:
            widget = self.chat.widget_for(message.id)
            if message.role != "assistant" or not message.tool_calls or widget is None:
                continue
            if not widget.tool_blocks:
                for call in stored_calls(message.tool_calls):
                    block = QtToolCallBlock(call, commands.get(call.name))
                    block.result_ready.connect(
                        lambda call_id, text, m=message.id, name=call.name:
                        self._spawn_tool_result(m, call_id, name, text))
                    widget.add_tool_block(block)
            for block in widget.tool_blocks:
                if block.call.id in results and not block.done:
                    block.show_answered(results[block.call.id])
                block.set_waiting(waiting is not None and waiting.id == message.id)

    def _spawn_tool_result(self, answer_id: int, call_id: str, name: str, text: str) -> None:
        task = asyncio.get_running_loop().create_task(
            self.answer_tool_call(answer_id, call_id, name, text))
        self._tool_tasks.add(task)
        task.add_done_callback(self._tool_tasks.discard)

    async def answer_tool_call(self, answer_id: int, call_id: str, name: str, text: str
                               ) -> None:
        """A call's result (pasted, or its confirmed command's output) becomes a 'tool'
        message; once every call of the answer has one, the model goes on from them."""
        try:
            async with self._tool_lock:
                waiting = pending_answer(self.path)
                if waiting is None or waiting.id != answer_id or self.generating:
                    self.show_error("This tool call's result was not sent: the conversation "
                                    "has moved on (or an answer is in progress).")
                    return
                cid, parent = waiting.conversation_id, self._tail_id()
                try:
                    result = await self.db.call(lambda s: s.add_message(
                        cid, parent, "tool", text, tool_call_id=call_id, tool_name=name))
                except Exception as exc:
                    log.exception("storing the tool's result failed")
                    self.show_error(f"The tool's result was not saved ({exc}); nothing was "
                                    "sent to the model.")
                    return
                self.path.append(result)
                if pending_answer(self.path) is None:
                    await self._go_on_from_tools()
        finally:
            self.tool_turns_done += 1

    async def _go_on_from_tools(self) -> None:
        """The answer that goes on from the tool results that end the branch on screen."""
        turn = tool_turn(self.path, self.images)
        if turn is None:
            return
        if self.model is None:
            self.show_error("The tool's results are saved; open a model, then use Regenerate "
                            "on the answer to go on from them.")
            return
        history, message = turn
        tail = self.path[-1]
        self._begin_answer()
        try:
            answer = await self.db.call(lambda s: s.add_message(
                tail.conversation_id, tail.id, "assistant", status="streaming"))
        except Exception as exc:
            log.exception("storing the answer's placeholder failed")
            self._end_answer()
            self.show_error(f"The tool's results are saved, but the answer could not start "
                            f"({exc}).")
            return
        self.path.append(answer)
        await self._generate(message["content"], answer, history, message=message)

    # ---- automatic titles ---------------------------------------------------------------------

    def _wants_title(self) -> bool:
        return (self.model is not None and self.model.chat_mode and self.config.auto_title
                and (self._title_task is None or self._title_task.done()))

    def _start_title(self, conversation_id: int, question: str, answer: str) -> None:
        self._title_stop = threading.Event()
        self._title_task = asyncio.get_running_loop().create_task(
            self._make_title(conversation_id, question, answer, self._title_stop))

    async def _make_title(self, conversation_id: int, question: str, answer: str,
                          stop: threading.Event) -> None:
        """One short turn outside every conversation; the title replaces the placeholder unless
        the user renamed the conversation meanwhile."""
        result: GenerateResult | None = None
        try:
            request = GenerateRequest(text=auto_title.title_prompt(question, answer),
                                      settings=auto_title.title_settings())
            async for event in self.bridge.generate(request, stop):
                if isinstance(event, GenerateResult):
                    result = event
            if result is None or result.stopped or not result.ok:
                self.titles_cancelled += result is not None and result.stopped
                return
            title = auto_title.title_for(result.text, question)
            placeholder = auto_title.placeholder_title(question)

            def rename(store: Any) -> bool:
                if not title or store.get_conversation(conversation_id).title != placeholder:
                    return False
                store.rename_conversation(conversation_id, title)
                return True

            if await self.db.call(rename):
                self.on_conversations_changed()
        except Exception:  # a title is a nicety: the placeholder stays, the chat goes on
            log.warning("the automatic title failed", exc_info=True)
        finally:
            self.titles_done += 1

    def _stop_title(self) -> None:
        if self._title_task is not None and not self._title_task.done():
            self._title_stop.set()  # before the engine starts it...
            self.bridge.cancel()  # ...or while it runs

    async def cancel_title(self) -> None:
        """Stop the title turn, if one runs, and wait the decode step it takes to end."""
        task = self._title_task
        if task is None or task.done():
            return
        self._stop_title()
        await asyncio.gather(task, return_exceptions=True)

    async def _kv_used(self) -> int:
        try:
            return await self.bridge.kv_tokens()
        except Exception:
            return -1

    # ---- context gauge ------------------------------------------------------------------------

    def _used_from_path(self) -> int:
        """Context used as of the last complete answer on screen (-1: unknown)."""
        for m in reversed(self.path):
            if m.role == "assistant" and m.status == "complete" and m.stats.n_past is not None:
                return m.stats.n_past
        return 0 if not self.path else -1

    def _show_gauge(self, used: int) -> None:
        n_ctx = self.model.n_ctx if self.model else 0
        self.composer.gauge.set_usage(used, n_ctx)
        self.status.set_context(used, n_ctx)
        if self.composer.gauge.warning:
            self.composer.hint.setText("Context nearly full: start a new chat, or reopen the "
                                       "model with a larger context.")
        elif self.model is not None:
            self.composer.hint.setText("")


_NO_TOOLS = ToolsFile(())


def _on_screen(shown: list[ShownMessage]) -> list[ShownMessage]:
    """The messages that get a widget: a tool's result is shown in its call's block."""
    return [m for m in shown if m.role != "tool"]


def _store_user_message(store: Any, conversation_id: int | None, parent: int | None,
                        text: str, images: list[StoredImage] | None = None) -> Message:
    """The user's message (with its images), in a new conversation when there is none yet."""
    if conversation_id is None:
        conversation_id = store.create_conversation(auto_title.placeholder_title(text)).id
    return store.add_message(conversation_id, parent, "user", text, images=images or ())


def _inputs(images: list[StoredImage]) -> tuple[ImageInput, ...]:
    """Stored images as the engine takes them (the hash is the store's, not recomputed)."""
    return tuple(ImageInput(i.data, i.name, i.sha256) for i in images)


def _load_recovered(store: Any, conversation_id: int
                    ) -> tuple[list[ShownMessage], list[Message]]:
    """_load_path, after marking "interrupted" the answers on it whose writer is gone since
    start-up (a second window that crashed): those still "streaming" are being written."""
    shown, path = _load_path(store, conversation_id)
    if any(m.status == "streaming" for m in path) and store.recover_interrupted():
        shown, path = _load_path(store, conversation_id)
    return shown, path


def _load_path(store: Any, conversation_id: int) -> tuple[list[ShownMessage], list[Message]]:
    path = store.active_path(conversation_id)
    images = store.message_images(m.id for m in path)
    return [ShownMessage.from_store(m, store.siblings(m.id), images.get(m.id))
            for m in path], path


@dataclass(slots=True)
class _Series:
    """Where an answer's tokens sit on the plots: its first x, and the pieces of its earlier
    runs when this run continues it (Continue), so the message keeps one series of tokens."""

    x_start: int
    earlier: list[str]

    @classmethod
    def start(cls, telemetry: QtTelemetryPanel, widget: Any, continuing: bool) -> _Series:
        # Its earlier tokens must end where the plots do (the answer is the conversation's
        # last); otherwise (plots cleared meanwhile) the run starts a turn of its own.
        if continuing and widget.token_x0 >= 0 and (
                widget.token_x0 + len(widget.token_pieces) == telemetry.next_x):
            telemetry.begin_run()
            return cls(widget.token_x0, widget.token_pieces)
        return cls(telemetry.begin_turn(), [])
