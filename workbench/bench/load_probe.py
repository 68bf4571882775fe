"""One model load measured in a process of its own (`python -m workbench.bench.load_probe`).

A fresh process per load, so that its peak RSS (VmHWM) and bytes read from storage
(/proc/self/io read_bytes) belong to that load alone. Arms:

- `lean` / `populate`: a streamed session opened with the lean load on / off; the load time is
  `Session.load_seconds` (until the session can answer: model, context, capture, dense weights).
- `dense`: the floor, what the dense part alone costs: every non-expert tensor of the GGUF read
  into private memory, after the same imports and backend set-up.

Prints one JSON line. The caller drops the file from the page cache before starting it.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ARMS = ("lean", "populate", "dense")


@dataclass(frozen=True, slots=True)
class LoadProbe:
    arm: str
    load_s: float
    peak_rss_bytes: int  # VmHWM after the load
    base_rss_bytes: int  # VmRSS before the load (interpreter, libraries)
    read_bytes: int  # storage reads during the load (-1 where /proc/self/io is unavailable)
    lean_effective: bool  # the lean load really skipped the whole-file read


def status_bytes(field: str) -> int:
    """A `kB` field of /proc/self/status (VmHWM, VmRSS) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> None:
    """VmHWM restarts from the current RSS (Linux clear_refs 5), so the imports' transient peak
    does not count as the load's; where refused, VmHWM stays the process's peak."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def io_read_bytes() -> int:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def read_dense(model: Path) -> int:
    """Reads every non-expert tensor into private memory; returns the bytes held."""
    from workbench.moe.layout import expert_tensors, read_model_facts, read_tensors

    experts = {t.name for t in expert_tensors(model)}
    shards = read_model_facts(model).shards
    held: list[bytearray] = []
    fds = [os.open(s, os.O_RDONLY) for s in shards]
    try:
        for t in read_tensors(model):
            if t.name in experts:
                continue
            buf = bytearray(t.n_bytes)
            got = os.preadv(fds[t.shard], [buf], t.offset)
            if got != t.n_bytes:
                raise RuntimeError(f"short read of {t.name}: {got} of {t.n_bytes} bytes")
            held.append(buf)
    finally:
        for fd in fds:
            os.close(fd)
    return sum(len(b) for b in held)


def probe(model: Path, arm: str, threads: int) -> LoadProbe:
    from workbench.backend import llama
    from workbench.config import Config
    from workbench.engine.session import Session

    llama.ensure_backend()  # the same libraries mapped in every arm
    reset_peak_rss()
    base_rss = status_bytes("VmRSS")
    read0 = io_read_bytes()
    lean = False
    if arm == "dense":
        started = time.perf_counter()
        read_dense(model)
        load_s = time.perf_counter() - started
    else:
        config = Config(model=str(model), chat_template=False, n_ctx=512, n_predict=16,
                        n_threads=threads,
                        moe_stream=True, lean_load=arm == "lean")
        with Session.open(config) as session:
            load_s = session.load_seconds
            assert session.streaming is not None
            lean = session.streaming.info.lean_load
    read1 = io_read_bytes()
    return LoadProbe(arm=arm, load_s=load_s, peak_rss_bytes=status_bytes("VmHWM"),
                     base_rss_bytes=base_rss,
                     read_bytes=read1 - read0 if read0 >= 0 and read1 >= 0 else -1,
                     lean_effective=lean)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m workbench.bench.load_probe")
    p.add_argument("model", type=Path)
    p.add_argument("arm", choices=ARMS)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    print(json.dumps(asdict(probe(args.model, args.arm, args.threads))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
