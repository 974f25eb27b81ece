"""Everything a training run is told, nested by concern; each option declared once (gtool.options).

`gtool train`'s flags are made from these declarations (gtool.cli.options), and the planner takes the
same model description (gtool.architecture.ModelConfig).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gtool.architecture import ModelConfig
from gtool.geometry.grid import DEFAULT_PLACEMENT, ProcessGrid
from gtool.options import Options, build_sections, option, route
from gtool.topology import Topology

if TYPE_CHECKING:
    import torch

OPTIMIZERS = ("adam", "adamw")
BACKENDS = ("gloo", "nccl")
DEVICES = ("cpu", "cuda")
SAMPLINGS = ("windows", "uniform")
FEATURE_SOURCES = ("memory", "store")
EVALUATIONS = ("full", "sampled")


@dataclass(frozen=True)
class OptimizerConfig(Options):
    """How the weights are updated."""

    algorithm: str = option("adam", "adam or adamw.", flag="--optimizer", choices=OPTIMIZERS)
    lr: float = option(0.01, "Learning rate.", positive=True)
    weight_decay: float = option(0.0005, "Weight decay (Adam: L2 term; AdamW: decoupled).", minimum=0.0)
    weight_decay_first_only: bool = option(False, "Decay only the first layer's weight (Kipf & Welling).")


@dataclass(frozen=True)
class RuntimeConfig(Options):
    """How long, where and with what the run goes: schedule, devices, checkpoints, log."""

    epochs: int = option(100, "Training epochs.", minimum=1)
    eval_every: int = option(1, "Evaluate accuracies every N epochs and at the end.", minimum=1)
    seed: int = option(0, "Seed of weight initialization and dropout masks.", minimum=0)
    backend: str = option("gloo", "gloo (CPU) or nccl (one GPU per rank, cuda:LOCAL_RANK).", choices=BACKENDS)
    device: str | None = option(
        None,
        "cpu or cuda; default cuda for nccl, cpu for gloo (gloo with cuda: ranks may share GPUs).",
        choices=DEVICES,
    )
    threads: int = option(1, "Torch threads per rank.", minimum=1)
    timeout: float = option(60.0, "Seconds a rank waits in a collective before giving up.", positive=True)
    checkpoint: str | None = option(None, "Directory of sharded checkpoints.", metavar="DIR")
    checkpoint_every: int = option(10, "Write a checkpoint every N epochs (and at the end).", minimum=1)
    resume: bool = option(False, "Continue from the latest checkpoint in --checkpoint, if there is one.")
    overwrite: bool = option(
        False, "Replace the checkpoint of another run in --checkpoint (removed before training starts)."
    )
    log: str | None = option(
        None,
        "JSON lines: one per epoch, then a summary (appended on --resume). Under torchrun, spell it "
        "--log-file (torchrun takes --log for its own --log-dir).",
        aliases=("--log-file",),
        metavar="FILE",
    )
    quiet: bool = option(False, "No progress: only the result (the summary) and any error.", short="-q")
    target_accuracy: float | None = option(
        None,
        "Stop once the validation accuracy (ROC-AUC on a multi-label store) reaches A at an evaluation; "
        "the summary gives the training seconds to reach it.",
        positive=True,
        metavar="A",
    )

    def combined_problems(self) -> list[str]:
        problems = []
        if self.backend == "nccl" and self.device == "cpu":
            problems.append("--backend nccl needs --device cuda (NCCL only moves GPU tensors)")
        if self.resume and not self.checkpoint:
            problems.append("--resume needs --checkpoint DIR")
        if self.target_accuracy is not None and self.target_accuracy > 1:
            problems.append(f"--target-accuracy must be at most 1 (a fraction), got {self.target_accuracy}")
        if self.overwrite and not self.checkpoint:
            problems.append("--overwrite needs --checkpoint DIR")
        if self.overwrite and self.resume:
            problems.append("--overwrite replaces the checkpoint that --resume continues: pass one of them")
        return problems

    @property
    def device_type(self) -> str:
        """Where the ranks' tensors live: --device, else cuda for NCCL and the CPU for gloo."""
        return self.device or ("cuda" if self.backend == "nccl" else "cpu")


