"""The single-process parts of `gtool predict` and of bf16 all-reduces: checkpoint parts reassembled on
another grid, flat parts, the chunks each rank writes, the cast buffers."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import zarr

from gtool.errors import StoreExistsError
from gtool.geometry.bands import band
from gtool.geometry.grid import ProcessGrid
from gtool.geometry.layers import rank_layers
from gtool.store.layout import PREDICTIONS_KEY
from gtool.store.writing.output_lock import OutputLockedError, output_lock
from gtool.store.writing.staging import PREDICT_OUTPUT, StagedOutput, check_output
from gtool.trainer.checkpoints.folder import CheckpointError, rank_file
from gtool.trainer.checkpoints.regrid import TrainedParameters
from gtool.trainer.comm.groups import CastBuffers
from gtool.trainer.nn.sharded import Place, block_of, flat_part, from_parts
from gtool.trainer.predict import job as predict_module
from gtool.trainer.predict.writer import chunk_bounds

NODES, DIMS = 11, [5, 3, 4]


def _checkpoint(
    folder, grid: ProcessGrid, weights: list[torch.Tensor], features: torch.Tensor, orders: list[bool]
) -> dict:
    """Rank files as a `grid` run of learnable features whose layers have `orders` saves them: each
    rank's flat part (over the layer's weight axis, or layer 0's a-axis) of its weight blocks and of its
    layer-0 input block."""
    for rank in range(grid.size):
        layers = rank_layers(grid, rank, orders, NODES, True)
        state = {}
        for layer, (geometry, weight) in enumerate(zip(layers, weights, strict=True)):
            part, parts = geometry.coords[geometry.weight_axis], geometry.size(geometry.weight_axis)
            place = Place(geometry.in_cols(weight.shape[0]), geometry.out_cols(weight.shape[1]), 0)
            state[f"weight.{layer}"] = flat_part(block_of(weight, place), parts, part)
        first = layers[0]
        rows, cols = first.inputs, first.in_cols(DIMS[0])
        block = features.new_zeros(rows.size, cols.size)
        real = features[rows.start : rows.stop, cols.start : cols.stop]
        block[: real.shape[0], : real.shape[1]] = real
        state["features"] = flat_part(block, first.sizes[0], first.coords[first.roles[0]])
        torch.save({"model": state}, rank_file(folder, rank))
    shape = {"grid": list(grid.dims), "placement": grid.placement, "dims": DIMS, "num_nodes": NODES}
    if any(orders):  # a checkpoint without the orders was written aggregate-first
        shape["transform_first"] = orders
    return {"path": str(folder), "shape": shape}


@pytest.mark.parametrize(
    ("dims", "orders"),
    [
        ((1, 1, 1), [False, False]),
        ((2, 2, 1), [False, False]),
        ((3, 1, 2), [False, False]),
        ((3, 1, 2, "xzy"), [False, False]),
        ((3, 2, 1), [True, True]),
        ((2, 1, 3), [False, True]),
    ],
    ids=lambda d: "x".join(map(str, d)) if isinstance(d[0], int) else "".join("ta"[not t] for t in d),
)
def test_trained_parameters_are_reassembled_for_any_grid(tmp_path, dims: tuple, orders: list[bool]) -> None:
    """From the rank files of a grid written before the places were recorded (one laid out x innermost:
    the manifest's placement says which rank held which coordinates; transform-first layers split their
    weight blocks over their b-axis): the parameters by their names now."""
    generator = torch.Generator().manual_seed(1)
    weights = [torch.randn(DIMS[i], DIMS[i + 1], generator=generator) for i in range(2)]
    features = torch.randn(NODES, DIMS[0], generator=generator)
    trained = TrainedParameters(_checkpoint(tmp_path, ProcessGrid(*dims), weights, features, orders))
    for layer, weight in enumerate(weights):
        whole = Place(band(0, 1, weight.shape[0]), band(0, 1, weight.shape[1]), 0)
        got = trained.block(f"model.convs.{layer}.weight", whole, DIMS[0], DIMS[-1])
        assert torch.equal(got, weight)
    for rank, layers in enumerate([rank_layers(ProcessGrid(3, 2, 1), r, 2, NODES, True) for r in range(6)]):
        rows, cols = layers[0].inputs, layers[0].in_cols(DIMS[0])
        block = trained.block("features.features", Place(rows, cols, 0), DIMS[0], DIMS[-1])
        assert block.shape == (rows.size, cols.size), rank
        assert torch.equal(
            block[: rows.real, : cols.real], features[rows.start : rows.stop, cols.start : cols.stop]
        )
        assert not block[rows.real :].any() and not block[:, cols.real :].any()


def test_a_missing_rank_file_is_named(tmp_path) -> None:
    manifest = _checkpoint(
        tmp_path, ProcessGrid(2, 1, 1), [torch.ones(5, 3), torch.ones(3, 4)], torch.ones(11, 5), [False] * 2
    )
    rank_file(tmp_path, 1).unlink()
    with pytest.raises(CheckpointError, match="rank-00001.pt is missing"):
        TrainedParameters(manifest).block("model.convs.0.weight", Place(None, band(0, 1, 3), 0), 5, 4)


@pytest.mark.parametrize("parts", [1, 2, 4, 7])
def test_flat_parts_reassemble_the_block(parts: int) -> None:
    block = torch.arange(15.0).view(5, 3)
    pieces = [flat_part(block, parts, index) for index in range(parts)]
    assert len({p.numel() for p in pieces}) == 1
    assert torch.equal(from_parts(pieces, block.shape), block)


def test_each_rank_writes_whole_chunks() -> None:
    assert chunk_bounds(10, 3, 3).tolist() == [0, 3, 6, 10]
    assert chunk_bounds(5, 4, 3).tolist() == [0, 0, 4, 5]
    bounds = chunk_bounds(1000, 7, 6)
    assert bounds[0] == 0 and bounds[-1] == 1000 and np.all(np.diff(bounds) >= 0)
    assert np.all(bounds[:-1] % 7 == 0)


def test_cast_buffers_are_reused_and_grown_once() -> None:
    buffers = CastBuffers(torch.bfloat16)
    big = buffers.cast(("H", 0), torch.full((4, 3), 1.0 + 2**-12))
    assert big.dtype == torch.bfloat16 and big.shape == (4, 3) and torch.all(big == 1.0)
    small = buffers.cast(("H", 0), torch.ones(2, 5))
    assert small.data_ptr() == big.data_ptr() and small.shape == (2, 5)
    other = buffers.cast("Q", torch.ones(2, 2))
    assert other.data_ptr() != big.data_ptr()
    grown = buffers.cast(("H", 0), torch.ones(5, 5))
    assert grown.numel() == 25 and buffers.cast(("H", 0), torch.ones(3)).data_ptr() == grown.data_ptr()


def test_predict_overwrites_an_earlier_output_never_a_graph_store_and_one_run_at_a_time(tmp_path) -> None:
    """--overwrite used to replace any gtool store (the input store itself) and refuse its own outputs."""
    graph = tmp_path / "graph.zarr"
    zarr.open_group(str(graph), mode="w").attrs["gtool"] = {"layout": 1, "complete": True}
    for check in (check_output, StagedOutput):
        with pytest.raises(StoreExistsError, match="is neither a gtool predict output nor an empty folder"):
            check(str(graph), True, PREDICT_OUTPUT)
    earlier = tmp_path / "out.zarr"
    zarr.open_group(str(earlier), mode="w").attrs[PREDICTIONS_KEY] = {"complete": True}
    check_output(str(earlier), True, PREDICT_OUTPUT)
    StagedOutput(str(earlier), True, PREDICT_OUTPUT)
    first, second = (output_lock(str(earlier), "gtool predict") for _ in range(2))
    with first, pytest.raises(OutputLockedError, match="another gtool predict run is writing this output"):
        second.__enter__()


def test_predict_locks_its_output_before_any_rank_starts_and_while_they_run(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock used to be taken by rank 0 after its forward pass: a second run loaded and computed
    everything before it was refused."""
    job = SimpleNamespace(output=str(tmp_path / "out.zarr"), config=None)
    started: list[bool] = []

    def ranks(*args: object) -> None:
        with pytest.raises(OutputLockedError):  # held while the ranks run
            output_lock(job.output, "gtool predict").__enter__()
        started.append(True)

    monkeypatch.setattr(predict_module, "start_ranks", ranks)
    monkeypatch.setattr(predict_module, "environment_rank", lambda: None)
    with output_lock(job.output, "gtool predict"):
        with pytest.raises(OutputLockedError, match="another gtool predict run is writing this output"):
            predict_module.predict(job)
        assert started == []
        monkeypatch.setattr(predict_module, "environment_rank", lambda: SimpleNamespace(rank=1))
        monkeypatch.setattr(predict_module, "start_ranks", lambda *args: started.append(False))
        predict_module.predict(job)  # a rank other than torchrun's rank 0 takes no lock
    monkeypatch.setattr(predict_module, "start_ranks", ranks)
    monkeypatch.setattr(predict_module, "environment_rank", lambda: SimpleNamespace(rank=0))
    predict_module.predict(job)
    assert started == [False, True]
