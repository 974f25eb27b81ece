"""Adam and AdamW over this rank's parameter parts, with weight decay on every layer or the first only.

Written out here rather than taken from torch.optim, whose first use imports torch._dynamo (seconds of
start-up in every rank). The arithmetic follows torch.optim's single-tensor implementation, and the
state is plain tensors, which is all a checkpoint needs.
"""

from __future__ import annotations

import torch

from gtool.trainer.config import TrainConfig

BETAS = (0.9, 0.999)
EPS = 1e-8


class Adam:
    """Adam (L2 decay added to the gradient) or, with `decoupled`, AdamW (weights decayed directly).

    `groups` pairs parameters with their weight decay.
    """

    def __init__(self, groups: list[tuple[list[torch.Tensor], float]], lr: float, decoupled: bool):
        self.groups = groups
        self.lr = lr
        self.decoupled = decoupled
        self.params = [p for params, _ in groups for p in params]
        self.step_count = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        self.step_count += 1
        beta1, beta2 = BETAS
        step_size = self.lr / (1 - beta1**self.step_count)
        bias_correction2_sqrt = (1 - beta2**self.step_count) ** 0.5
        index = 0
        for params, decay in self.groups:
            for param in params:
                exp_avg, exp_avg_sq = self.exp_avg[index], self.exp_avg_sq[index]
                index += 1
                grad = param.grad
                if grad is None:
                    continue
                if decay and self.decoupled:
                    param.mul_(1 - self.lr * decay)
                elif decay:
                    grad = grad.add(param, alpha=decay)
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(EPS)
                param.addcdiv_(exp_avg, denom, value=-step_size)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The optimizer state as named tensors."""
        state = {"step": torch.tensor(self.step_count)}
        for i, (avg, avg_sq) in enumerate(zip(self.exp_avg, self.exp_avg_sq, strict=True)):
            state[f"exp_avg.{i}"] = avg
            state[f"exp_avg_sq.{i}"] = avg_sq
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore a state saved by `state_dict` of an optimizer over parameters of the same shapes."""
        self.step_count = int(state["step"])
        for i, (avg, avg_sq) in enumerate(zip(self.exp_avg, self.exp_avg_sq, strict=True)):
            avg.copy_(state[f"exp_avg.{i}"])
            avg_sq.copy_(state[f"exp_avg_sq.{i}"])


def build_optimizer(groups: tuple[list, list, list], config: TrainConfig) -> Adam:
    """Adam or AdamW with `config.optimizer.lr` over the `groups` of `models.network.decay_groups`: the
    first layer's weight (or its part), the later matrices, and the biases and norm scales (never decayed).

    `--weight-decay-first-only` decays that first parameter alone (Kipf & Welling). Learned features
    count as a later layer: decayed only when every layer is.
    """
    first, later, vectors = groups
    later_decay = 0.0 if config.optimizer.weight_decay_first_only else config.optimizer.weight_decay
    decayed = [(first, config.optimizer.weight_decay), (later, later_decay)]
    never = [(vectors, 0.0)] if vectors else []
    return Adam(decayed + never, config.optimizer.lr, decoupled=config.optimizer.algorithm == "adamw")
