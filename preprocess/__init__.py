"""Out-of-core preprocessing: raw graph -> 2D-tiled Zarr store (`gtool shard`).

pipeline drives the stages: sources/ read the input, edges/ map and reduce the edges into tiles, nodes/
write the node arrays, all as tasks of engine/, into a store staged by gtool.store.writing; kernels/
holds the hot loops (numpy's and numba's forms), spill the intermediate files between stages."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gtool.faces import face

if TYPE_CHECKING:
    from gtool.preprocess.options import ShardOptions
    from gtool.preprocess.permutation import DEGREE_SCHEMES, SCHEMES, make_permutations
    from gtool.preprocess.pipeline import shard
    from gtool.preprocess.sources.cache.entries import (
        CacheFolder,
        cache_folder,
        list_entries,
        other_files,
        remove_entries,
        remove_orphan_notes,
    )
    from gtool.preprocess.sources.cache.record import Preparation
    from gtool.preprocess.sources.generators import rmat_block
    from gtool.preprocess.sources.kinds import SOURCE_KINDS
    from gtool.preprocess.summary import ShardSummary

__getattr__, __dir__ = face(__name__)
