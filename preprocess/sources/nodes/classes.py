"""The class count of a store's labels: declared by the source, given by --num-classes, or inferred as
the largest label + 1, which one stray label would inflate (a label of 10^9 makes 10^9 + 1 classes and a
trainer that allocates their output layer); an inferred count is kept only when it is plausible."""

from __future__ import annotations

import numpy as np

from gtool.errors import InputError
from gtool.store.metadata import class_limit_problem

MAX_INFERRED_CLASSES = 100_000
"""The most classes inferred from the labels alone; --num-classes allows more."""
GAPS_ALLOWED = 2
"""An inferred count may be at most this many times the number of distinct labels."""


def check_below(labels: np.ndarray, num_classes: int, where: str, whose: str) -> None:
    """Fail at the first label >= num_classes (`whose` says where the count comes from)."""
    if labels.ndim == 1 and labels.max(initial=-1) >= num_classes:
        k = int(np.argmax(labels >= num_classes))
        problem = f"label {labels[k]} is >= the {num_classes:,} classes {whose}"
        raise InputError(where, problem, index=f"node {k}")


def check_class_limit(num_classes: int, num_nodes: int, whose: str) -> None:
    """Fail when a class count is more than a store of `num_nodes` nodes may have (the store format's
    class_limit, which readers check too); `whose` names where the count comes from."""
    if problem := class_limit_problem(num_classes, num_nodes):
        raise InputError(whose, problem)


def class_count(labels: np.ndarray, declared: int | None, given: int | None, where: str) -> int:
    """The class count of `labels` (int64 class ids, -1 unlabelled; or an N x K multi-label matrix),
    checked against them: `given` (--num-classes) wins, then `declared` (by the source), else the largest
    label + 1, refused when above MAX_INFERRED_CLASSES or GAPS_ALLOWED times the distinct labels."""
    if labels.ndim == 2:
        if given is not None and given != labels.shape[1]:
            raise InputError(where, f"{labels.shape[1]} label columns, but --num-classes is {given}")
        check_class_limit(labels.shape[1], labels.shape[0], f"{where} (its label columns)")
        return int(labels.shape[1])
    if given is not None:
        check_below(labels, given, where, "--num-classes gives")
        return given
    if declared is not None:
        check_class_limit(declared, labels.shape[0], f"{where} (the class count the source declares)")
        check_below(labels, declared, where, "the source declares")
        return max(declared, 1)
    inferred = int(labels.max(initial=-1)) + 1
    if inferred > MAX_INFERRED_CLASSES:
        plausible = f"the {MAX_INFERRED_CLASSES:,} classes gtool infers from labels at most"
    else:
        distinct = int(np.count_nonzero(np.bincount(labels[labels >= 0], minlength=inferred)))
        if inferred <= GAPS_ALLOWED * distinct:
            return max(inferred, 1)
        plausible = f"{GAPS_ALLOWED}x the {distinct:,} distinct labels that occur"
    raise InputError(
        where,
        f"the largest label, {inferred - 1:,}, would make {inferred:,} classes, more than {plausible}; "
        "fix the labels, or give the class count with --num-classes",
    )