@dataclass(frozen=True)
class MiniBatchConfig(Options):
    """Mini-batch training: node samples (windows of the store's node order, or uniform), and replicas of
    the grid that average gradients."""

    batch_size: int | None = option(
        None, "Train on random samples of B nodes per step (default: full-graph epochs).", minimum=2
    )
    data_parallel: int = option(
        1, "D replicas of the grid, each stepping on its own samples (D x grid ranks; mini-batch).", minimum=1
    )
    sampling: str = option(
        "windows",
        "windows: each step takes random windows of consecutive positions of the store's (random) node "
        "order, whole feature chunks; uniform: a uniform node sample (mini-batch).",
        choices=SAMPLINGS,
    )
    features_from: str = option(
        "auto",
        "memory: each rank loads its feature block at start; store: each step reads its rows (mini-batch); "
        "auto: memory when the run fits --memory-limit so, else store (decided before any rank starts).",
        choices=("auto", *FEATURE_SOURCES),
    )
    evaluation: str | None = option(
        None,
        "full: full-graph forward; sampled: batches of B nodes, every node once (default: full, sampled "
        "with --features-from store).",
        flag="--eval",
        choices=EVALUATIONS,
    )

    def combined_problems(self) -> list[str]:
        problems = []
        if self.data_parallel > 1 and self.batch_size is None:
            problems.append("--data-parallel needs --batch-size (replicas step on their own samples)")
        if self.features_from == "store" and self.batch_size is None:
            problems.append("--features-from store needs --batch-size (each step reads its rows)")
        if self.evaluation == "sampled" and self.batch_size is None:
            problems.append("--eval sampled needs --batch-size (evaluation batches of B nodes)")
        if self.evaluation == "full" and self.features_from == "store":
            problems.append("--eval full needs every feature row: use --features-from memory")
        return problems

    @property
    def evaluate(self) -> str:
        """How evaluation runs: --eval, else sampled with --features-from store and full otherwise."""
        return self.evaluation or ("sampled" if self.features_from == "store" else "full")

    def evaluation_problem(self, multi_label: bool) -> str | None:
        """Why this run cannot evaluate a store of multi-label (`multi_label`) or class-index labels."""
        if self.batch_size is None or self.evaluate != "sampled" or not multi_label:
            return None
        return (
            "--eval sampled sums accuracies over batches; a multi-label store's ROC-AUC needs the full "
            "graph: --eval full with --features-from memory"
        )


@dataclass(frozen=True)
class TrainConfig(Options):
    """A training run on `store` over a GX x GY x GZ grid (D replicas of it with --data-parallel D).
    Epochs are numbered from 1."""

    store: str
    grid: tuple[int, int, int] = (1, 1, 1)
    model: ModelConfig = field(default_factory=ModelConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    topology: Topology = field(default_factory=Topology)
    minibatch: MiniBatchConfig = field(default_factory=MiniBatchConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", self.model.for_mode(self.minibatch.batch_size is not None))
        super().__post_init__()

    @classmethod
    def of(cls, store: str, grid: tuple[int, int, int] = (1, 1, 1), **options: Any) -> TrainConfig:
        """A run from options by name (`hidden=64, lr=0.05, epochs=10`, as the flags are named)."""
        return cls(store, grid, **build_sections(SECTIONS, route(SECTIONS, options)))

    def replace(self, **options: Any) -> TrainConfig:
        """This run with some options changed by name (store and grid too)."""
        store, grid = options.pop("store", self.store), options.pop("grid", self.grid)
        routed = route(SECTIONS, options)
        return TrainConfig(store, grid, **{k: replace(getattr(self, k), **v) for k, v in routed.items()})

    def combined_problems(self) -> list[str]:
        if len(self.grid) != 3 or min(self.grid) < 1:
            return [f"--grid must be 3 positive integers, got {self.grid}"]
        if self.minibatch.features_from == "store" and self.model.learnable_features:
            return ["--learnable-features trains every feature row: use --features-from memory"]
        return []

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch  # here: the command line reads configurations without loading torch

        return getattr(torch, self.model.dtype)

    @property
    def process_grid(self) -> ProcessGrid:
        """The grid, its axes laid over the ranks by --placement (default: z innermost)."""
        return ProcessGrid(*self.grid, self.topology.placement or DEFAULT_PLACEMENT)

    @property
    def grid_size(self) -> int:
        """Ranks of one replica of the grid: GX * GY * GZ."""
        gx, gy, gz = self.grid
        return gx * gy * gz

    @property
    def world_size(self) -> int:
        """Ranks of the run: D replicas of the grid."""
        return self.minibatch.data_parallel * self.grid_size

    @property
    def cast_dtype(self) -> torch.dtype | None:
        """What the all-reduces of H, Q, dH and dF carry if not the training dtype (bf16), else None."""
        import torch  # here: the command line reads configurations without loading torch

        return torch.bfloat16 if self.model.comm_dtype == "bf16" else None


SECTIONS = {
    "model": ModelConfig,
    "optimizer": OptimizerConfig,
    "runtime": RuntimeConfig,
    "topology": Topology,
    "minibatch": MiniBatchConfig,
}
"""The sections of a TrainConfig, by field name."""
