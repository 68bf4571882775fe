"""How llama.cpp's compute threads wait: OpenMP's wait policy, chosen for the machine (issue 38).

llama-cpp-python's CPU backend runs every graph on an OpenMP team (libgomp, linked into
libggml-cpu). Between the parts of a graph, and while the eval callback reads experts, the team's
threads wait: spinning (`active`), sleeping (`passive`), or libgomp's default (spin a while, then
sleep; throttled by itself when there are more threads than cores). libgomp reads
`OMP_WAIT_POLICY` once, when the library is loaded, so the choice must be in the environment
before `llama_cpp` is imported: `apply()` runs at the top of each entry point (`cli/main.py`).

What was measured (issue 38, streamed decode of a 2 GiB synthetic MoE):
- 16 cores, 16 threads, cache 200 MiB: compute 130-233 ms per token with the default against
  9-14 ms with `active` (3.2-4.7 vs 11.8 tok/s; `passive` 7.6-8.0); cache 800 MiB: active 47 vs
  33-44 tok/s. Waking a sleeping team after every expert read is what a streamed token costs.
- 2 cores, 2 threads + 4 I/O lanes, cache 800 MiB: active 23.7 vs default 40.8 tok/s. A spinning
  team takes the cores the lanes and the reading thread need.

The rule, consistent with both: with fewer than `MIN_CORES_TO_SPIN` cores, or more compute
threads than cores, the runtime's default; otherwise `active`. The threshold between 2 and 16 is
not measured: `bench threads` on a 4- or 8-core machine is how to move it. An
`OMP_WAIT_POLICY` already in the environment always wins.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass

ENV = "OMP_WAIT_POLICY"
MIN_CORES_TO_SPIN = 4  # below: spinning starves the I/O lanes (measured on 2 cores)
DEFAULT = ""  # the runtime's own policy: the variable is left unset


@dataclass(frozen=True, slots=True)
class WaitChoice:
    policy: str  # "active", "passive", or DEFAULT (libgomp's own)
    reason: str  # one line, for the status bar, the chat summary and advise
    source: str  # "rule", "environment" (set by the user), or "too late" (runtime loaded first)

    @property
    def label(self) -> str:
        return self.policy or "default"

    def describe(self) -> str:
        return f"wait policy {self.label} ({self.source}: {self.reason})"


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def choose(*, cores: int, threads: int, lanes: int, streaming: bool) -> WaitChoice:
    """The rule (module docstring), with its reason in words."""
    waiters = f"{threads} compute thread{'s' if threads != 1 else ''}"
    if streaming:
        waiters += f" + {lanes} I/O lane{'s' if lanes != 1 else ''}"
    if threads > cores:
        return WaitChoice(DEFAULT, f"{waiters} on {cores} cores: more threads than cores, so "
                          "the runtime throttles its own spinning", "rule")
    if cores < MIN_CORES_TO_SPIN:
        return WaitChoice(DEFAULT, f"{waiters} on {cores} cores: a spinning team would take the "
                          "cores the engine's other threads need", "rule")
    return WaitChoice("active", f"{waiters} on {cores} cores: spinning threads answer each "
                      "graph split at once instead of being woken", "rule")


_applied: WaitChoice | None = None


def runtime_loaded() -> bool:
    """Whether llama.cpp (and with it libgomp) is already loaded into this process."""
    return "llama_cpp" in sys.modules


def apply(choice: WaitChoice, environ: MutableMapping[str, str] | None = None,
          *, loaded: bool | None = None) -> WaitChoice:
    """Put `choice` into the environment before the runtime loads; returns what is in force.

    The user's own `OMP_WAIT_POLICY` is kept. Once the runtime is loaded nothing changes: the
    result says so, with the value libgomp read."""
    global _applied
    env = os.environ if environ is None else environ
    loaded = runtime_loaded() if loaded is None else loaded
    if _applied is not None and env is os.environ:
        return _applied  # the first entry point decided; the variable is ours or the user's
    user = env.get(ENV, "")
    if user:
        result = WaitChoice(user.lower(), f"{ENV}={user} in the environment", "environment")
    elif loaded:
        result = WaitChoice(DEFAULT, "llama.cpp was loaded before a policy could be set",
                            "too late")
    else:
        if choice.policy:
            env[ENV] = choice.policy
        result = choice
    if env is os.environ:
        _applied = result
    return result


def in_force() -> WaitChoice | None:
    """What `apply` decided in this process (None: no entry point applied one)."""
    return _applied
