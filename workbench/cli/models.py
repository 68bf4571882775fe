"""`inspect` and `make-model`: model files, headless."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_inspect_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("inspect", help="describe a GGUF model or image projector file "
                                       "(without loading it)")
    p.add_argument("model", nargs="?", default="",
                   help="model file (first shard of a split model) or an mmproj projector; "
                        "default: the embedded model")
    p.add_argument("--no-template", action="store_true",
                   help="leave out the chat template's source")
    p.add_argument("--mmproj", default="", metavar="PATH",
                   help="also describe this image projector (default: an mmproj*.gguf beside "
                        "the model, if there is one)")
    p.set_defaults(run=run_inspect)


def run_inspect(args: argparse.Namespace) -> int:
    from workbench.embedded import EmbeddedModelError
    from workbench.file_kind import not_regular
    from workbench.moe.layout import ModelFileError, format_facts, read_model_facts
    from workbench.moe.projector import find_beside, format_projector, read_projector_facts

    try:
        path = Path(args.model) if args.model else _embedded()
        if kind := not_regular(path):  # checked before any open: a FIFO would block forever
            raise ModelFileError(f"{path} is {kind}, not a model file; pass the path of a "
                                 ".gguf file.")
        if _is_projector(path):
            print(format_projector(read_projector_facts(path)))
            return 0
        facts = read_model_facts(path)
    except (ModelFileError, EmbeddedModelError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_facts(facts))
    if facts.has_chat_template and not args.no_template:
        # The template decides how a conversation reaches the model: worth seeing in full.
        print(f"\nchat template ({len(facts.chat_template)} characters):")
        print(facts.chat_template.rstrip())
    projector = Path(args.mmproj) if args.mmproj else find_beside(path)
    if projector is not None:
        try:
            proj = read_projector_facts(projector)
        except ModelFileError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(format_projector(proj))
        if 0 < proj.projection_dim != facts.n_embd > 0:
            print(f"warning: the projector makes embeddings {proj.projection_dim} wide; this "
                  f"model reads {facts.n_embd}: they do not fit together", file=sys.stderr)
    return 0


def _is_projector(path: Path) -> bool:
    """A GGUF whose architecture is "clip" (an mmproj file), by its header alone."""
    from gguf import GGUFReader

    try:
        field = GGUFReader(path, "r").fields.get("general.architecture")
    except (OSError, ValueError, IndexError):
        return False
    return field is not None and bytes(field.parts[field.data[0]]) == b"clip"


def add_make_model_parser(sub: argparse._SubParsersAction) -> None:
    from workbench.moe.synth import ARCHES, SIZES, WEIGHT_TYPES

    p = sub.add_parser(
        "make-model",
        help="write a synthetic MoE GGUF (random weights: it exercises streaming; its text is "
        "noise)",
    )
    p.add_argument("--arch", choices=ARCHES, default="qwen3moe")
    p.add_argument("--size", choices=SIZES, default="tiny")
    p.add_argument("-o", "--output", type=Path,
                   help="GGUF file to write (its directory must exist); required unless "
                        "--mmproj-for is given")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--split-max-tensors", type=int, default=0, metavar="N",
                   help="write a split model with at most N tensors per shard")
    p.add_argument("--layers", type=int, help="number of layers (bench size)")
    p.add_argument("--experts", type=int, help="experts per layer")
    p.add_argument("--top-k", type=int, help="experts used per token")
    p.add_argument("--expert-width", type=int, help="hidden width of one expert")
    p.add_argument("--quant", choices=WEIGHT_TYPES, help="expert weight type")
    p.add_argument("--gib", type=float, help="bench size: aim the expert weights at this many GiB")
    p.add_argument("--mmproj", type=Path, metavar="PROJ.gguf",
                   help="also write a matching synthetic image projector (random weights, "
                        "projector type mlp, 32 px images, 16 tokens per image)")
    p.add_argument("--mmproj-for", type=Path, metavar="MODEL.gguf",
                   help="write only the --mmproj projector, as wide as this existing model's "
                        "embeddings (e.g. the embedded model, for a screenshot)")
    p.set_defaults(run=run_make_model)


def run_make_model(args: argparse.Namespace) -> int:
    from workbench.moe.synth import write_synthetic_moe

    if args.mmproj_for is not None:
        return _projector_for(args)
    if args.output is None:
        print("error: -o/--output is required (the model file to write)", file=sys.stderr)
        return 2

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
    if args.mmproj is not None:
        from workbench.moe.synth import spec_for
        from workbench.moe.synth_mmproj import ProjectorSpec, write_projector

        n_embd = spec_for(args.arch, args.size, **overrides).n_embd
        try:
            paths.append(write_projector(args.mmproj, ProjectorSpec(n_embd_out=n_embd),
                                         seed=args.seed))
        except (ValueError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    total = sum(p.stat().st_size for p in paths)
    for path in paths:
        print(path)
    print(f"wrote {len(paths)} file(s), {total / (1 << 20):.1f} MiB "
          "(synthetic weights: the model's text is noise)", file=sys.stderr)
    return 0


def _projector_for(args: argparse.Namespace) -> int:
    from workbench.moe.layout import ModelFileError, read_model_facts
    from workbench.moe.synth_mmproj import ProjectorSpec, write_projector

    if args.mmproj is None:
        print("error: --mmproj-for needs --mmproj PROJ.gguf (the file to write)", file=sys.stderr)
        return 2
    try:
        n_embd = read_model_facts(args.mmproj_for).n_embd
        path = write_projector(args.mmproj, ProjectorSpec(n_embd_out=n_embd), seed=args.seed)
    except (ModelFileError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    print(f"wrote a synthetic image projector {n_embd} wide for {args.mmproj_for.name} (random "
          "weights: what the model 'sees' is noise)", file=sys.stderr)
    return 0


def _embedded() -> Path:
    from workbench.embedded import default_model_path

    return default_model_path()
