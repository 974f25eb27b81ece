"""RMSNorm with a learnable scale, ReLU, dropout and a residual add fused into one pass each way."""

from gtool.trainer.nn.fused.functions import rms_relu_dropout
from gtool.trainer.nn.fused.reference import rms_relu_dropout_reference

__all__ = ["rms_relu_dropout", "rms_relu_dropout_reference"]
