"""`inspect` and `make-model`: model files, headless."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_inspect_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="describe a GGUF model file (without loading it)")
    p.add_argument("model", nargs="?", default="",
                   help="model file (first shard of a split model); default: the embedded model")
    p.add_argument("--no-template", action="store_true",
                   help="leave out the chat template's source")
    p.set_defaults(run=run_inspect)


def run_inspect(args: argparse.Namespace) -> int:
    from workbench.embedded import EmbeddedModelError
    from workbench.moe.layout import ModelFileError, format_facts, read_model_facts

    try:
        path = Path(args.model) if args.model else _embedded()
        facts = read_model_facts(path)
    except (ModelFileError, EmbeddedModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_facts(facts))
    if facts.has_chat_template and not args.no_template:
        # The template decides how a conversation reaches the model: worth seeing in full.
        print(f"\nchat template ({len(facts.chat_template)} characters):")
        print(facts.chat_template.rstrip())
    return 0


def add_make_model_parser(sub: argparse._SubParsersAction) -> None:
    from workbench.moe.synth import ARCHES, SIZES, WEIGHT_TYPES

    p = sub.add_parser(
        "make-model",
        help="write a synthetic MoE GGUF (random weights: it exercises streaming; its text is "
        "noise)",
    )
    p.add_argument("--arch", choices=ARCHES, default="qwen3moe")
    p.add_argument("--size", choices=SIZES, default="tiny")
    p.add_argument("-o", "--output", required=True, type=Path,
                   help="GGUF file to write (its directory must exist)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split-max-tensors", type=int, default=0, metavar="N",
                   help="write a split model with at most N tensors per shard")
    p.add_argument("--layers", type=int, help="number of layers (bench size)")
    p.add_argument("--experts", type=int, help="experts per layer")
    p.add_argument("--top-k", type=int, help="experts used per token")
    p.add_argument("--expert-width", type=int, help="hidden width of one expert")
    p.add_argument("--quant", choices=WEIGHT_TYPES, help="expert weight type")
    p.add_argument("--gib", type=float, help="bench size: aim the expert weights at this many GiB")
    p.set_defaults(run=run_make_model)


def run_make_model(args: argparse.Namespace) -> int:
    from workbench.moe.synth import write_synthetic_moe

    overrides: dict[str, object] = {}
    for flag, field in (("layers", "n_layer"), ("experts", "n_expert"),
                        ("top_k", "n_expert_used"), ("expert_width", "n_ff_exp"),
                        ("quant", "expert_type"), ("gib", "target_gib")):
        value = getattr(args, flag)
        if value is not None:
            overrides[field] = value
    if args.split_max_tensors:
        overrides["split_max_tensors"] = args.split_max_tensors
    try:
        paths = write_synthetic_moe(args.output, arch=args.arch, size=args.size, seed=args.seed,
                                    **overrides)
    except (ValueError, OSError) as exc:  # OutputFileError: full disk, missing directory, ...
        print(f"error: {exc}", file=sys.stderr)
        return 1
    total = sum(p.stat().st_size for p in paths)
    for path in paths:
        print(path)
    print(f"wrote {len(paths)} file(s), {total / (1 << 20):.1f} MiB "
          "(synthetic weights: the model's text is noise)", file=sys.stderr)
    return 0


def _embedded() -> Path:
    from workbench.embedded import default_model_path

    return default_model_path()
