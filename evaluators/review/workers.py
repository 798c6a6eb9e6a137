"""Worker processes for batch work (a review's files, the fix marks of its findings)."""
from __future__ import annotations

import os
import sys
from multiprocessing import get_context


def default_jobs() -> int:
    """Worker processes when the user names none: one per core, at most 8."""
    return min(os.cpu_count() or 1, 8)


def context():
    """Fork where it is safe and cheap (Linux: the workers share the parent's imports); spawn elsewhere."""
    return get_context("fork") if sys.platform == "linux" else get_context("spawn")


def file_size(path: str) -> int:
    """Bytes on disk, 0 when unreadable: for ordering work largest first."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
