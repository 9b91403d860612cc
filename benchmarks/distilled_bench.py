"""The distilled evaluation's speed: positions a second of the kernels (from scratch, and as the search meets
them: the accumulators updated by a move, then the forward pass), the whole alpha-beta search's nodes a
second and depth on the clock with it and with the classical evaluation, and the policy-value network's
evaluations a second beside them (int8, one thread, batch 128: what a leaf of MCTS costs).

    python benchmarks/distilled_bench.py [--eval checkpoints/distilled.npz] [--seconds 0.1] [--positions 200000]
        [--selectivity 1,3,0 2,2,1 ...]

Positions: the OCA dataset's when runs/oca exists (`checkers-zero pretrain dataset`), else random games'.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from players_bench import bench_positions, searches_on_the_clock  # noqa: E402

from zero.alphabeta.player import DistilledPlayer, Selectivity  # noqa: E402
from zero.distilled import kernels as dk  # noqa: E402
from zero.distilled.model import load_eval  # noqa: E402
from zero.rules.game import Position  # noqa: E402
from zero.rules.movegen import BUFFER_ROWS, F_CAPTURED, F_FROM, F_TO, MOVE_FIELDS, generate, make  # noqa: E402
from zero.yardsticks.classical import ClassicalPlayer  # noqa: E402


@njit(cache=True)
def _updated(black, white, kings, btm, w1, b1, w2, b2, w3, b3, w4, b4):
    """Each position's first legal move made, its accumulators updated from the parent's, then evaluated:
    what one leaf of the search costs. Returns a checksum (so nothing is optimised away)."""
    h = w1.shape[1]
    acc = np.zeros((2, h), np.int16)
    child = np.zeros((2, h), np.int16)
    x, y1, y2, out = (np.zeros(2 * h, np.float32), np.zeros(w2.shape[1], np.float32),
                      np.zeros(w3.shape[1], np.float32), np.zeros(1, np.float32))
    buf = np.zeros((BUFFER_ROWS, MOVE_FIELDS), np.int64)
    total = 0.0
    for i in range(len(black)):
        b, w, k = np.int64(black[i]), np.int64(white[i]), np.int64(kings[i])
        dk.refresh(b, w, k, w1, b1, acc)
        if generate(b, w, k, btm[i], True, buf) == 0:
            continue
        cb, cw, ck = make(b, w, k, btm[i], buf[0, F_FROM], buf[0, F_TO], buf[0, F_CAPTURED])
        dk.update(b, w, k, cb, cw, ck, w1, acc, child)
        total += dk.forward(child, cb, cw, not btm[i], w2, b2, w3, b3, w4, b4, x, y1, y2, out)
    return total


def _positions(count: int) -> tuple[np.ndarray, ...]:
    oca = Path("runs/oca")
    if (oca / "zarr.json").exists():
        import zarr

        group = zarr.open_group(str(oca), mode="r")
        return tuple(np.asarray(group[n][:count]) for n in ("black", "white", "kings", "black_to_move"))
    rng = np.random.default_rng(0)
    rows = []
    while len(rows) < count:
        pos = Position.initial()
        for _ in range(int(rng.integers(0, 80))):
            legal = pos.legal_moves()
            if not legal:
                break
            pos = pos.play(legal[int(rng.integers(len(legal)))])
        rows.append((pos.black, pos.white, pos.kings, pos.black_to_move))
    return tuple(np.array(c) for c in zip(*rows))


def kernel_speed(evaluation, positions: int) -> None:
    black, white, kings, btm = _positions(positions)
    args = (black.astype(np.int64), white.astype(np.int64), kings.astype(np.int64), btm.astype(np.bool_))
    evaluation.logits(*(a[:10] for a in args))
    _updated(*(a[:10] for a in args), *evaluation.arrays)
    start = time.perf_counter()
    evaluation.logits(*args)
    scratch = time.perf_counter() - start
    start = time.perf_counter()
    _updated(*args, *evaluation.arrays)
    updated = time.perf_counter() - start
    print(f"distilled evaluation {evaluation.shape}: {len(black) / scratch:,.0f} positions/s from scratch; "
          f"{len(black) / updated:,.0f} positions/s as a refresh + a move's update + the forward pass "
          f"({len(black):,} positions, one core)")


def search_speed(evaluation, seconds: float, selectivities: list[Selectivity]) -> None:
    games = bench_positions(12)
    players = [("distilled", DistilledPlayer(seconds=seconds, evaluation=evaluation)),
               ("distilled, plain (Selectivity.none())",
                DistilledPlayer(seconds=seconds, evaluation=evaluation, selectivity=Selectivity.none()))]
    players += [(f"distilled, {s}", DistilledPlayer(seconds=seconds, evaluation=evaluation, selectivity=s))
                for s in selectivities]
    players.append(("classical", ClassicalPlayer(seconds=seconds)))
    for name, player in players:
        rate, depths = searches_on_the_clock(player, games)
        print(f"{name} search at {seconds:g} s a move: {rate:,.0f} nodes/s, depth {statistics.mean(depths):.1f} "
              f"on average (min {min(depths)}, max {max(depths)}) over {len(games)} positions")


def tower_speed() -> None:
    from zero.net.encoding import NUM_PLANES
    from zero.net.inference import SMALL_BATCH_THREADS, Evaluator

    evaluator = Evaluator.from_checkpoint(threads=SMALL_BATCH_THREADS)
    planes = np.random.default_rng(0).integers(0, 2, (128, NUM_PLANES, 8, 8)).astype(np.float32)
    evaluator.evaluate(planes)
    start, calls = time.perf_counter(), 40
    for _ in range(calls):
        evaluator.evaluate(planes)
    print(f"policy-value network (shipped, {evaluator.precision}, one thread, batch 128): "
          f"{calls * 128 / (time.perf_counter() - start):,.0f} evaluations/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", default=None, help="distilled evaluation file (default: the shipped one)")
    parser.add_argument("--seconds", type=float, default=0.1)
    parser.add_argument("--positions", type=int, default=200_000, help="for the kernels' speed (0: not measured)")
    parser.add_argument("--selectivity", nargs="*", default=[], metavar="R,A,D",
                        help="more searches to compare: reductions, reduce_after, deeper_cuts (0/1), e.g. 1,3,0")
    args = parser.parse_args()
    selectivities = []
    for item in args.selectivity:
        r, a, d = (int(x) for x in item.split(","))
        selectivities.append(Selectivity(r, a, bool(d)))
    evaluation = load_eval(args.eval)
    if args.positions:
        kernel_speed(evaluation, args.positions)
    search_speed(evaluation, args.seconds, selectivities)
    tower_speed()


if __name__ == "__main__":
    main()
