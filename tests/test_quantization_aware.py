"""Quantization-aware training: the rounded pass simulates the int8 model the players run (closer to it than
the float pass) and leaves the float network and its checkpoint format untouched (tests/test_learning.py
trains through it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from train.learner.quantization_aware import WEIGHT_LEVELS, RoundedPass, rounded_weight
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.net.network import NetworkConfig, PolicyValueNet

SMALL = NetworkConfig(blocks=2, channels=16, policy_channels=4, value_channels=2, value_hidden=16)


def test_a_rounded_weight_lies_on_its_channels_grid_and_passes_the_gradient_through():
    torch.manual_seed(0)
    weight = (torch.randn(8, 4, 3, 3) * torch.arange(1, 9).view(8, 1, 1, 1)).requires_grad_()
    rounded = rounded_weight(weight)
    scale = weight.detach().abs().amax(dim=(1, 2, 3), keepdim=True) / WEIGHT_LEVELS
    steps = rounded.detach() / scale
    np.testing.assert_allclose(steps.numpy(), np.round(steps.numpy()), atol=1e-3)
    # Each channel keeps its largest weight, and no weight moves by more than half a step.
    np.testing.assert_allclose(rounded.detach().abs().amax(dim=(1, 2, 3)), weight.detach().abs().amax(dim=(1, 2, 3)),
                               rtol=1e-6)
    assert bool(((rounded.detach() - weight.detach()).abs() <= scale / 2 + 1e-7).all())
    assert not torch.equal(rounded.detach(), weight.detach())
    rounded.sum().backward()
    assert torch.equal(weight.grad, torch.ones_like(weight))


def _calibration(net: PolicyValueNet, seed: int) -> np.ndarray:
    from zero.net.onnx_model import export_onnx, onnx_session
    from zero.net.quantized import calibration_planes

    return calibration_planes(onnx_session(export_onnx(net)), count=1024, seed=seed, games=32)


def test_the_rounded_pass_reproduces_the_int8_model_at_its_ranges():
    """Given the activation ranges the int8 model was calibrated to, the rounded pass computes what the int8
    model computes, far closer than the float pass does: the same weights rounded the same way, the same
    tensors rounded (the shipped network; in training the ranges follow the batches instead)."""
    pytest.importorskip("onnxruntime")
    import onnx
    from onnx import numpy_helper

    from zero.net.onnx_model import onnx_session
    from zero.net.quantized import quantize

    net = load_checkpoint(DEFAULT_CHECKPOINT).build_network().eval()
    graph = quantize(net)
    model = onnx.load_from_string(graph)
    constants = {c.name: numpy_helper.to_array(c) for c in model.graph.initializer}
    rounded_pass = RoundedPass(net)
    # The graph's first quantized tensors are the rounded pass's, in its order (then come the heads' copies).
    quantizers = [node for node in model.graph.node if node.op_type == "QuantizeLinear"]
    for activation, node in zip(rounded_pass.ranges.values(), quantizers):
        scale, zero_point = float(constants[node.input[1]]), int(constants[node.input[2]])
        activation.low, activation.high = -zero_point * scale, (255 - zero_point) * scale
    planes = _calibration(net, seed=2)
    with torch.no_grad(), pytest.MonkeyPatch.context() as patch:
        patch.setattr("train.learner.quantization_aware.RANGE_MOMENTUM", 0.0)  # keep the int8 model's ranges
        float_out, rounded_out = net(torch.from_numpy(planes)), rounded_pass(torch.from_numpy(planes))
    int8_logits, int8_wdl = onnx_session(graph).run(None, {"planes": planes})[:2]

    def distance(out) -> tuple[float, float]:
        return (float(np.abs(out.policy_logits.numpy() - int8_logits).mean()),
                float(np.abs(torch.softmax(out.wdl_logits, 1).numpy() - int8_wdl).mean()))

    (float_policy, float_wdl), (rounded_policy, rounded_wdl) = distance(float_out), distance(rounded_out)
    assert float_policy > 0 and rounded_policy < 0.5 * float_policy, (float_policy, rounded_policy)
    assert rounded_wdl < 0.5 * float_wdl, (float_wdl, rounded_wdl)


def test_the_float_network_and_its_weights_are_untouched_by_the_rounded_pass():
    torch.manual_seed(0)
    net = PolicyValueNet(SMALL).eval()
    keys = set(net.state_dict())
    planes = torch.from_numpy(_calibration(net, seed=1)[:64])
    with torch.no_grad():
        before = net(planes)
        rounded = RoundedPass(net)(planes)
        after = net(planes)
    assert torch.equal(before.policy_logits, after.policy_logits) and torch.equal(before.wdl_logits, after.wdl_logits)
    assert not torch.equal(rounded.policy_logits, before.policy_logits)
    assert set(net.state_dict()) == keys  # the checkpoint format does not change


def test_the_rounded_pass_rounds_every_product_the_int8_model_rounds_in_either_tower():
    # The int8 model keeps the stem in float32 and rounds the tower's products and the heads' 1x1 ones: for
    # the square tower those are the gathers' matrix products, not convolutions.
    for tower in ("board", "squares"):
        net = PolicyValueNet(NetworkConfig(**{**SMALL.to_dict(), "tower": tower}))
        rounded = set(RoundedPass(net).weights)
        product = "mix.weight" if tower == "squares" else "weight"
        assert {f"tower.{b}.conv{c}.{product}" for b in range(SMALL.blocks) for c in (1, 2)} < rounded
        assert {"policy_conv.0.weight", "value_conv.0.weight"} < rounded
        assert not any(name.startswith("stem.") or "_fc." in name for name in rounded)
