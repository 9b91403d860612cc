"""Checkpoint files: network config, weights, training state, lineage, ratings, metrics and data provenance.

File layout: one header line, then a torch.save payload.

    b"checkers-zero-checkpoint <format version> <payload bytes> <sha256 of payload>\\n" + payload

The header lets a loader tell a truncated file (fewer payload bytes than announced) from a damaged one
(sha256 mismatch) from a file of another kind or version, each with its own message, before unpickling
anything. Inside, the weights carry their own sha256 (over the tensors in key order), so weights copied out of
a checkpoint can be checked too. Files are written to a temporary name and renamed: a reader sees the old
file or the new one, never half of one.

Finite weights do not make a usable network (a batch norm's running variance below zero, weights that
overflow in the tower): a loaded network is run once on a few fixed positions (`probe_planes`), and one whose
policy, value or plies left are not finite there is refused as its file is, before any consumer's search,
calibration or training meets NaN.
"""

from __future__ import annotations

import functools
import hashlib
import io
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from zero.net.encoding import ENCODING_VERSION, encode
from zero.net.network import NetworkConfig, PolicyValueNet
from zero.rules.notation import fen_to_position
from zero.run.config import atomic_write_bytes, code_version
from zero.run.data import REPOSITORY
from zero.run.rundir import RunDir, RunDirError

FORMAT_NAME = b"checkers-zero-checkpoint"
FORMAT_VERSION = 1
MAX_HEADER = 256
# The shipped network keeps this one name: `checkers-zero ship` (train.shipping.ship) replaces its bytes when a
# candidate beats it, and its model card (README.md beside it) records the chain that produced it.
DEFAULT_CHECKPOINT = REPOSITORY / "checkpoints" / "shipped.pt"
# The code a process runs is fixed when it starts; asking git once spares a trainer a subprocess per save.
_code_version = functools.cache(code_version)
# The positions every loaded network is run on (and its int8 model held to, zero.net.quantized): the start,
# a middle game, and endgames with kings on either side with a no-progress count and a repetition, so that
# every input plane takes part. A handful: one small batch per load.
PROBE_FENS = ("B:W21-32:B1-12", "W:W18,19,21,22,23,25,26,27,28,29,31,32:B1,2,3,4,6,7,9,10,11,13,14,15",
              "W:W17,20,22,24,26,28,30,31:B1,3,6,7,9,11,12,16", "B:W12,14,15,29:B2,7,13", "B:W21,28,32:BK4,14",
              "W:WK10,K19,27:BK14,23", "W:W5,K30:BK6,K27,3", "B:W18,K26,31:B9,K14,22")


class CheckpointError(Exception):
    """A checkpoint that cannot be used; the message says which file and what is wrong with it."""


@dataclass
class Checkpoint:
    net_config: NetworkConfig
    state_dict: dict[str, torch.Tensor]
    step: int = 0
    optimizer_state: dict | None = None
    parent: str | None = None  # the checkpoint this one was trained from
    ratings: dict = field(default_factory=dict)  # e.g. {"elo": ..., "elo_error": ..., "vs": {...}}
    metrics: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)  # data, split, command, code version
    extra: dict = field(default_factory=dict)  # anything a trainer needs to resume (scheduler, RNG, ...)
    path: Path | None = None
    created: str = ""
    code_version: str = ""
    half: bool = False  # the weights were stored in float16 (they are float32 in state_dict all the same)
    # sha256 of the file's bytes as load_checkpoint read them (None for one built in memory): what a record of
    # this checkpoint names, as the file at `path` may have been replaced since
    file_sha256: str | None = None

    def build_network(self) -> PolicyValueNet:
        """The network with these weights, in eval mode, on the CPU."""
        net = PolicyValueNet(self.net_config)
        net.load_state_dict(self.state_dict)
        return net.eval()


# The network's answers, as messages name them, in the order probe_answers and its ONNX graph give them.
ANSWERS = ("policy", "value", "plies-left")


@functools.cache
def probe_planes() -> np.ndarray:
    """The planes of PROBE_FENS (float32 [len(PROBE_FENS), NUM_PLANES, 8, 8]): each after the first with a
    no-progress count, every other one a repetition."""
    return np.stack([encode(fen_to_position(fen), 9 * i, 1 + i % 2) for i, fen in enumerate(PROBE_FENS)])


