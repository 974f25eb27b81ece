"""The kinds of SOURCE `gtool shard` takes, named once for its help and its refusals (no heavy imports)."""

from __future__ import annotations

RMAT_SPEC = "rmat:SCALE[:EDGEFACTOR[:SEED]]"
GRID_SPEC = "grid:RxC"
SBM_SPEC = "sbm:NODES:CLASSES[:DEGREE[:SEED]]"
SBM_MULTI_SPEC = "sbm-multi:NODES:COMMUNITIES:TASKS[:DEGREE[:SEED]]"
GENERATOR_SPECS = (RMAT_SPEC, GRID_SPEC, SBM_SPEC, SBM_MULTI_SPEC)

DATASET_NAMES = ("cora", "citeseer", "pubmed", "arxiv", "products", "proteins", "papers100m")
"""Named datasets: Planetoid's, downloaded when missing, and OGB's, looked up under --root."""

SOURCE_KINDS = (
    "an edge file (.txt/.csv/.mtx/.npy/.parquet, optionally .gz; an .npz of edge arrays, a scipy.sparse "
    f"matrix or a GNN-benchmark graph), an OGB or Planetoid directory, a dataset name "
    f"({', '.join(DATASET_NAMES)}) or a generator ({', '.join(GENERATOR_SPECS)})"
)
