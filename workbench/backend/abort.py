"""The abort flag: an atomic int in the native library that llama.cpp polls after every node.

A llama.cpp concern, not an expert-streaming one: Stop must work in the middle of a long prefill
of any model, and polling it costs no Python per node because the callback is native.
"""

from __future__ import annotations

from workbench.backend.native import NativeLibraryError, check, load


class AbortFlag:
    """An atomic flag that llama.cpp polls after every graph node (no Python per node)."""

    def __init__(self) -> None:
        self._lib = load()
        self._ptr = self._lib.wb_abort_flag_new()
        if not self._ptr:
            raise NativeLibraryError("could not allocate an abort flag")

    @property
    def pointer(self) -> int:
        return int(self._ptr)

    @property
    def handle(self) -> int | None:
        return self._ptr

    def set(self) -> None:
        """Request an abort; safe from any thread."""
        if self._ptr:
            self._lib.wb_abort_flag_set(self._ptr, 1)

    def clear(self) -> None:
        if self._ptr:
            self._lib.wb_abort_flag_set(self._ptr, 0)

    @property
    def is_set(self) -> bool:
        return bool(self._ptr) and bool(self._lib.wb_abort_flag_get(self._ptr))

    @property
    def polls(self) -> int:
        """How many times llama.cpp has asked this flag."""
        return int(self._lib.wb_abort_flag_polls(self._ptr)) if self._ptr else 0

    @property
    def fatal(self) -> bool:
        return bool(self._ptr) and bool(self._lib.wb_abort_flag_get_fatal(self._ptr))

    def clear_fatal(self) -> None:
        if self._ptr:
            self._lib.wb_abort_flag_set_fatal(self._ptr, 0)

    def install(self, ctx: int) -> None:
        ret = self._lib.wb_abort_install(ctx, self._ptr)
        check(ret, self._lib, "installing the abort callback")

    def close(self) -> None:
        """Free the flag; only after the context that polls it is freed."""
        if self._ptr:
            self._lib.wb_abort_flag_free(self._ptr)
            self._ptr = None