def probe_answers(net: PolicyValueNet) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A network's answers on the probe positions in the form its ONNX graph gives them (zero.net.onnx_model):
    policy logits, win/draw/loss probabilities and plies left (None without that head), named ANSWERS."""
    with torch.inference_mode():
        out = net.eval()(torch.from_numpy(probe_planes()))
    moves_left = None if out.moves_left is None else out.moves_left.numpy()
    return out.policy_logits.numpy(), torch.softmax(out.wdl_logits, dim=1).numpy(), moves_left


def resolve_checkpoint(name: str | Path | None = None) -> Path:
    """The checkpoint file a user means: a file as given, a run directory's current best network, or the
    shipped checkpoint for None or "". Raises CheckpointError when it names neither."""
    if name is None or str(name) == "":
        return DEFAULT_CHECKPOINT
    path = Path(name)
    if path.is_dir():
        run = RunDir(path)
        try:
            best = run.read_best()
        except RunDirError as exc:
            raise CheckpointError(str(exc)) from None
        if best is None:
            raise CheckpointError(f"{path} is a directory but not a run with a best network "
                                  f"({run.best_file} is absent)")
        return best.path
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint file or run directory")
    return path


def weights_sha256(state_dict: dict[str, torch.Tensor]) -> str:
    """sha256 over the tensors' names, dtypes, shapes and bytes in key order."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous().reshape(-1)
        h.update(f"{name}:{t.dtype}:{tuple(state_dict[name].shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(
    path: str | Path,
    *,
    net: torch.nn.Module,
    net_config: NetworkConfig,
    step: int,
    optimizer_state: dict | None = None,
    parent: str | None = None,
    ratings: dict | None = None,
    metrics: dict | None = None,
    provenance: dict | None = None,
    extra: dict | None = None,
    half: bool = False,
) -> Path:
    """Write a checkpoint atomically; returns its path. Values in the dicts must be plain data and tensors.

    half=True stores the floating-point weights as float16 (half the bytes; tests/test_ship.py shows the
    shipped network picks the same moves); they load back as float32."""
    # torch.compile wraps the module; the weights are the original module's.
    module = getattr(net, "_orig_mod", net)
    state_dict = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
    _check_finite(Path(path), state_dict, "refusing to write it")
    if half:
        state_dict = {k: v.half() if v.is_floating_point() else v for k, v in state_dict.items()}
    payload_obj = {
        "net_config": net_config.to_dict(),
        "state_dict": state_dict,
        "weights_sha256": weights_sha256(state_dict),
        "step": int(step),
        "optimizer_state": optimizer_state,
        "parent": parent,
        "ratings": ratings or {},
        "metrics": metrics or {},
        "provenance": provenance or {},
        "extra": extra or {},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "code_version": _code_version(),
    }
    buf = io.BytesIO()
    torch.save(payload_obj, buf)
    payload = buf.getvalue()
    header = b"%s %d %d %s\n" % (FORMAT_NAME, FORMAT_VERSION, len(payload), hashlib.sha256(payload).hexdigest().encode())
    path = Path(path)
    atomic_write_bytes(path, header + payload)
    return path


