"""The native library's C ABI, tested beneath the Python wrapper, and its identity check."""

from __future__ import annotations

import ctypes
import shutil

import pytest

from workbench.backend import llama, native
from workbench.backend.abort import AbortFlag


def test_abi_and_build_identity_match_the_running_llama():
    lib = native.load()
    assert lib.wb_abi_version() == native.ABI_VERSION
    ident = native.identity(lib)
    assert ident.llama_cpp_python_version == llama.llama_cpp_python_version()
    assert ident.libllama_sha256 == native.sha256_file(llama.libllama_path())
    native.verify_identity(lib, llama.libllama_path())  # does not raise


def test_identity_check_refuses_another_libllama(tmp_path):
    lib = native.load()
    impostor = tmp_path / "libllama.so"
    shutil.copy(llama.libllama_path(), impostor)
    impostor.write_bytes(impostor.read_bytes() + b"\0")  # same path shape, other bytes
    with pytest.raises(native.NativeLibraryError) as err:
        native.verify_identity(lib, impostor)
    message = str(err.value)
    assert "SHA-256" in message and "not to" in message and "scripts/test" in message


def test_identity_check_compares_the_native_structs_with_their_ctypes_mirrors(monkeypatch):
    lib = native.load()
    for name, mirror in native.NATIVE_STRUCTS.items():
        assert getattr(lib, f"wb_sizeof_{name}")() == ctypes.sizeof(mirror)

    class ShortCounters(ctypes.Structure):  # a mirror that forgot the last field
        _fields_ = native.WbStreamCounters._fields_[:-1]

    monkeypatch.setitem(native.NATIVE_STRUCTS, "stream_counters", ShortCounters)
    expected = r"sizeof\(wb_stream_counters\) is \d+ in C"
    with pytest.raises(native.NativeLibraryError, match=expected):
        native.verify_identity(lib, llama.libllama_path())


def test_abort_flag_create_free_twice_and_set_clear():
    for _ in range(2):
        flag = AbortFlag()
        assert not flag.is_set
        flag.set()
        assert flag.is_set
        flag.clear()
        assert not flag.is_set
        flag.close()
        flag.close()  # idempotent


def test_error_path_sets_the_last_error_text():
    lib = native.load()
    assert lib.wb_abort_install(None, None) == -1
    assert "context and flag are required" in native.last_error(lib)
    with pytest.raises(native.NativeLibraryError, match="context and flag are required"):
        native.check(lib.wb_abort_install(None, None), lib, "installing")


def test_string_buffers_are_nul_terminated_and_report_full_length():
    lib = native.load()
    small = ctypes.create_string_buffer(4)
    n = lib.wb_build_libllama_sha256(small, len(small))
    assert n == 64 and small.value == native.identity(lib).libllama_sha256[:3].encode()


def test_llama_polls_the_native_flag_during_a_decode(tiny_moe_path, open_session):
    from workbench.engine.requests import GenerateRequest

    s = open_session(model=str(tiny_moe_path), chat_template=False, n_predict=4, n_ctx=256)
    before = s._p.abort.polls
    s.generate(GenerateRequest(text="abc"))
    assert s._p.abort.polls > before  # llama.cpp called our C callback, not Python
