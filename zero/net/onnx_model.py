"""The network as an ONNX graph, and ONNX Runtime sessions over such graphs (float32 or int8, CPU).

The graph's input is `planes` (float32 [N, NUM_PLANES, 8, 8], any N) and its outputs are the policy logits,
the win/draw/loss probabilities and, for a network with that head, the plies left: what the search asks
for, so a session's answers need no further work.
"""

from __future__ import annotations

import copy
import io
import itertools
import warnings

import torch

from zero.net.encoding import NUM_PLANES
from zero.net.network import PolicyValueNet, SquareConv, SquareNorm


class _Heads(torch.nn.Module):
    """The network's outputs as a plain tuple (policy logits, WDL probabilities[, plies left])."""

    def __init__(self, net: PolicyValueNet) -> None:
        super().__init__()
        self.net = net

    def forward(self, planes: torch.Tensor):
        out = self.net(planes)
        wdl = torch.softmax(out.wdl_logits, dim=1)
        return (out.policy_logits, wdl) if out.moves_left is None else (out.policy_logits, wdl, out.moves_left)


def folded_square_norms(net: PolicyValueNet) -> PolicyValueNet:
    """A copy of the network in inference mode with each square tower batch norm folded into the product
    before it (a scale of its weights and a bias), as the exporter folds a board tower's into its
    convolution: otherwise the int8 model dequantizes and quantizes again around each one."""
    net = copy.deepcopy(net).eval()
    for module in list(net.modules()):
        for (product_name, product), (name, norm) in itertools.pairwise(list(module.named_children())):
            if not isinstance(norm, SquareNorm):
                continue
            linear = product.mix if isinstance(product, SquareConv) else product
            scale = norm.weight / torch.sqrt(norm.running_var + norm.eps)
            fused = torch.nn.Linear(linear.in_features, linear.out_features)
            with torch.no_grad():
                fused.weight.copy_(linear.weight * scale[:, None])
                fused.bias.copy_(norm.bias - norm.running_mean * scale)
            if isinstance(product, SquareConv):
                product.mix = fused
            else:
                setattr(module, product_name, fused)
            setattr(module, name, torch.nn.Identity())
    return net


def export_onnx(net: PolicyValueNet) -> bytes:
    """The network (in inference mode, any batch size) as an ONNX graph; ImportError without the onnx
    package. The TorchScript exporter takes a fraction of a second here where the dynamo one takes seconds,
    and it folds each batch norm into its convolution (folded_square_norms does the square tower's)."""
    heads = _Heads(folded_square_norms(net.cpu()))
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice, and tracer warnings
        warnings.simplefilter("ignore")
        torch.onnx.export(heads, (torch.zeros(1, NUM_PLANES, 8, 8),), buffer, input_names=["planes"],
                          dynamic_axes={"planes": {0: "batch"}}, dynamo=False, opset_version=18)
    return buffer.getvalue()


def onnx_session(graph: bytes, threads: int | None = None):
    """An ONNX Runtime session over a serialized graph on the CPU, with `threads` threads (torch's thread
    count when None); ImportError without onnxruntime. A graph that does not load raises onnxruntime's
    own exception."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
