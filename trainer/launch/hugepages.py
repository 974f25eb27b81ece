"""Large CPU tensors on transparent huge pages (THP_MEM_ALLOC_ENABLE=1): one page fault per 2 MiB
instead of per 4 KiB when an epoch touches freshly allocated blocks again. torch reads the variable at its
first allocation, so it is set before torch is imported: the `gtool` command does it for every command
(unless the environment decides; THP_MEM_ALLOC_ENABLE=0 opts out), and scripts using the Python API
call enable_huge_pages() first.
"""

from __future__ import annotations

import os

VARIABLE = "THP_MEM_ALLOC_ENABLE"


def enable_huge_pages() -> None:
    """Ask torch for huge pages on large CPU tensors unless the environment already decides."""
    os.environ.setdefault(VARIABLE, "1")