def load_checkpoint(
    path: str | Path = DEFAULT_CHECKPOINT,
    map_location: str | torch.device = "cpu",
    expect_config: NetworkConfig | None = None,
) -> Checkpoint:
    """Read and validate a checkpoint. Raises CheckpointError saying what is wrong: missing file, not a
    checkpoint, other format version, truncated, corrupt bytes, weights that do not fit the stored config
    (or expect_config, when given), or weights that are not finite."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory, not a checkpoint file (where a network is expected, a run "
                              f"directory names its best network)")
    if path.exists() and not path.is_file():
        raise CheckpointError(f"{path} is not a regular file")  # a FIFO would block the read forever
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read checkpoint: {exc}") from exc

    newline = data.find(b"\n", 0, MAX_HEADER)
    fields = data[:newline].split(b" ") if newline > 0 else []
    if len(fields) != 4 or fields[0] != FORMAT_NAME:
        raise CheckpointError(f"{path}: not a checkers-zero checkpoint (no valid header line)")
    try:
        version, size, digest = int(fields[1]), int(fields[2]), fields[3].decode()
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{path}: damaged checkpoint header {data[:newline]!r}") from None
    if version != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {version}; this code reads version {FORMAT_VERSION}")
    payload = data[newline + 1:]
    if len(payload) < size:
        raise CheckpointError(f"{path}: truncated checkpoint: {len(payload)} of {size} payload bytes present")
    if len(payload) > size:
        raise CheckpointError(f"{path}: {len(payload) - size} unexpected bytes after the checkpoint payload")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise CheckpointError(f"{path}: corrupt checkpoint: sha256 of the contents does not match the header")
    try:
        obj = torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    except Exception as exc:  # the bytes hash correctly, so this is a file written by other code
        raise CheckpointError(f"{path}: checkpoint payload cannot be read: {exc}") from exc

    try:
        return replace(_from_payload(path, obj, expect_config), file_sha256=hashlib.sha256(data).hexdigest())
    except (KeyError, AttributeError, TypeError, ValueError, IndexError) as exc:
        # A payload that hashes correctly but is not what save_checkpoint writes (other code wrote it).
        raise CheckpointError(f"{path}: checkpoint contents are not a checkers-zero checkpoint's "
                              f"({type(exc).__name__}: {exc})") from None


def _from_payload(path: Path, obj: dict, expect_config: NetworkConfig | None) -> Checkpoint:
    if not isinstance(obj, dict):
        raise TypeError(f"the payload is a {type(obj).__name__}, not a dict")
    try:
        cfg = NetworkConfig.from_dict(obj["net_config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: bad network config in checkpoint: {exc}") from exc
    if cfg.encoding_version != ENCODING_VERSION:
        raise CheckpointError(
            f"{path}: the network was trained on input encoding version {cfg.encoding_version}, this code encodes "
            f"positions as version {ENCODING_VERSION}; it cannot play or train here (use the code it was made "
            f"with, or a checkpoint of this version)")
    state_dict = obj["state_dict"]
    if weights_sha256(state_dict) != obj.get("weights_sha256"):
        raise CheckpointError(f"{path}: corrupt checkpoint: weights do not match their stored sha256")
    if expect_config is not None and expect_config != cfg:
        diff = {k: (v, getattr(cfg, k)) for k, v in expect_config.to_dict().items() if getattr(cfg, k) != v}
        raise CheckpointError(
            f"{path}: network config differs from the expected one: "
            + ", ".join(f"{k}: expected {a}, checkpoint has {b}" for k, (a, b) in diff.items())
        )
    net = PolicyValueNet(cfg)
    _check_weights_fit(path, cfg, net, state_dict)
    _check_finite(path, state_dict, "it cannot be used")
    # Weights stored in half precision (save_checkpoint's half) compute in float32 like all others.
    half = any(v.dtype == torch.float16 for v in state_dict.values())
    state_dict = {k: v.float() if v.is_floating_point() else v for k, v in state_dict.items()}
    net.load_state_dict(state_dict)
    _check_answers_finite(path, net)
    return Checkpoint(
        net_config=cfg,
        state_dict=state_dict,
        step=int(obj.get("step", 0)),
        optimizer_state=obj.get("optimizer_state"),
        parent=obj.get("parent"),
        ratings=obj.get("ratings") or {},
        metrics=obj.get("metrics") or {},
        provenance=obj.get("provenance") or {},
        extra=obj.get("extra") or {},
        path=path,
        created=obj.get("created", ""),
        code_version=obj.get("code_version", ""),
        half=half,
    )


def _check_weights_fit(path: Path, cfg: NetworkConfig, net: PolicyValueNet,
                       state_dict: dict[str, torch.Tensor]) -> None:
    """The stored weights must be exactly those of `net`, a network built from the stored config."""
    expected = {k: tuple(v.shape) for k, v in net.state_dict().items()}
    found = {k: tuple(v.shape) for k, v in state_dict.items()}
    problems = []
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    if missing:
        problems.append(f"missing weights {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if unexpected:
        problems.append(f"unexpected weights {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}")
    for k in sorted(set(expected) & set(found)):
        if expected[k] != found[k]:
            problems.append(f"{k} has shape {found[k]}, the config needs {expected[k]}")
    if problems:
        raise CheckpointError(
            f"{path}: weights do not fit the network config {cfg}: " + "; ".join(problems[:6])
        )


def _check_finite(path: Path, state_dict: dict[str, torch.Tensor], consequence: str) -> None:
    """Weights that are NaN or infinite (a training run that diverged) hash like any others, but the network
    they make answers NaN for every position, and a search cannot rank moves on that."""
    bad = [k for k, v in state_dict.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        raise CheckpointError(f"{path}: the network's weights are not finite (NaN or infinite in {len(bad)} of "
                              f"{len(state_dict)} tensors, e.g. {bad[0]}): the training that made them diverged; "
                              f"{consequence}")


def _check_answers_finite(path: Path, net: PolicyValueNet) -> None:
    """Finite weights can still answer NaN (a negative running variance) or overflow to infinity; a search,
    the int8 calibration and the trainer all fail on such answers far from the file that caused them."""
    heads = [name for name, answer in zip(ANSWERS, probe_answers(net))
             if answer is not None and not np.isfinite(answer).all()]
    if heads:
        raise CheckpointError(f"{path}: the network's outputs are not finite on fixed positions ({', '.join(heads)}), "
                              f"though its weights are; it cannot be used")
