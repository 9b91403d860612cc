"""The distilled evaluation as data: its shape, its weights, its file, and the torch twin that learns them.

The kernels (zero.distilled.kernels) run the arrays this module derives from the weights: W1 and B1 rounded
to whole multiples of 1/QA (int16), the dense layers as float32. The torch twin computes the same function
(W1 seen through the same rounding while it trains, so that what it learns is what the kernels run).

The file (`checkpoints/distilled.npz` for the shipped one) is a numpy archive without pickles: the float
weights, and a JSON document of the format, the shape and how the evaluation was made (the teacher network's
sha256, the labels, the command, the held-out figures). Loading opens it as a regular file (no link
followed: a FIFO or a /dev/zero link is refused, not read), reads each array within the size its shape in the
document allows (a zip bomb is refused before it decompresses), checks the format, the shapes, that every
weight is finite, no layer's weights all zero, W1 and B1 in the range the int16 accumulator holds and the dense
layers within MAX_DENSE, and refuses anything else with one line naming the file (DistilledFileError). It is written to a temporary name
and renamed.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from zero.distilled import kernels as dk
from zero.run.config import BoundedArchive, UnusableFile, atomic_write_bytes, open_regular
from zero.run.data import REPOSITORY

DEFAULT_DISTILLED = REPOSITORY / "checkpoints" / "distilled.npz"
FILE_FORMAT = "checkers-zero-distilled-eval"
FILE_VERSION = 1
WEIGHTS = ("w1", "b1", "w2", "b2", "w3", "b3", "w4", "b4")
MOST_DOCUMENT = 1 << 20  # bytes of the JSON document: how it was made, a few kilobytes
# The dense layers' weights and biases are bounded too: a layer of huge finite weights turns every score into
# a win or a loss, and the float32 sums above it toward inf. Trained ones stay within a few units.
MAX_DENSE = 100.0


class DistilledFileError(ValueError):
    """A distilled evaluation file that is missing, unreadable or damaged; the message is one line naming it."""


@dataclass(frozen=True)
class DistilledShape:
    """The evaluation's size: accumulator units per view, units of each hidden layer, buckets by phase."""

    accumulator: int = 64
    hidden: int = 32
    buckets: int = 1

    def __str__(self) -> str:
        return f"{self.accumulator}/{self.hidden}/{self.buckets}"

    def shapes(self) -> dict[str, tuple[int, ...]]:
        a, h, k = self.accumulator, self.hidden, self.buckets
        return {"w1": (dk.INPUTS, a), "b1": (a,), "w2": (k, h, 2 * a), "b2": (k, h), "w3": (k, h, h), "b3": (k, h),
                "w4": (k, 1, h), "b4": (k, 1)}


@dataclass(frozen=True, eq=False)
class DistilledEval:
    """An evaluation's float weights (WEIGHTS, shapes by `shape`) and how it was made (`meta`)."""

    shape: DistilledShape
    weights: dict[str, np.ndarray]
    meta: dict = field(default_factory=dict)

    @cached_property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """What the kernels take, in WEIGHTS order: W1 and B1 as int16 in units of 1/QA, the rest float32."""
        first = tuple(np.round(self.weights[n] * dk.QA).astype(np.int16) for n in ("w1", "b1"))
        rest = tuple(np.ascontiguousarray(self.weights[n], dtype=np.float32) for n in WEIGHTS[2:])
        return first + rest

    def logits(self, black, white, kings, black_to_move) -> np.ndarray:
        """The side to move's logit of its expected score, for arrays of positions (the kernels' answer)."""
        out = np.zeros(len(black), dtype=np.float32)
        dk.evaluate_batch(np.asarray(black, np.int64), np.asarray(white, np.int64), np.asarray(kings, np.int64),
                          np.asarray(black_to_move, np.bool_), *self.arrays, out)
        return out


