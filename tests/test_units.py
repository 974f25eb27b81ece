"""Byte counts as users write them and as gtool shows them."""

from __future__ import annotations

import pytest

from gtool.units import human_bytes, parse_bytes


def test_sizes_read_as_written_and_shown_in_the_unit_that_fits() -> None:
    assert [parse_bytes(t) for t in ("2GB", "512M", "1.5GiB", "4096", " 1 kb ")] == [
        2 << 30,
        512 << 20,
        3 << 29,
        4096,
        1024,
    ]
    with pytest.raises(ValueError, match="expected a size like 2GB or 512MB, got '2 apples'"):
        parse_bytes("2 apples")
    assert [human_bytes(n) for n in (0, 1023, 1536, 400 << 20, 80 << 30, 3 << 40)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "400.0 MiB",
        "80.0 GiB",
        "3.0 TiB",
    ]
