"""Byte counts as users write them (`--memory-limit 2GB`) and as gtool shows them (`1.5 KiB`); counts of
things named in the singular or plural (`1 rank`, `4 ranks`)."""

from __future__ import annotations

import math
import re

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
    "KIB": 1 << 10,
    "MIB": 1 << 20,
    "GIB": 1 << 30,
    "TIB": 1 << 40,
}


def parse_bytes(text: str) -> int:
    """'2GB', '512M', '1.5GiB' or a plain byte count -> bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"expected a size like 2GB or 512MB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def byte_count(text: str, flag: str) -> int:
    """A flag's size ('2GB' -> 2147483648); ValueError naming the flag when it is not one."""
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None


def human_bytes(n: float, up: bool = False) -> str:
    """1536 -> '1.5 KiB': the unit that fits the size, so that no size reads as 0 (rounded `up` for an
    amount to ask for, so that it is never less than what is needed)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{math.ceil(n) if up else int(n)} B"
            return f"{math.ceil(n * 10) / 10 if up else n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable: TiB takes any size")


def counted(count: int, noun: str) -> str:
    """'1 rank', '4 ranks', '1,024 ranks': `count` of `noun` (a regular plural)."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
