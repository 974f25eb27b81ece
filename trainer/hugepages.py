"""Large CPU tensors on transparent huge pages.

glibc hands every block over its mmap threshold (at most 32 MiB) straight from the operating system and
returns it on free, so each epoch touches its large tensors' pages for the first time again: one page
fault per 4 KiB (about 160,000 per epoch for rmat:16 at hidden 128). With THP_MEM_ALLOC_ENABLE=1,
torch aligns CPU blocks of 2 MiB and more to 2 MiB and asks the kernel for huge pages on them
(madvise), one fault per 2 MiB where /sys/kernel/mm/transparent_hugepage/enabled is `madvise` or
`always`. torch reads the variable once, at its first allocation, so it must be set before torch is
imported: the `gtool` command sets it before any of its commands runs, unless the environment already
says otherwise (set THP_MEM_ALLOC_ENABLE=0 to opt out), and processes that gtool spawns inherit it.
Scripts that train through the Python API call enable_huge_pages() before importing torch.
"""

from __future__ import annotations

import os

VARIABLE = "THP_MEM_ALLOC_ENABLE"


def enable_huge_pages() -> None:
    """Ask torch for huge pages on large CPU tensors unless the environment already decides."""
    os.environ.setdefault(VARIABLE, "1")
