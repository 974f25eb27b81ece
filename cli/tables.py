"""Tables laid out for the terminal they are printed on: figures kept whole, text and headers wrapped."""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

TIGHT = (0, 0, 0, 1)
"""Cell padding on the left only (and no blank edges): columns closer together, for a table that does not
fit otherwise."""


def unbroken_figures(table: Table, width: int) -> Table:
    """Keep every figure (a cell that starts with a digit: 5,422, 127.1 KiB, 469 (93.9%)) and every word
    on one line where the table then fits `width`: a column is at least as wide as its widest figure and
    its longest word, so that on a narrow terminal headers and text wrap between words instead; failing
    that, columns closer together; failing that, figures wrap too (never cut to '…'). The columns' widths
    are set here: the least each needs, then what is left to whole figures, then to whole cells (each row
    on one line), then to whole headers."""
    words, figures, rows, full = [], [], [], []
    for column in table.columns:
        cells = [str(cell) for cell in column._cells]
        texts = [*cells, str(column.header)]
        longest = max(len(word) for text in texts for word in text.split() or [""])
        words.append(longest)
        figures.append(max([longest, *(len(text) for text in cells if text[:1].isdigit())]))
        rows.append(max([longest, *map(len, cells)]))
        full.append(max(len(text) for text in texts))
    console = Console(width=width)
    unbounded = console.options.update_width(1 << 20)  # the table's width, not capped at `width`
    padding = table.padding
    for least, spread in ((figures, padding), (figures, TIGHT), (words, padding), (words, TIGHT)):
        table.padding, table.show_edge = spread, spread != TIGHT
        for column, minimum in zip(table.columns, least, strict=True):
            column.width = minimum
        overhead = Measurement.get(console, unbounded, table).minimum - sum(least)
        if sum(least) + overhead <= width:
            break
    else:  # too many columns even so: rich wraps every cell to fit, words and figures alike
        for column in table.columns:
            column.width = None
        return table
    spare, widths = width - overhead - sum(least), list(least)
    for wanted in (figures, rows, full):  # whole figures, then whole cells, then whole headers: least first
        for k in sorted(range(len(widths)), key=lambda k: wanted[k] - widths[k]):
            grown = min(max(wanted[k] - widths[k], 0), max(spare, 0))
            widths[k] += grown
            spare -= grown
    for column, chosen in zip(table.columns, widths, strict=True):
        column.width = chosen
    return table
