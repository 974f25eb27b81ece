"""What a run shows: one line per epoch, a JSON-lines log of the same, and a closing summary."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from gtool.terminal import plain_console
from gtool.trainer.comm.timing import PHASES
from gtool.units import human_bytes

ACCURACY, ROCAUC = "accuracy", "rocauc"
METRIC_NAMES = {ACCURACY: "accuracy", ROCAUC: "ROC-AUC"}
"""How the summary names each metric `gtool train` evaluates."""


@dataclass
class EpochRecord:
    """One training epoch as rank 0 saw it; accuracies only on evaluated epochs. Its phases (spmm, dense,
    comm, reshard, other: `comm.timing.PHASES`) add up to `seconds`."""

    epoch: int
    loss: float
    seconds: float
    spmm: float
    dense: float
    comm: float
    accuracy: dict[str, float] | None = None
    eval_seconds: float = 0.0
    comm_bytes: list[dict[str, dict[str, int]]] | None = None
    """Per rank, the bytes of its collectives in the training step by group and kind (CommBytes)."""
    step_losses: list[list[float | None]] | None = None
    """Mini-batch: per replica, the loss of its step in each round (None: no step in that round)."""
    sample_wait: float = 0.0
    """Mini-batch: seconds the steps waited for their sample's cut (the rest was hidden behind steps)."""
    sample_cut: float = 0.0
    """Mini-batch: seconds the cuts took, mostly in the background beside the steps (on the same cores)."""
    read_bytes: int = 0
    """Mini-batch with --features-from store: the feature bytes read from the store for the epoch and its
    evaluation, over every rank."""
    read_seconds: float = 0.0
    """Mini-batch with --features-from store: the longest seconds a rank's reads took (behind the steps)."""
    evaluation: str = "full"
    """How the scores were evaluated: full (the full graph) or sampled (summed over batches, --eval)."""
    rocauc: dict[str, float] | None = None
    """Multi-label stores: ROC-AUC per split on evaluated epochs (in place of `accuracy`)."""
    reshard: float = 0.0
    """Seconds moving residuals to their output's layout (their all-to-alls' waits counted in comm)."""
    other: float = 0.0
    """Seconds in no other phase: autograd's own passes, Python, the optimizer's bookkeeping."""

    @property
    def scores(self) -> dict[str, float] | None:
        """The evaluated metric per split (accuracy, or ROC-AUC), None on epochs not evaluated."""
        return self.rocauc if self.rocauc is not None else self.accuracy

    def set_scores(self, metric: str, scores: dict[str, float]) -> None:
        """Record an evaluation of `metric` (accuracy or rocauc)."""
        if metric == ROCAUC:
            self.rocauc = scores
        else:
            self.accuracy = scores

    def as_json(self) -> dict[str, Any]:
        """The `--log` line: every field, ROC-AUC as the keys train_rocauc, valid_rocauc, test_rocauc."""
        content = asdict(self)
        rocauc = content.pop("rocauc")
        if rocauc is not None:
            content.update({f"{name}_rocauc": value for name, value in rocauc.items()})
        return content

    def line(self) -> str:
        text = f"epoch {self.epoch:4d}  loss {self.loss:.4f}"
        if self.accuracy is not None:
            text += "".join(f"  {name} {value:.4f}" for name, value in self.accuracy.items())
        if self.rocauc is not None:
            text += "".join(f"  {name}_rocauc {value:.4f}" for name, value in self.rocauc.items())
        if self.scores is not None and self.evaluation == "sampled":
            text += " (sampled)"
        split = ", ".join(f"{name} {getattr(self, name):.3f}" for name in PHASES)
        if self.step_losses is not None:
            split += f", sampling {self.sample_wait:.3f} (cuts {self.sample_cut:.3f})"
        if self.read_bytes:
            split += f", read {human_bytes(self.read_bytes)} in {self.read_seconds:.3f}"
        return text + f"  time {self.seconds:.3f}s ({split})"


@dataclass
class History:
    """The best validation score so far, its epoch and the test score then, the training and evaluation
    seconds so far, and when the validation score first reached `target` (kept in checkpoints)."""

    best_valid: float | None = None
    best_epoch: int = 0
    test_at_best: float | None = None
    train_seconds: float = 0.0
    """Seconds of training epochs so far, evaluation excluded."""
    eval_seconds: float = 0.0
    evaluations: int = 0
    target: float | None = None
    target_epoch: int | None = None
    target_seconds: float | None = None
    """train_seconds at the end of target_epoch: the training time to reach the target."""

    def aim(self, target: float | None) -> None:
        """Track `target` (--target-accuracy); a resumed run's record of another target is dropped."""
        if target != self.target:
            self.target, self.target_epoch, self.target_seconds = target, None, None

    def update(self, record: EpochRecord) -> None:
        self.train_seconds += record.seconds
        scores = record.scores
        if scores is None:
            return
        self.eval_seconds += record.eval_seconds
        self.evaluations += 1
        valid = scores["valid"]
        if math.isnan(valid):  # no validation nodes (or no validation task with both classes)
            return
        if self.best_valid is None or valid > self.best_valid:
            self.best_valid = valid
            self.best_epoch = record.epoch
            self.test_at_best = scores["test"]
        if self.target is not None and self.target_epoch is None and valid >= self.target:
            self.target_epoch, self.target_seconds = record.epoch, self.train_seconds

    @property
    def eval_seconds_per_round(self) -> float:
        return self.eval_seconds / self.evaluations if self.evaluations else math.nan


