"""Quantization-aware training: the network learns while seeing the int8 model's rounding.

zero.net.quantized derives the int8 model the CPU players run from a float32 checkpoint: the tower's
convolutions (and the heads' 1x1 convolutions) get int8 weights, one scale per output channel, and the
activations between them uint8 values over a calibrated range. A network trained in float32 alone meets that
rounding only at play time, where it changed the float32 network's move in 1.24 % of the OCA test positions
for link 5 (benchmarks/RESULTS.md). Here every training step also runs the network with that rounding
simulated (weights rounded per output channel, symmetric, as the int8 recipe does; activations rounded per
tensor over a moving range of what the batches produce), with gradients passing straight through the
rounding. The loss is the mean of the float and the rounded passes, so that both precisions learn the same
targets and their choices stay together. The checkpoint stays float32; the int8 model is derived from it as
always. Only the convolutions' weights are seen rounded: batch normalisation folds into them per output
channel, which a per-channel scale absorbs exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

from zero.net.network import NetOutput, PolicyValueNet, SquareConv

WEIGHT_LEVELS = 127  # int8 symmetric: -127 .. 127, as ONNX Runtime's per-channel weights
ACTIVATION_LEVELS = 255  # uint8
RANGE_MOMENTUM = 0.01  # how fast an activation's range follows the batches


def rounded_weight(weight: torch.Tensor) -> torch.Tensor:
    """The weight as the int8 model holds it: rounded to 255 levels per output channel, symmetric about 0;
    the gradient passes straight through."""
    scale = (weight.detach().abs().amax(dim=tuple(range(1, weight.ndim))) / WEIGHT_LEVELS).clamp_min(1e-12)
    zero = torch.zeros(weight.shape[0], dtype=torch.int32, device=weight.device)
    return torch.fake_quantize_per_channel_affine(weight, scale.float(), zero, 0, -WEIGHT_LEVELS, WEIGHT_LEVELS)


class ActivationRange:
    """The moving range of one activation tensor, and that tensor rounded to 256 levels over it."""

    def __init__(self) -> None:
        self.low: float | None = None
        self.high = 0.0

    def observe(self, x: torch.Tensor) -> None:
        """Widen or narrow the range toward this batch's (the first batch sets it)."""
        low, high = min(0.0, x.min().item()), max(0.0, x.max().item())
        if self.low is None:
            self.low, self.high = low, high
        else:
            self.low += RANGE_MOMENTUM * (low - self.low)
            self.high += RANGE_MOMENTUM * (high - self.high)

    def rounded(self, x: torch.Tensor) -> torch.Tensor:
        scale = max((self.high - self.low) / ACTIVATION_LEVELS, 1e-12)
        zero_point = min(ACTIVATION_LEVELS, max(0, round(-self.low / scale)))
        return torch.fake_quantize_per_tensor_affine(x, scale, zero_point, 0, ACTIVATION_LEVELS)


class RoundedPass:
    """The network's forward pass with the int8 model's rounding simulated (see the module doc). Calling it
    runs that pass; the network's own forward stays float32."""

    def __init__(self, net: PolicyValueNet) -> None:
        self.net = net
        self.active = False
        self.ranges: dict[str, ActivationRange] = {}
        # The tensors the int8 graph rounds, in its order: the stem's output, in each block the first
        # convolution's (after its ReLU), the second's (before the sum) and the block's, and the heads'
        # convolutions'.
        points = {"stem": (net.stem, False)}
        for i, block in enumerate(net.tower):
            points.update({f"tower.{i}.bn1": (block.bn1, True), f"tower.{i}.bn2": (block.bn2, False),
                           f"tower.{i}": (block, False)})
        points.update({"policy_conv": (net.policy_conv, False), "value_conv": (net.value_conv, False)})
        for name, (module, relu) in points.items():
            self.ranges[name] = ActivationRange()
            module.register_forward_hook(self._hook(name, relu))
        # The products the int8 model rounds: the tower's convolutions (the square tower's gather products)
        # and the heads' 1x1 ones. The stem's reads the exact 0/1 planes and stays float32 in the int8 model.
        products = [module for module in net.modules() if isinstance(module, torch.nn.Conv2d)]
        products += [module.mix for module in net.modules() if isinstance(module, SquareConv)]
        products += [net.policy_conv[0], net.value_conv[0]]
        ids = {id(module.weight) for module in products} - {id(p) for p in net.stem.parameters()}
        self.weights = [name for name, p in net.named_parameters() if id(p) in ids]

    def _hook(self, name: str, relu: bool):
        def hook(module, inputs, output):
            if not self.active:
                return None
            if relu:
                # The int8 graph rounds after the ReLU that follows; a ReLU of its output changes nothing.
                output = F.relu(output)
            self.ranges[name].observe(output.detach())
            return self.ranges[name].rounded(output)
        return hook

    def __call__(self, planes: torch.Tensor) -> NetOutput:
        params = dict(self.net.named_parameters())
        rounded = {name: rounded_weight(params[name]) for name in self.weights}
        self.active = True
        try:
            return functional_call(self.net, rounded, (planes,))
        finally:
            self.active = False
