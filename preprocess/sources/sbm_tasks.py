"""`sbm-multi:NODES:COMMUNITIES:TASKS[:DEGREE[:SEED]]`: the stochastic block model of sources/sbm.py (the
same edges and noisy features for its COMMUNITIES planted classes) with multi-label targets: TASKS binary
tasks that follow the communities, stored as N x TASKS multi-label labels, for tests and demos of
multi-label training (ROC-AUC, as ogbn-proteins is judged).

Task t is positive on a seeded random set of communities (about half of them, never none or all), and
node v's label for it is whether its community is in that set. About UNKNOWN_SHARE of the (node, task)
entries are unknown (-1), so that losses and metrics must skip them as on real multi-label data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gtool.errors import InputError
from gtool.preprocess.sources.base import NodeData
from gtool.preprocess.sources.kinds import SBM_MULTI_SPEC
from gtool.preprocess.sources.sbm import (
    DEFAULT_DEGREE,
    DEFAULT_SEED,
    SbmSource,
    sbm_classes,
    spec_numbers,
)
from gtool.store import layout

UNKNOWN_SHARE = 0.1
"""The share of (node, task) label entries that are unknown (-1)."""
SPEC = SBM_MULTI_SPEC


def task_communities(num_communities: int, num_tasks: int, seed: int) -> np.ndarray:
    """bool [COMMUNITIES, TASKS]: the communities each task is positive on, a seeded random half of them
    (a task drawn with all or none gets its community t % COMMUNITIES flipped, so every task has both)."""
    positive = np.random.default_rng([seed, 0x7A5]).random((num_communities, num_tasks)) < 0.5
    constant = np.flatnonzero(positive.all(axis=0) | ~positive.any(axis=0))
    positive[constant % num_communities, constant] ^= True
    return positive


def task_labels(num_nodes: int, num_communities: int, num_tasks: int, seed: int) -> np.ndarray:
    """int64 [NODES, TASKS]: 1 where the node's community is positive for the task, else 0; about
    UNKNOWN_SHARE of the entries -1 (unknown)."""
    communities = sbm_classes(np.arange(num_nodes), num_nodes, num_communities)
    labels = task_communities(num_communities, num_tasks, seed)[communities].astype(np.int64)
    unknown = np.random.default_rng([seed, 0x7A6]).random((num_nodes, num_tasks)) < UNKNOWN_SHARE
    labels[unknown] = layout.LABEL_NONE
    return labels


class MultiLabelSbmSource(SbmSource):
    """An SbmSource whose labels are TASKS binary tasks that follow its communities."""

    def __init__(
        self,
        num_nodes: int,
        num_communities: int,
        num_tasks: int,
        degree: int = DEFAULT_DEGREE,
        seed: int = DEFAULT_SEED,
    ):
        super().__init__(num_nodes, num_communities, degree, seed)
        if num_tasks < 1:
            raise InputError("sbm-multi", f"expected TASKS >= 1, got {num_tasks}")
        self.num_tasks = num_tasks
        self.name = f"sbm-multi:{num_nodes}:{num_communities}:{num_tasks}:{degree}"

    def node_data(self) -> NodeData:
        data = super().node_data()
        n = self.num_nodes()
        data.labels = task_labels(n, self.num_classes, self.num_tasks, self.seed)
        data.num_classes = self.num_tasks
        return data

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "name": self.name,
            "generator": "sbm-multi",
            "tasks": self.num_tasks,
            "unknown_share": UNKNOWN_SHARE,
        }


def parse_sbm_tasks(spec: str, args: str) -> MultiLabelSbmSource:
    """`sbm-multi:NODES:COMMUNITIES:TASKS[:DEGREE[:SEED]]` as a source."""
    return MultiLabelSbmSource(*spec_numbers(spec, args, range(3, 6), SPEC))
