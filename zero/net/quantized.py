"""The int8 model of a checkpoint: derived from it, cached beside it, never trusted when it does not match.

On a CPU the search spends nearly all its time in the network's forward pass, and the tower's convolutions
are nearly all of that. With ONNX Runtime's int8 convolutions (VNNI on this project's machines) the network
runs 1.5-1.6x as fast as in float32 at the batches search sends (benchmarks/RESULTS.md, "int8 inference").
The recipe: static quantization in QDQ form, int8 weights per output channel, uint8 activations calibrated
on positions from the network's own games; left in float32 are the stem convolution (the planes are exact
0/1 features, and its error would spread through the whole tower) and the fully connected heads with the
value softmax (the policy logits' near-ties decide the move, and the value is what the search backs up).
The rest of the tower is int8.

The checkpoint stays the one source of truth. The int8 model is cached beside it as `<checkpoint>.int8`:
one header line (a JSON object naming the weights' sha256, the network config, the encoding version, this
recipe's version, onnxruntime's version and the graph's sha256), then the ONNX graph. The cache is anyone's
file, so none of that is trusted on its own: it is read only when it is a regular file (no link followed, so
no FIFO blocks the read and no /dev/zero fills the memory) no larger than the network's int8 model can be, and
used only when its header names this checkpoint and this code, its graph hashes to its header, loads, and
answers like the checkpoint's float32 network on the fixed positions every loaded network is run on
(zero.net.checkpoint.probe_planes). Anything else is rebuilt, with one line saying why; a model that cannot
be written (a read-only directory) is kept in memory for the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from zero.net.checkpoint import ANSWERS, Checkpoint, probe_answers, probe_planes, weights_sha256
from zero.net.encoding import ENCODING_VERSION
from zero.net.onnx_model import export_onnx, onnx_session
from zero.net.sampled_games import sampled_positions
from zero.run.config import UnusableFile, atomic_write_bytes, disk_problem, notify, read_bounded

# Bump when the recipe below changes, so that every cached model is rebuilt with it.
RECIPE_VERSION = 1
CACHE_SUFFIX = ".int8"
MAGIC = "checkers-zero-int8"
CALIBRATION_POSITIONS = 4096
CALIBRATION_GAMES = 64  # games played at once for the calibration positions (one network batch a ply)
CALIBRATION_SEED = 20261125
CALIBRATION_BATCH = 256
# How far a cached model's answers on the probe positions may lie from the float32 network's, per answer: the
# mean difference at most AGREEMENT_SHARE of the float32 answers' mean distance from their own mean, plus a
# floor in the answer's unit (logits, probabilities, plies) for answers that hardly vary over the positions (a
# fresh network's). int8 rounding stayed within 0.08 of that spread on the shipped and on fresh networks;
# another network's graph lies at about 1 of it or beyond.
AGREEMENT_SHARE = 0.25
AGREEMENT_FLOOR = {"policy": 0.01, "value": 0.01, "plies-left": 0.5}


def cache_path(checkpoint_path: Path) -> Path:
    return checkpoint_path.with_name(checkpoint_path.name + CACHE_SUFFIX)


def cache_key(checkpoint: Checkpoint) -> dict:
    """Everything the int8 graph depends on; a cached graph is used only when its header says the same."""
    import onnxruntime

    return {"format": MAGIC, "weights_sha256": weights_sha256(checkpoint.state_dict),
            "net_config": checkpoint.net_config.to_dict(), "encoding_version": ENCODING_VERSION,
            "recipe": RECIPE_VERSION, "onnxruntime": onnxruntime.__version__}


def float_nodes(model) -> list[str]:
    """The nodes of an exported graph left in float32 (see the module doc): the stem, up to and with the first
    convolution (the one reading the planes; the square tower gathers the playable squares before its first
    product), the fully connected layers and the softmax. The square tower's products are Gemm nodes too, named
    by their module (`.../mix/Gemm`, zero.net.network.SquareConv): those are quantized. An ONNX graph lists its
    nodes in an order that runs."""
    nodes = list(model.graph.node)
    stem_end = next(i for i, node in enumerate(nodes) if node.op_type == "Conv" or "/mix/" in node.name)
    return [node.name for i, node in enumerate(nodes) if i <= stem_end or node.op_type == "Softmax"
            or (node.op_type == "Gemm" and "/mix/" not in node.name)]


def calibration_planes(session, count: int = CALIBRATION_POSITIONS, seed: int = CALIBRATION_SEED,
                       games: int = CALIBRATION_GAMES) -> np.ndarray:
    """Planes of `count` positions from the network's own games (zero.net.sampled_games): the kind the search
    meets, varied by the draws."""
    return sampled_positions(lambda planes: session.run(None, {"planes": planes})[0], count, seed, games)[1]


def quantize(net) -> bytes:
    """The int8 ONNX graph of a network (see the module doc for the recipe)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    graph = export_onnx(net)
    planes = calibration_planes(onnx_session(graph))

    class Positions(CalibrationDataReader):
        def __init__(self) -> None:
            self.start = 0

        def get_next(self) -> dict | None:
            if self.start >= len(planes):
                return None
            self.start += CALIBRATION_BATCH
            return {"planes": planes[self.start - CALIBRATION_BATCH:self.start]}

    model = onnx.load_from_string(graph)
    # The quantizer prints its progress on stdout (where the engine speaks its protocol) and warns through
    # the root logger about shape inference that this graph does not need: neither reaches the user.
    quiet_logs = logging.getLogger().level
    logging.getLogger().setLevel(logging.ERROR)
    try:
        with (tempfile.TemporaryDirectory(prefix="checkers-zero-int8-") as tmp,
              contextlib.redirect_stdout(io.StringIO())):
            out = Path(tmp) / "int8.onnx"
            # Percentile ranges (the extremes of 0.001 % of activations clipped) kept the float32 network's
            # move in more positions than min-max ranges did (benchmarks/RESULTS.md).
            quantize_static(model, out, Positions(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            nodes_to_exclude=float_nodes(model), calibrate_method=CalibrationMethod.Percentile,
                            extra_options={"CalibPercentile": 99.999})
            return out.read_bytes()
    finally:
        logging.getLogger().setLevel(quiet_logs)


def cache_size_limit(checkpoint: Checkpoint) -> int:
    """The most bytes a cache of this checkpoint's int8 model is read to. The graph holds each weight once, in
    four bytes at most (the stem and heads stay float32), with scales and nodes beside: 0.8 to 1.05 times the
    float32 weights' bytes as measured. Twice those and a mebibyte is more than any real cache, and bounds what
    a file that is none can make a process read."""
    return 2 * 4 * sum(tensor.numel() for tensor in checkpoint.state_dict.values()) + 2**20


def read_cached(path: Path, key: dict, limit: int) -> bytes:
    """The graph cached at path, when the file is a regular one of at most `limit` bytes, its header matches
    key and the graph its hash. Raises FileNotFoundError when there is none, UnusableFile when there is one that
    must be rebuilt."""
    data = read_bounded(path, limit, "any int8 model of this network")
    newline = data.find(b"\n")
    try:
        header = json.loads(data[:newline]) if newline > 0 else None
    except (UnicodeDecodeError, ValueError):
        header = None
    if not isinstance(header, dict) or header.get("format") != MAGIC:
        raise UnusableFile("damaged (no valid header)")
    graph = data[newline + 1:]
    stale = [name for name, value in key.items() if header.get(name) != value]
    if stale:
        raise UnusableFile(f"stale ({', '.join(stale)} changed)")
    if hashlib.sha256(graph).hexdigest() != header.get("graph_sha256"):
        raise UnusableFile("damaged (the graph does not match its sha256)")
    return graph


def check_answers(graph: bytes, checkpoint: Checkpoint) -> None:
    """Raises UnusableFile unless the graph loads and answers like the checkpoint's float32 network on the probe
    positions (AGREEMENT_SHARE): a header and a hash are only as good as whoever wrote them."""
    try:
        outputs = onnx_session(graph, threads=1).run(None, {"planes": probe_planes()})
        answers = [np.asarray(output, dtype=np.float32) for output in outputs]
    except Exception as exc:  # onnxruntime's own exceptions (InvalidProtobuf, Fail, ...) share no base class
        raise UnusableFile(f"a graph that does not load or run ({type(exc).__name__})") from None
    expected = [answer for answer in probe_answers(checkpoint.build_network()) if answer is not None]
    if [a.shape for a in answers] != [e.shape for e in expected]:
        raise UnusableFile("a graph of another network (its answers have other shapes)")
    for name, got, want in zip(ANSWERS, answers, expected):
        error = float(np.abs(got - want).mean())
        # `not <=`: a NaN error is a failed check too
        if not error <= AGREEMENT_SHARE * float(np.abs(want - want.mean()).mean()) + AGREEMENT_FLOOR[name]:
            raise UnusableFile(f"a graph that answers unlike its checkpoint on fixed positions ({name} off by "
                            f"{error:.3g} on average)")


def usable_cached(path: Path, key: dict, checkpoint: Checkpoint) -> bytes:
    """read_cached's graph, once check_answers has held it to the checkpoint."""
    graph = read_cached(path, key, cache_size_limit(checkpoint))
    check_answers(graph, checkpoint)
    return graph


@contextlib.contextmanager
def one_derivation_at_a_time(checkpoint_path: Path) -> Iterator[None]:
    """An flock on the checkpoint file while a process derives its int8 model. Every actor asks for a new
    candidate's model at once; derived by each, it cost each about 7 s of a loaded core, 16 % of an actor's
    time on the CPU (benchmarks/RESULTS.md). With it one derives and the others read its cache. The file,
    not its directory: a loop holds an flock on its run directory. The kernel drops the lock of a process
    that dies."""
    try:
        fd = os.open(checkpoint_path, os.O_RDONLY)
    except OSError:  # gone since it was loaded: derive without waiting for anyone
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def int8_graph(checkpoint: Checkpoint) -> bytes:
    """The int8 ONNX graph of a checkpoint: from the cache beside it when that is intact and current, else
    derived now (saying so, as it takes seconds) and cached."""
    key = cache_key(checkpoint)
    if checkpoint.path is None:
        return derived_graph(checkpoint, None, key)
    path = cache_path(checkpoint.path)
    try:
        return usable_cached(path, key, checkpoint)
    except FileNotFoundError:
        pass
    except (UnusableFile, OSError) as exc:
        notify(f"the cached int8 model {path} is {exc}: rebuilding it")
    with one_derivation_at_a_time(checkpoint.path):
        try:  # another process may have derived it while this one waited for the lock
            return usable_cached(path, key, checkpoint)
        except (UnusableFile, OSError):
            pass
        return derived_graph(checkpoint, path, key)


def derived_graph(checkpoint: Checkpoint, path: Path | None, key: dict) -> bytes:
    """The int8 graph of a checkpoint derived now, and cached at path (None: kept in memory only)."""
    source = checkpoint.path or "the network"
    notify(f"deriving the int8 model of {source} (once per checkpoint, some seconds) ...")
    graph = quantize(checkpoint.build_network())
    if path is not None:
        header = json.dumps({**key, "graph_sha256": hashlib.sha256(graph).hexdigest()}, sort_keys=True)
        try:
            atomic_write_bytes(path, header.encode() + b"\n" + graph)
        except OSError as exc:
            notify(f"cannot cache the int8 model, so it is kept for this process only: {disk_problem(exc) or exc}")
    return graph