@dataclass
class Summary:
    """A finished run."""

    history: History
    epochs: list[EpochRecord] = field(default_factory=list)
    peak_memory_mb: list[dict[str, float]] = field(default_factory=list)
    metric: str = ACCURACY
    checkpoint: str | None = None
    """Where the run's last checkpoint was written (with --checkpoint)."""
    evaluation: str = "full"
    """How the scores were evaluated (EpochRecord.evaluation)."""

    @property
    def mean_epoch_seconds(self) -> float:
        """Mean epoch time, leaving out this process's first epoch (warm-up) when there are others."""
        times = [r.seconds for r in self.epochs]
        times = times[1:] if len(times) > 1 else times
        return sum(times) / len(times) if times else math.nan

    def mean_phase_seconds(self, phase: str) -> float:
        values = [getattr(r, phase) for r in self.epochs]
        values = values[1:] if len(values) > 1 else values
        return sum(values) / len(values) if values else math.nan

    def as_json(self) -> dict[str, Any]:
        return {
            "best_valid": self.history.best_valid,
            "best_epoch": self.history.best_epoch,
            "test_at_best_valid": self.history.test_at_best,
            "metric": self.metric,
            "evaluation": self.evaluation,
            "train_seconds": self.history.train_seconds,
            "eval_seconds_per_round": self.history.eval_seconds_per_round,
            "target_accuracy": self.history.target,
            "target_epoch": self.history.target_epoch,
            "target_train_seconds": self.history.target_seconds,
            "mean_epoch_seconds": self.mean_epoch_seconds,
            **{f"mean_{phase}_seconds": self.mean_phase_seconds(phase) for phase in PHASES},
            "peak_memory_mb": self.peak_memory_mb,
            "checkpoint": self.checkpoint,
        }


class Reporter:
    """Prints and logs on rank 0 (`active`); does nothing elsewhere. A `quiet` one prints only the summary
    (its log still has every epoch)."""

    def __init__(self, active: bool, log: str | None, append: bool, quiet: bool = False):
        self.active = active
        self.shows_progress = active and not quiet
        self.console = plain_console(soft_wrap=True)
        self.log = Path(log) if log and active else None
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            if not append:
                self.log.write_text("")

    def message(self, text: str) -> None:
        if self.shows_progress:
            self.console.print(text)

    def _append(self, content: dict[str, Any]) -> None:
        if self.log is not None:
            with open(self.log, "a") as handle:
                handle.write(json.dumps(content) + "\n")

    def epoch(self, record: EpochRecord) -> None:
        if self.shows_progress:
            self.console.print(record.line())
        if self.active:
            self._append(record.as_json())

    def summary(self, summary: Summary) -> None:
        if not self.active:
            return
        self._append({"summary": summary.as_json()})
        history = summary.history
        table = Table(title="gtool train", show_header=False)
        name = METRIC_NAMES[summary.metric] + (" (sampled)" if summary.evaluation == "sampled" else "")
        if history.best_valid is None:
            evaluated = any(record.scores is not None for record in summary.epochs)
            nothing = (
                "no validation task has both classes" if summary.metric == ROCAUC else "no validation nodes"
            )
            why = f"the store has {nothing}" if evaluated else "no evaluation yet"
            table.add_row(f"best validation {name}", f"n/a ({why})")
        else:
            best = f"{history.best_valid:.4f} (epoch {history.best_epoch})"
            table.add_row(f"best validation {name}", best)
            table.add_row(f"test {name} at best validation", f"{history.test_at_best:.4f}")
        split = ", ".join(f"{p} {summary.mean_phase_seconds(p):.3f}" for p in PHASES)
        timed = f"{summary.mean_epoch_seconds:.3f}s ({split})" if summary.epochs else "n/a (no epoch trained)"
        table.add_row("mean epoch time", timed)
        if summary.checkpoint is not None:
            table.add_row("checkpoint", Text(summary.checkpoint, overflow="fold"))  # a path, as it is, whole
        for rank, memory in enumerate(summary.peak_memory_mb):
            text = f"{memory['rss']:.0f} MB RSS" + (f", {memory['gpu']:.0f} MB GPU" if memory["gpu"] else "")
            table.add_row(f"peak memory rank {rank}", text)
        self.console.print(table)
        if history.target is not None:
            self.console.print(target_line(summary))


def target_line(summary: Summary) -> str:
    """The time to accuracy: training seconds to reach --target-accuracy (evaluation excluded, as
    ScaleGNN counts) and the evaluation seconds per round, or that the target was not reached."""
    history = summary.history
    aim = f"target validation {METRIC_NAMES[summary.metric]} {history.target:g}"
    rounds = f"evaluation {history.eval_seconds_per_round:.3f}s per round ({history.evaluations} rounds)"
    if history.target_epoch is None:
        best = "n/a" if history.best_valid is None else f"{history.best_valid:.4f}"
        last = summary.epochs[-1].epoch if summary.epochs else 0
        return f"{aim}: not reached in {last} epochs (best {best}); {rounds}"
    return (
        f"{aim}: reached at epoch {history.target_epoch} after {history.target_seconds:.3f}s of training "
        f"(evaluation excluded); {rounds}"
    )
