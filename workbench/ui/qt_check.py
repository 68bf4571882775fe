"""Refuse to start on a Qt binding that corrupts Python's reference counts.

PySide6 6.12.0 on Python 3.11 returns None from void methods without taking a reference
(harmless on 3.12+, where None is immortal). Every `widget.update()` then steals one
reference from None; a live window aborts within seconds ("Fatal Python error: none_dealloc").
The check costs a few microseconds and turns that crash into a message that says what to do.
"""

from __future__ import annotations

import sys

PROBE_CALLS = 64


def binding_problem() -> str:
    """'' when the binding is sound; otherwise what is wrong and how to fix it."""
    if sys.version_info >= (3, 12):
        return ""
    import PySide6
    from PySide6.QtCore import QObject

    probe = QObject()
    before = sys.getrefcount(None)
    for _ in range(PROBE_CALLS):
        probe.setObjectName("probe")  # a void method: must leave None's count alone
    lost = before - sys.getrefcount(None)
    if lost < PROBE_CALLS // 2:
        return ""
    return (f"PySide6 {PySide6.__version__} corrupts reference counts on Python "
            f"{sys.version_info.major}.{sys.version_info.minor} and would crash the window. "
            "Install another release, e.g. pip install 'PySide6-Essentials>=6.7,<6.12', or use "
            "Python 3.12 or newer.")
