"""The distilled evaluation as a torch module: the twin of zero.distilled.kernels that learns its weights.

Its inputs are the kernels' own (zero.distilled.kernels.inputs_batch: each view's 128 features, the side to
move's view first, and the bucket by phase); W1 is used through the rounding to 1/QA the kernels' int16
accumulator applies (a straight-through estimate: the gradient passes as if there were no rounding), and
`clamp_` keeps W1 and B1 in the range that accumulator holds. Everything above the accumulator is the
kernels' float32 arithmetic, so that a trained module's answer is the kernels' answer up to the order of
float additions.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from zero.distilled import kernels as dk
from zero.distilled.model import DistilledEval, DistilledShape


class DistilledNet(nn.Module):
    def __init__(self, shape: DistilledShape = DistilledShape()) -> None:
        super().__init__()
        self.shape = shape
        self.weights = nn.ParameterDict({name: nn.Parameter(torch.zeros(dims))
                                         for name, dims in shape.shapes().items()})

    @classmethod
    def from_eval(cls, evaluation: DistilledEval) -> "DistilledNet":
        net = cls(evaluation.shape)
        with torch.no_grad():
            for name, param in net.weights.items():
                param.copy_(torch.from_numpy(evaluation.weights[name]))
        return net

    def to_eval(self, meta: dict | None = None) -> DistilledEval:
        return DistilledEval(self.shape, {name: p.detach().cpu().numpy().astype(np.float32).copy()
                                          for name, p in self.weights.items()}, dict(meta or {}))

    def forward(self, inputs: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        """inputs [N, 2, INPUTS] (0 or 1), bucket [N] -> the side to move's logit [N]."""
        w = self.weights
        w1 = w["w1"] + (torch.round(w["w1"] * dk.QA) / dk.QA - w["w1"]).detach()
        b1 = w["b1"] + (torch.round(w["b1"] * dk.QA) / dk.QA - w["b1"]).detach()
        acc = inputs.float() @ w1 + b1  # [N, 2, A]
        x = acc.clamp(0.0, 1.0).flatten(1)  # [side to move's view, opponent's]
        y1 = self._layer(x, "w2", "b2", bucket).clamp(0.0, 1.0)
        y2 = self._layer(y1, "w3", "b3", bucket).clamp(0.0, 1.0)
        return self._layer(y2, "w4", "b4", bucket)[:, 0]

    def _layer(self, x: torch.Tensor, weight: str, bias: str, bucket: torch.Tensor) -> torch.Tensor:
        """Every bucket's layer in one product, then each position's bucket's outputs."""
        w, b = self.weights[weight], self.weights[bias]  # [K, out, in], [K, out]
        k, out, _ = w.shape
        every = (x @ w.reshape(k * out, -1).T + b.reshape(-1)).view(-1, k, out)
        return every[torch.arange(len(x)), bucket]

    @torch.no_grad()
    def clamp_(self) -> None:
        """Keep the first layer within what the int16 accumulator holds (after every step)."""
        self.weights["w1"].clamp_(-dk.MAX_W1, dk.MAX_W1)
        self.weights["b1"].clamp_(-dk.MAX_B1, dk.MAX_B1)


def batch_inputs(black, white, kings, black_to_move, buckets: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The module's inputs of arrays of positions (the kernels' inputs_batch)."""
    n = len(black)
    out = np.zeros((n, 2, dk.INPUTS), dtype=np.uint8)
    bucket = np.zeros(n, dtype=np.int64)
    dk.inputs_batch(np.asarray(black, np.int64), np.asarray(white, np.int64), np.asarray(kings, np.int64),
                    np.asarray(black_to_move, np.bool_), buckets, out, bucket)
    return torch.from_numpy(out), torch.from_numpy(bucket)
