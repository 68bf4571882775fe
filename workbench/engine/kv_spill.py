"""KV states on disk: evicted ones, and every one at close, so a restart restores instead of
re-reading the conversation.

One file per conversation and identity: `<conversation>.<identity>.kvstate` under the spill
directory, where the identity hashes what a state is valid for: the model file's identity, the
load-time settings' signature, and the engine and llama.cpp versions. A file is written under a
temporary name and renamed (atomic_write.py), so a crash never leaves half of one. Its layout:

    b"WBKV1\\n"                      magic and format version
    one line of JSON                 identity, key, n_tokens, data_bytes, sha256 of the rest
    n_tokens × int32 (little end.)   the token mirror
    data_bytes                       the llama.cpp sequence state

A file that is missing, truncated, corrupt, of another identity or unreadable is refused with
one log line and the turn prefills as if there were none: the user loses time, never data. A
full disk skips the spill (logged). The directory is kept under a byte budget, least recently
used first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workbench.atomic_write import write_bytes_atomic
from workbench.file_kind import not_regular

log = logging.getLogger("workbench.kv_spill")

MAGIC = b"WBKV1\n"
SUFFIX = ".kvstate"


@dataclass(frozen=True, slots=True)
class SpilledState:
    key: str
    tokens: list[int]
    data: bytes


@dataclass(frozen=True, slots=True)
class SpillFile:
    key: str
    n_tokens: int
    nbytes: int  # the file's size


def state_identity(parts: Iterable[str]) -> str:
    """What a state is valid for, as a short hash (model identity, signature, versions)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


class KvSpill:
    def __init__(self, directory: Path, identity: str, budget_bytes: int) -> None:
        self.directory = directory
        self.identity = identity
        self.budget_bytes = budget_bytes

    def path(self, key: str) -> Path:
        return self.directory / f"{_safe(key)}.{self.identity}{SUFFIX}"

    # ---- writing -------------------------------------------------------------------------------

    def save(self, state: SpilledState) -> bool:
        """Write `state`; False (and a log line) when it cannot be kept on disk."""
        if self.budget_bytes <= 0:
            return False
        body = struct.pack(f"<{len(state.tokens)}i", *state.tokens) + state.data
        header = json.dumps({"identity": self.identity, "key": state.key,
                             "n_tokens": len(state.tokens), "data_bytes": len(state.data),
                             "sha256": hashlib.sha256(body).hexdigest()}).encode() + b"\n"
        blob = MAGIC + header + body
        if len(blob) > self.budget_bytes:
            log.info("KV state of conversation %s (%.0f MiB) exceeds the disk budget; not kept",
                     state.key, len(blob) / (1 << 20))
            return False
        target = self.path(state.key)
        if kind := not_regular(target):
            log.warning("KV state path %s is %s; the state of conversation %s is not kept",
                        target.name, kind, state.key)
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)  # the app's own directory
            write_bytes_atomic(target, blob)  # whole or absent, even on a full disk
        except OSError as exc:  # a full or read-only disk: the state is just not kept
            log.warning("could not keep the KV state of conversation %s on disk (%s); its next "
                        "turn re-reads the conversation", state.key, exc.strerror or exc)
            return False
        self._enforce_budget(keep=target)
        return True

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def forget(self, key: str) -> int:
        """Delete `key`'s files of every identity (the conversation itself was deleted)."""
        return remove_states(self.directory, key)

    # ---- reading -------------------------------------------------------------------------------

    def load(self, key: str) -> SpilledState | None:
        """`key`'s state, or None (with the reason in the log) when there is no usable one."""
        path = self.path(key)
        if kind := not_regular(path):  # a FIFO would block the read forever: left alone
            log.warning("KV state path %s is %s, not a file; re-reading the conversation",
                        path.name, kind)
            return None
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            self._note_foreign(key)
            return None
        except OSError as exc:
            log.warning("KV state file %s is unreadable (%s); re-reading the conversation",
                        path.name, exc.strerror or exc)
            return None
        state, problem = _parse(blob, self.identity, key)
        if state is None:
            log.warning("KV state file %s refused (%s); re-reading the conversation",
                        path.name, problem)
            path.unlink(missing_ok=True)  # it can never become valid
            return None
        os.utime(path)  # least recently used is by modification time
        return state

    def peek_tokens(self, key: str) -> list[int]:
        """The token mirror of `key`'s file ([] if none is usable), without reading its state:
        what a forecast needs, at a fraction of a restore's cost."""
        path = self.path(key)
        header = _read_header(path)
        if header is None or header.get("identity") != self.identity:
            return []
        try:
            n = int(header["n_tokens"])
            with open(path, "rb") as f:
                f.seek(len(MAGIC))
                f.readline(1 << 16)
                raw = f.read(4 * n)
        except (OSError, KeyError, ValueError, TypeError):
            return []
        return list(struct.unpack(f"<{n}i", raw)) if len(raw) == 4 * n else []

    def listing(self) -> list[SpillFile]:
        out = []
        for path in self._files():
            header = _read_header(path)
            if header is not None and header.get("identity") == self.identity:
                out.append(SpillFile(str(header.get("key")), int(header.get("n_tokens", 0)),
                                     path.stat().st_size))
        return out

    # ---- the budget ---------------------------------------------------------------------------

    def _files(self) -> list[Path]:
        """The regular files named like states (a folder, FIFO or link of that name is not one:
        reading a FIFO would block, and none of them is the spill's to delete)."""
        try:
            return [p for p in self.directory.iterdir() if p.name.endswith(SUFFIX)
                    and not p.is_symlink() and not not_regular(p) and p.exists()]
        except OSError:
            return []

    def _enforce_budget(self, keep: Path) -> None:
        """Delete the least recently used files (of any identity) past the byte budget."""
        files = []
        for p in self._files():
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in files)
        for _, size, p in sorted(files):
            if total <= self.budget_bytes:
                break
            if p == keep:
                continue
            try:
                p.unlink(missing_ok=True)
            except OSError:
                continue
            total -= size

    def _note_foreign(self, key: str) -> None:
        others = [p.name for p in self._files() if p.name.startswith(f"{_safe(key)}.")]
        if others:
            log.info("KV state of conversation %s on disk was made by another model, other "
                     "load-time settings or another engine version (%s); not restored",
                     key, ", ".join(others))