def random_eval(shape: DistilledShape = DistilledShape(), seed: int = 0) -> DistilledEval:
    """Weights drawn at random within their ranges (tests, and the start of a training)."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, dims in shape.shapes().items():
        fan_in = dims[-1] if name.startswith("w") and name != "w1" else 8
        scale = 0.5 / np.sqrt(fan_in) if name.startswith("w") else 0.05
        weights[name] = rng.normal(0.0, scale, dims).astype(np.float32)
    weights["b1"] += 0.25
    return DistilledEval(shape, weights)


def save_eval(evaluation: DistilledEval, path: str | Path) -> None:
    """Write the evaluation's file atomically (module doc)."""
    doc = {"format": FILE_FORMAT, "version": FILE_VERSION, "shape": asdict(evaluation.shape), **evaluation.meta}
    buffer = io.BytesIO()
    np.savez(buffer, document=np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8),
             **{n: np.asarray(evaluation.weights[n], np.float32) for n in WEIGHTS})
    atomic_write_bytes(Path(path), buffer.getvalue())


def load_eval(path: str | Path | None = None) -> DistilledEval:
    """The evaluation in `path` (default: the shipped one), validated (module doc)."""
    path = Path(path) if path is not None else DEFAULT_DISTILLED
    try:
        with open_regular(path) as file:
            archive = BoundedArchive(file)
            doc = json.loads(archive.array("document", MOST_DOCUMENT).tobytes()) \
                if "document" in archive.names else None
            if not isinstance(doc, dict) or doc.get("format") != FILE_FORMAT:
                raise DistilledFileError(f"{path}: not a distilled evaluation file (no document of one)")
            if doc.get("version") != FILE_VERSION:
                raise DistilledFileError(f"{path}: format version {doc.get('version')!r}, this code reads "
                                         f"{FILE_VERSION}")
            try:
                shape = DistilledShape(**doc["shape"])
                if not all(type(v) is int and 1 <= v <= 4096 for v in asdict(shape).values()) or shape.buckets > 24:
                    raise TypeError
            except (KeyError, TypeError):
                raise DistilledFileError(f"{path}: its shape {doc.get('shape')!r} is not one this code can run") \
                    from None
            weights = {}
            for name, dims in shape.shapes().items():
                # The document's shape bounds what is read: no member is decompressed beyond its weight's size.
                array = archive.array(name, 4 * math.prod(dims)) if name in archive.names else None
                if array is None or array.shape != dims or array.dtype != np.float32:
                    raise DistilledFileError(f"{path}: weight {name} should be float32 {dims}, "
                                             f"got {None if array is None else (array.dtype, array.shape)}")
                weights[name] = array
    except FileNotFoundError:
        raise DistilledFileError(f"{path}: no distilled evaluation file (make one: checkers-zero distilled train)") \
            from None
    except UnusableFile as exc:
        raise DistilledFileError(f"{path}: not a distilled evaluation file ({exc})") from None
    except (OSError, ValueError) as exc:
        raise DistilledFileError(f"{path}: not a readable distilled evaluation file "
                                 f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    for name, array in weights.items():
        if not np.isfinite(array).all():
            raise DistilledFileError(f"{path}: weight {name} is not finite everywhere")
        if not array.any() and name.startswith("w"):
            raise DistilledFileError(f"{path}: weight {name} is all zeros (no evaluation learns that)")
    if np.abs(weights["w1"]).max() > dk.MAX_W1 or np.abs(weights["b1"]).max() > dk.MAX_B1:
        raise DistilledFileError(f"{path}: its first layer exceeds what the int16 accumulator holds "
                                 f"(|W1| <= {dk.MAX_W1}, |B1| <= {dk.MAX_B1})")
    for name in WEIGHTS[2:]:
        if np.abs(weights[name]).max() > MAX_DENSE:
            raise DistilledFileError(f"{path}: weight {name} exceeds {MAX_DENSE:g} in size (|{name}| is "
                                     f"{np.abs(weights[name]).max():.3g}): no trained evaluation has such weights")
    meta = {k: v for k, v in doc.items() if k not in ("format", "version", "shape")}
    return DistilledEval(shape, weights, meta)
