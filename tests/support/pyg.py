"""A stand-in for torch_geometric where it is not installed."""

from __future__ import annotations


class FakeData:
    """Stands in for torch_geometric.data.Data where torch_geometric is not installed: keeps its fields."""

    def __init__(self, **fields: object):
        self.__dict__.update(fields)