def remove_states(directory: Path, key: str) -> int:
    """Delete every state file of conversation `key` in `directory`, whatever model, settings or
    engine made it; returns how many went. Only regular files named like its states are touched
    (a folder or FIFO of that name is left alone); a directory that is missing, or a file where
    the directory should be, holds none."""
    removed = 0
    prefix = f"{_safe(key)}."
    try:
        entries = [p for p in directory.iterdir()
                   if p.name.startswith(prefix) and p.name.endswith(SUFFIX)]
    except OSError:
        return 0
    for path in entries:
        try:
            if path.is_file() and not path.is_symlink():
                path.unlink()
                removed += 1
        except OSError as exc:
            log.warning("could not delete the KV state file %s (%s)", path.name,
                        exc.strerror or exc)
    return removed


def _safe(key: str) -> str:
    """A conversation key as part of a file name (ids are numbers; anything else is hashed)."""
    return key if key.isalnum() else hashlib.sha256(key.encode()).hexdigest()[:16]


def _read_header(path: Path) -> dict | None:
    if not_regular(path):
        return None
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None
            return json.loads(f.readline(1 << 16))
    except (OSError, ValueError):
        return None


def _parse(blob: bytes, identity: str, key: str) -> tuple[SpilledState | None, str]:
    if not blob.startswith(MAGIC):
        return None, "not a KV state file" if blob else "empty file"
    end = blob.find(b"\n", len(MAGIC))
    if end < 0:
        return None, "truncated header"
    try:
        header = json.loads(blob[len(MAGIC):end])
        n_tokens, data_bytes = int(header["n_tokens"]), int(header["data_bytes"])
        digest, owner, made_for = str(header["sha256"]), str(header["key"]), header["identity"]
    except (ValueError, KeyError, TypeError):
        return None, "unreadable header"
    if made_for != identity:
        return None, "made by another model, other load-time settings or engine version"
    if owner != key:
        return None, f"it belongs to conversation {owner}"
    body = blob[end + 1:]
    if len(body) != 4 * n_tokens + data_bytes:
        return None, f"truncated: {len(body)} of {4 * n_tokens + data_bytes} bytes"
    if hashlib.sha256(body).hexdigest() != digest:
        return None, "checksum mismatch (damaged)"
    tokens = list(struct.unpack_from(f"<{n_tokens}i", body))
    return SpilledState(key, tokens, bytes(body[4 * n_tokens:])), ""
