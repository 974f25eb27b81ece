"""Dropout from counter-based masks: decisions are a function of global coordinates, never drawn."""

from gtool.trainer.nn.dropout.backends import cuda_notice
from gtool.trainer.nn.dropout.functions import NO_DROPOUT, dropout, relu_dropout
from gtool.trainer.nn.dropout.masks import MaskSpec, RowsBlock, keep_mask

__all__ = ["NO_DROPOUT", "MaskSpec", "RowsBlock", "cuda_notice", "dropout", "keep_mask", "relu_dropout"]
