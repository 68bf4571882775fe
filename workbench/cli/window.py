"""Window commands: `window` (the default), `screenshot`, and `bench ui`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli.bench_checks import checked
from workbench.config import Config
from workbench.config_cli import add_arguments, config_from_args, typed_settings
from workbench.embedded import SUGGESTED_QUESTION
from workbench.engine.opening import Opening, decide
from workbench.file_kind import regular_file

IMAGE_CHATS = (("What is in this picture? Answer in one sentence.",),)
SCREENSHOT_CHATS = (
    (SUGGESTED_QUESTION,),
    ("In two sentences, what is a mixture-of-experts language model?",
     "Show a short Python list comprehension that squares the numbers 1 to 5."),
)


def add_window_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("window", help="open the window (what `python -m workbench` does)")
    add_arguments(p)
    p.add_argument("--send", action="append", default=[], metavar="TEXT",
                   help="send this message once the model is loaded (repeatable)")
    p.add_argument("--quit", action="store_true", help="close the window after the sends")
    p.set_defaults(run=run_window_cmd)


def add_screenshot_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("screenshot", help="render the window after a real short chat to a PNG")
    add_arguments(p)
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.png",
                   help="the picture to write (its directory must exist)")
    p.add_argument("--width", type=int, default=1440)
    p.add_argument("--height", type=int, default=900)
    p.add_argument("--keep-data", action="store_true",
                   help="use the real data directory instead of a temporary one")
    p.add_argument("--front", choices=("telemetry", "experts"), default="telemetry",
                   help="the dock in front on the right: live telemetry or the expert map")
    p.add_argument("--theme", choices=("light", "dark"), default="light",
                   help="the window's theme in the picture")
    p.add_argument("--image", action="append", default=[], type=Path, metavar="FILE",
                   help="attach this image to the last chat's first message (repeatable; "
                        "needs --mmproj)")
    p.set_defaults(run=run_screenshot_cmd)


def add_bench_ui_parser(bench: argparse.ArgumentParser) -> None:
    """`bench ui`, added to the existing `bench` command's sub-commands."""
    kinds = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction))
    p = kinds.add_parser("ui", help="UI event-loop lag during generation, and tok/s with the "
                                    "window live vs headless")
    add_arguments(p)
    p.add_argument("--repeats", type=int, default=8, help="runs of each kind, interleaved")
    p.add_argument("--tokens", type=int, default=128, help="tokens per run")
    p.set_defaults(run=checked(run_bench_ui_cmd))


def window_opening(args: argparse.Namespace, data: Path) -> Opening:
    """What the window opens with (engine/opening.py): the model typed, else the last one (the
    bundled model when its file has gone: the window says so), with its remembered settings,
    the window's remembered ones, then the flags typed now."""
    from workbench.engine.model_settings import load_remembered
    from workbench.ui.window_memory import load_memory, startup_config

    start = startup_config(load_memory(data))
    return decide(start.config.model, typed=typed_settings(args),
                  window=start.config if start.from_memory else None,
                  remembered=load_remembered(data))


def run_window_cmd(args: argparse.Namespace) -> int:
    from workbench import paths
    from workbench.ui.qt_app import run_window

    opening = window_opening(args, paths.data_dir())
    return run_window(opening.config, sends=args.send, quit_after=args.quit,
                      explicit=opening.explicit)


def run_screenshot_cmd(args: argparse.Namespace) -> int:
    import tempfile

    from workbench.atomic_write import OutputFileError, check_output_path
    from workbench.ui.qt_app import run_window
    from workbench.ui.qt_screenshot import take_screenshot

    config = decide(getattr(args, "model", ""),
                    typed={"n_predict": 80, **typed_settings(args)}).config
    out: Path = args.output
    try:
        check_output_path(out)  # before the window opens and chats for a minute
        for image in args.image:  # a FIFO would block the window's read forever
            regular_file(image, "an image file")
    except OSError as exc:  # OutputFileError, NotRegularFileError
        print(f"error: {exc}", file=sys.stderr)
        return 1

    async def script(window) -> int:
        window.set_theme(args.theme)
        try:
            await take_screenshot(window, out,
                                  SCREENSHOT_CHATS + (IMAGE_CHATS if args.image else ()),
                                  (args.width, args.height), args.front, images=args.image)
        except OutputFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {out} ({out.stat().st_size // 1024} KiB)")
        return 0

    if args.keep_data:
        return run_window(config, script=script)
    with tempfile.TemporaryDirectory(prefix="workbench-shot-") as tmp:
        # A clean conversation list for the picture.
        return run_window(config, script=script, data=Path(tmp))


def run_bench_ui_cmd(args: argparse.Namespace) -> int:
    import tempfile

    from workbench.cli.bench import on_bench_model
    from workbench.ui.bench_ui import bench_script
    from workbench.ui.qt_app import run_window

    # No automatic titles: a title turn after the first answer would run beside the runs
    # being measured.
    config = on_bench_model(config_from_args(args, Config().replace(
        n_predict=args.tokens, n_ctx=max(1024, args.tokens * 4), auto_title=False)))
    with tempfile.TemporaryDirectory(prefix="workbench-bench-") as tmp:
        return run_window(config, script=bench_script(config, args.repeats, print),
                          data=Path(tmp))
