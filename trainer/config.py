"""Everything a training run is told: what `gtool train` flags map to."""

from __future__ import annotations

from dataclasses import dataclass

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64}
OPTIMIZERS = ("adam", "adamw")
FEATURE_NORMALIZATIONS = ("none", "row")
BACKENDS = ("gloo", "nccl")
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class TrainConfig:
    """A training run. Epochs are numbered from 1; `epochs` is the last one."""

    store: str
    grid: tuple[int, int, int] = (1, 1, 1)
    layers: int = 3
    hidden: int = 128
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    weight_decay_first_only: bool = False
    optimizer: str = "adam"
    epochs: int = 100
    eval_every: int = 1
    seed: int = 0
    learnable_features: bool = False
    normalize_features: str = "none"
    agg_blocks: int = 1
    dtype: str = "float32"
    backend: str = "gloo"
    device: str | None = None
    threads: int = 1
    timeout: float = 60.0
    checkpoint: str | None = None
    checkpoint_every: int = 10
    resume: bool = False
    log: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if self.layers < 1:
            problems.append(f"--layers must be >= 1, got {self.layers}")
        if self.hidden < 1:
            problems.append(f"--hidden must be >= 1, got {self.hidden}")
        if not 0.0 <= self.dropout < 1.0:
            problems.append(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.epochs < 1 or self.eval_every < 1 or self.checkpoint_every < 1 or self.agg_blocks < 1:
            problems.append("--epochs, --eval-every, --checkpoint-every and --agg-blocks must be >= 1")
        if self.optimizer not in OPTIMIZERS:
            problems.append(f"--optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.normalize_features not in FEATURE_NORMALIZATIONS:
            problems.append(f"--normalize-features must be one of {FEATURE_NORMALIZATIONS}")
        if self.dtype not in DTYPES:
            problems.append(f"--dtype must be one of {tuple(DTYPES)}, got {self.dtype!r}")
        if self.backend not in BACKENDS:
            problems.append(f"--backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.device is not None and self.device not in DEVICES:
            problems.append(f"--device must be one of {DEVICES}, got {self.device!r}")
        if self.backend == "nccl" and self.device == "cpu":
            problems.append("--backend nccl needs --device cuda (NCCL only moves GPU tensors)")
        if len(self.grid) != 3 or min(self.grid) < 1:
            problems.append(f"--grid must be 3 positive integers, got {self.grid}")
        if self.threads < 1 or self.timeout <= 0:
            problems.append("--threads must be >= 1 and --timeout > 0")
        if self.resume and not self.checkpoint:
            problems.append("--resume needs --checkpoint DIR")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def device_type(self) -> str:
        """Where the ranks' tensors live: --device, else cuda for NCCL and the CPU for gloo."""
        return self.device or ("cuda" if self.backend == "nccl" else "cpu")

    @property
    def world_size(self) -> int:
        gx, gy, gz = self.grid
        return gx * gy * gz
