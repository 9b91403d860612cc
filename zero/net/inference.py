"""Running the network on positions: a batched evaluator (numpy in, numpy out) and the raw-policy player.

The Evaluator picks CUDA when torch sees a GPU and then runs under bf16 autocast (the outputs are returned
as float32). On the CPU it runs through ONNX Runtime when that is installed (the network is exported once,
when the evaluator is made): at one thread float32 evaluates the shipped network 1.4x to 3.7x as fast as
torch eager (batches 256 to 1), and as fast as OpenVINO or faster at the batch sizes a search sends
(benchmarks/inference_bench.py, benchmarks/RESULTS.md). torch eager is the fallback, and the choice is
automatic ("auto"); "torch" or "onnxruntime" force one. Gradients are never tracked.

Precision: an evaluator made from a checkpoint runs, on the CPU, the checkpoint's int8 model by default
(zero.net.quantized: about 1.8x float32's speed, derived once and cached beside the checkpoint); training,
gating and GPUs keep float32 (bf16 autocast on a GPU), and precision="float32" asks for it anywhere;
precision="bfloat16" runs torch under bf16 autocast on the CPU too (how a GPU computes, rehearsed there).

Near ties. int8's rounding noise is spread over the whole tower, and where the network's two best legal
moves lie within a few hundredths of a logit it picks the other one about half the time: int8 alone keeps
float32's move in about 98 % of positions, and no int8 recipe tried reached 99 % (benchmarks/RESULTS.md).
So "int8" answers those positions again with the float32 network (their legal moves read back from the
planes, zero.net.encoding.legal_logit_gaps): a few percent of the positions, for the judgement of float32
everywhere. "int8-raw" is the int8 model's answers alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from zero.net.checkpoint import DEFAULT_CHECKPOINT, Checkpoint, load_checkpoint
from zero.net.encoding import NUM_PLANES, encode_game, legal_logit_gaps, move_action
from zero.net.network import PolicyValueNet
from zero.net.onnx_model import export_onnx, onnx_session
from zero.rules.game import Game, Move
from zero.run.config import INFERENCE_PRECISIONS

log = logging.getLogger(__name__)

BACKENDS = ("auto", "torch", "onnxruntime")
# The threads of an evaluator that is sent a few positions a call (a single game's search, the raw-policy
# player): at such batches more threads a call only add synchronisation, and a timed search at 0.1 s a move
# made half the simulations with two on an idle 2-core machine (benchmarks/RESULTS.md).
SMALL_BATCH_THREADS = 1
# Positions whose best two legal logits in the int8 model lie closer than this are answered in float32.
NEAR_TIE_LOGITS = 0.06


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Evaluator:
    """Evaluates batches of encoded positions with one network on one device (see the module doc for the
    backend). The network's weights are read when the evaluator is made."""

    def __init__(self, net: PolicyValueNet, device: str | torch.device | None = None, backend: str = "auto",
                 precision: str = "float32", source: Path | None = None, threads: int | None = None) -> None:
        """`threads`: ONNX Runtime's threads a call (None: torch's count, the machine's cores by default).
        A caller that sends a few positions a call wants 1 (SMALL_BATCH_THREADS)."""
        if backend not in BACKENDS:
            raise ValueError(f"inference backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if precision not in INFERENCE_PRECISIONS:
            raise ValueError(f"inference precision must be one of {', '.join(INFERENCE_PRECISIONS)}, got {precision!r}")
        self.device = torch.device(device) if device is not None else default_device()
        self.net = net.to(self.device).eval()
        self.config = net.config
        # Whether `predict` answers the plies left (selfplay.tree_search.evaluators: a search that weighs them
        # asks for them only from an evaluator that says it has them).
        self.plies_left_head = bool(net.config.moves_left_head)
        self._autocast = precision == "bfloat16" or (precision == "auto" and self.device.type == "cuda")
        self._session = None
        if backend == "onnxruntime" and (self.device.type != "cpu" or precision == "bfloat16"):
            raise ValueError("the onnxruntime backend runs float32 or int8 on the CPU")
        if precision.startswith("int8") and (self.device.type != "cpu" or backend == "torch"):
            raise ValueError("int8 inference runs on the CPU through onnxruntime")
        if backend == "onnxruntime" or (backend == "auto" and self.device.type == "cpu" and not self._autocast):
            try:
                self._session = onnx_session(self._graph(precision, source), threads)
            except ImportError as exc:
                if backend == "onnxruntime" or precision.startswith("int8"):
                    raise ValueError(f"the onnxruntime backend needs onnxruntime and onnx installed ({exc})") from None
                log.debug("onnxruntime not available (%s): torch eager on the CPU", exc)
        self.backend = "onnxruntime" if self._session is not None else "torch"
        if self._session is not None:
            self.precision = precision if precision in ("float32", "int8-raw") else "int8"
        else:
            self.precision = "bfloat16" if self._autocast else "float32"
        self._near_tie_session = onnx_session(export_onnx(self.net), threads) if self.precision == "int8" else None
        self.positions = 0  # positions the int8 model answered, and of those the near ties answered in float32
        self.near_ties = 0

    def _graph(self, precision: str, source: Path | None) -> bytes:
        """The ONNX graph to run: the int8 model (zero.net.quantized: cached beside `source`, the checkpoint the
        network came from, when there is one) unless float32 is asked for. ImportError without onnxruntime."""
        if precision == "float32":
            return export_onnx(self.net)
        from zero.net.quantized import int8_graph

        return int8_graph(Checkpoint(self.net.config, self.net.state_dict(), path=source))

    @classmethod
    def from_checkpoint(cls, path: str | Path = DEFAULT_CHECKPOINT, device: str | torch.device | None = None,
                        precision: str = "auto", threads: int | None = None) -> "Evaluator":
        """Evaluator over a checkpoint's network (raises zero.net.checkpoint.CheckpointError for a bad file). With
        precision "auto" the CPU runs the checkpoint's int8 model (see the module doc)."""
        return cls(load_checkpoint(path).build_network(), device, precision=precision, source=Path(path),
                   threads=threads)

    def evaluate(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """planes float32 [N, NUM_PLANES, 8, 8] -> (policy logits float32 [N, 1024] unmasked,
        win/draw/loss probabilities float32 [N, 3] for the side to move)."""
        logits, wdl, _ = self.predict(planes)
        return logits, wdl

    def predict(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """evaluate's answer and the moves-left head's plies to the end of the game, float32 [N] (None for a
        network without that head)."""
        if planes.ndim != 4 or planes.shape[1:] != (NUM_PLANES, 8, 8):
            raise ValueError(f"expected planes of shape [N, {NUM_PLANES}, 8, 8], got {planes.shape}")
        if self._session is not None:
            planes = np.ascontiguousarray(planes, dtype=np.float32)
            outputs = self._session.run(None, {"planes": planes})
            if self._near_tie_session is not None:
                self._answer_near_ties_in_float32(planes, outputs)
            return outputs[0], outputs[1], outputs[2] if len(outputs) > 2 else None
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(planes, dtype=np.float32)).to(self.device, non_blocking=True)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self._autocast):
                out = self.net(x)
            policy = out.policy_logits.float().cpu().numpy()
            wdl = torch.softmax(out.wdl_logits.float(), dim=1).cpu().numpy()
            moves_left = None if out.moves_left is None else out.moves_left.float().cpu().numpy()
        return policy, wdl, moves_left

    def _answer_near_ties_in_float32(self, planes: np.ndarray, outputs: list[np.ndarray]) -> None:
        gaps = np.empty(len(planes), dtype=np.float32)
        legal_logit_gaps(planes, outputs[0], gaps)
        near = np.flatnonzero(gaps < NEAR_TIE_LOGITS)
        self.positions += len(planes)
        self.near_ties += len(near)
        if len(near):
            for output, again in zip(outputs, self._near_tie_session.run(None, {"planes": planes[near]})):
                output[near] = again


class PolicyPlayer:
    """Plays the legal move with the highest policy logit, without search.

    Two legal moves that share a from-to action share its logit; the tie between them is broken at random
    (seeded through reset), as the network cannot prefer one route over the other.
    """

    def __init__(self, evaluator: Evaluator, name: str = "policy", seed: int = 0) -> None:
        self.evaluator = evaluator
        self.name = name
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self.last_wdl: np.ndarray | None = None  # the value head's view of the last position it moved in

    @classmethod
    def from_checkpoint(cls, path: str | Path = DEFAULT_CHECKPOINT, seed: int = 0) -> "PolicyPlayer":
        return cls(Evaluator.from_checkpoint(path, device="cpu", threads=SMALL_BATCH_THREADS), name=f"policy:{path}",
                   seed=seed)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng([self.seed, seed])

    def choose(self, game: Game) -> Move:
        legal = game.legal_moves()
        if not legal:
            raise ValueError(f"no legal move in {game.position}")
        if len(legal) == 1:
            return legal[0]
        logits, wdl = self.evaluator.evaluate(encode_game(game)[None])
        self.last_wdl = wdl[0]
        btm = game.position.black_to_move
        scores = np.array([logits[0, move_action(m, btm)] for m in legal])
        best = np.flatnonzero(scores == scores.max())
        return legal[int(best[0] if len(best) == 1 else self._rng.choice(best))]
