"""Process and system probes read around and after each decode.

Cheap by construction because they run once per token: `/proc` files are opened once and re-read
with `pread` at offset 0 (the kernel regenerates them), and parsing looks up only the keys we use.
Where a platform cannot report a figure it stays UNMEASURED (-1), never 0.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from workbench.engine.metric_columns import MEMORY_MAX_AGE_MS, PROBE_FIELDS, check_record
from workbench.engine.metrics import UNMEASURED

PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / (1 << 20) if hasattr(os, "sysconf") else UNMEASURED

_STATUS_KEYS = (b"VmRSS:", b"RssAnon:", b"RssFile:", b"VmSwap:")
_MEMINFO_KEYS = (b"MemAvailable:", b"MemFree:", b"SwapFree:")


@dataclass(slots=True)
class Counters:
    """Process counters sampled just outside the decode bracket."""

    majflt: int
    cpu_ns: int


_getrusage = resource.getrusage
_RUSAGE_SELF = resource.RUSAGE_SELF


def counters() -> Counters:
    """Faults and CPU time in one system call (the loop reads them twice per token, issue 38):
    user + system time of every thread is the clock CLOCK_PROCESS_CPUTIME_ID reads (the kernel
    splits that same sum into the two), here to the microsecond."""
    usage = _getrusage(_RUSAGE_SELF)
    return Counters(majflt=usage.ru_majflt,
                    cpu_ns=round((usage.ru_utime + usage.ru_stime) * 1e6) * 1000)


@dataclass(slots=True)
class MemorySample:
    """MiB figures from /proc/self/status and /proc/meminfo (UNMEASURED where unavailable)."""

    rss_mib: float = UNMEASURED
    rss_anon_mib: float = UNMEASURED
    rss_file_mib: float = UNMEASURED
    swap_mib: float = UNMEASURED
    mem_available_mib: float = UNMEASURED
    mem_free_mib: float = UNMEASURED
    swap_free_mib: float = UNMEASURED


# The fields are metric_columns' probe columns, which token_row copies into TokenMetrics.
check_record(MemorySample, PROBE_FIELDS)


# The decode loop re-reads memory at most this often (issue 38): two /proc reads, run cold right
# after a decode (its weights have just gone through the caches), cost 150-200 us, most of it the
# kernel writing the files, and memory moves over tens of milliseconds, not per token. By a
# section profile at 33 tok/s, at 50 ms they were still about a quarter of what the loop added to
# a bare decode loop; at 200 ms (one live-plot frame while the engine is busy), a sixth.
MEMORY_PERIOD_NS = MEMORY_MAX_AGE_MS * 1_000_000


class MemoryProbe:
    """Reads the memory figures of one process and of the machine; reuse one per session."""

    def __init__(self, period_ns: int = MEMORY_PERIOD_NS) -> None:
        self._status_fd = _open_or_none("/proc/self/status")
        self._meminfo_fd = _open_or_none("/proc/meminfo")
        self.period_ns = period_ns
        self._last: MemorySample | None = None
        self._last_ns = 0
        self.reads = 0  # samples actually read from /proc (tests count them)

    def sample_due(self, now_ns: int, fresh: bool = False) -> MemorySample:
        """The latest sample, read again when it is `period_ns` old or `fresh` asks for it: a
        token's memory figures were read after its decode, or at most `period_ns` before its
        decode ended. The loop asks for a fresh one after a decode that faulted: memory is
        moving then, and the stall explanation of that very token reads these figures (weights
        paged out show as the resident set falling at the token that faulted them back)."""
        if fresh or self._last is None or now_ns - self._last_ns >= self.period_ns:
            self._last, self._last_ns = self.sample(), now_ns
        return self._last

    def sample(self) -> MemorySample:
        self.reads += 1
        status = _read_kib(self._status_fd, _STATUS_KEYS)
        meminfo = _read_kib(self._meminfo_fd, _MEMINFO_KEYS)
        return MemorySample(
            rss_mib=status[0],
            rss_anon_mib=status[1],
            rss_file_mib=status[2],
            swap_mib=status[3],
            mem_available_mib=meminfo[0],
            mem_free_mib=meminfo[1],
            swap_free_mib=meminfo[2],
        )

    def close(self) -> None:
        for fd in (self._status_fd, self._meminfo_fd):
            if fd is not None:
                os.close(fd)
        self._status_fd = self._meminfo_fd = None


def _open_or_none(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def _read_kib(fd: int | None, keys: tuple[bytes, ...]) -> list[float]:
    """Values of `keys` (given in kB by the kernel) in MiB; UNMEASURED for a missing key."""
    out = [UNMEASURED] * len(keys)
    if fd is None:
        return out
    try:
        data = os.pread(fd, 8192, 0)
    except OSError:
        return out
    for i, key in enumerate(keys):
        at = data.find(key)
        if at < 0:
            continue
        end = data.find(b"\n", at)
        fields = data[at + len(key) : end].split()
        if fields:
            out[i] = int(fields[0]) / 1024.0
    return out
