"""MCTS and self-play speed.

    python benchmarks/mcts_bench.py [--seconds 60] [--actors 1,2] [--skip-network] [--checkpoint PATH]

1. Search alone, uniform evaluator (no network): simulations per second, single thread, for a few numbers
   of trees in flight; CPU time (the code's speed) and wall time (what a shared machine gave), and the
   split between tree work, encoding and the (trivial) evaluator.
2. Tree reuse: games played with the uniform evaluator; share of each search's visits inherited from the
   previous move, and the cost of re-rooting (compaction) against the cost of the search.
3. Self-play with the shipped network on the CPU (checkpoints/shipped.pt; a randomly initialised
   NetworkConfig.small() network of the same shape when it is absent, or --checkpoint): tree reuse with
   that network, then real actors with the default SelfPlayConfig, run for --seconds each, with 1 and 2
   actor processes, in float32 and int8 (selfplay.precision). Simulations/s, network evaluations/s, positions
   (moves) per hour, time per stage. The first int8 run derives the checkpoint's int8 model (cached beside
   it) before its clock starts.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from selfplay.tree_search import mcts
from selfplay.tree_search.evaluators import UniformEvaluator
from selfplay.tree_search.search import BatchedSearch, SearchConfig
from zero.rules.game import Game


def opening_games(count: int, seed: int = 0, max_plies: int = 20) -> list[Game]:
    """Games a few random plies past the start (so trees differ)."""
    rng = np.random.default_rng(seed)
    games = []
    while len(games) < count:
        game = Game()
        for _ in range(int(rng.integers(0, max_plies))):
            legal = game.legal_moves()
            game.play(legal[int(rng.integers(len(legal)))])
            if game.outcome is not None:
                game.undo()
                break
        games.append(game)
    return games


def bench_uniform(trees: int, leaves_per_tree: int, simulations: int, repeats: int = 3) -> dict:
    config = SearchConfig(leaves_per_tree=leaves_per_tree, tree_capacity=12 * simulations + 300)
    search = BatchedSearch(trees, config, simulations=simulations)
    games = opening_games(trees)
    evaluator = UniformEvaluator()

    def once() -> tuple[float, float, int]:
        for g, game in enumerate(games):
            search.set_root(g, game)
            search.start(g, simulations)
        wall, cpu = time.perf_counter(), time.process_time()
        search.run(evaluator)
        return time.perf_counter() - wall, time.process_time() - cpu, int(search.forest.stats[:, 0, mcts.VISITS].sum())

    once()  # compile / warm the pools
    best = None
    for _ in range(repeats):
        search.times.__init__()
        wall, cpu, sims = once()
        if best is None or cpu < best["cpu"]:
            t = search.times
            best = {"trees": trees, "leaves_per_tree": leaves_per_tree, "simulations": simulations, "sims": sims,
                    "wall": wall, "cpu": cpu, "select": t.select, "evaluate": t.evaluate,
                    "expand": t.expand, "batch": t.leaves / max(t.batches, 1)}
    return best


def bench_tree_reuse(evaluator, trees: int = 64, simulations: int = 400, moves: int = 30) -> dict:
    config = SearchConfig(leaves_per_tree=4)
    search = BatchedSearch(trees, config, simulations=simulations)
    games = [Game() for _ in range(trees)]
    rng = np.random.default_rng(0)
    inherited, kept_nodes = [], []
    search_time = advance_time = 0.0
    for g, game in enumerate(games):
        search.set_root(g, game)
    for _ in range(moves):
        live = [g for g, game in enumerate(games) if game.outcome is None]
        if not live:
            break
        for g in live:
            inherited.append(search.root_visits(g) / simulations)
            search.start(g, simulations)
        t0 = time.process_time()
        search.run(evaluator)
        search_time += time.process_time() - t0
        for g in live:
            search.stop(g)
            children = search.root_children(g)
            game = games[g]
            move = children.move(children.best(1.0, rng), game.position)
            game.play(move)
            t0 = time.process_time()
            kept_nodes.append(search.play(g, move, game))
            advance_time += time.process_time() - t0
    return {"moves": len(inherited), "inherited": float(np.mean(inherited)), "kept_nodes": float(np.mean(kept_nodes)),
            "search_ms": 1000 * search_time / len(inherited), "advance_ms": 1000 * advance_time / len(inherited)}


def _print_reuse(r: dict) -> None:
    print(f"visits inherited from the previous search: {100 * r['inherited']:.0f}% of the target; "
          f"nodes kept per re-root {r['kept_nodes']:.0f}; re-root {r['advance_ms']:.3f} ms vs search "
          f"{r['search_ms']:.2f} ms per move (CPU)")


def _actor_for(seconds: float, actor_id: int, run_dir: str, results, config=None) -> None:
    """One actor process (the default settings unless `config`), stopped (in-flight games discarded) after
    `seconds`."""
    from selfplay.actors.actor import Actor, SelfPlayConfig

    actor = Actor(run_dir, actor_id, config or SelfPlayConfig())
    # Let the network load before the clock starts: the first step loads and warms everything.
    timer = threading.Timer(seconds, lambda: setattr(actor.stop, "mode", "discard"))
    timer.start()
    stats = actor.run()
    timer.cancel()
    results.put(stats)


def bench_actors(actors: int, seconds: float, run_dir: Path, config=None) -> list:
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_actor_for, args=(seconds, 100 + k, str(run_dir), results, config))
             for k in range(actors)]
    for p in procs:
        p.start()
    stats = [results.get() for _ in procs]
    for p in procs:
        p.join()
    return stats


def actors_total(stats: list) -> dict:
    """What the actors of one measurement did together (ActorStats summed over the longest elapsed time):
    counts, rates, and each stage's share (%) of the time spent in the search."""
    elapsed = max(s.elapsed for s in stats)
    stages = {"tree": sum(s.tree_seconds for s in stats), "evaluate": sum(s.evaluate_seconds for s in stats)}
    busy = sum(stages.values())
    moves = sum(s.moves for s in stats)
    return {"games": sum(s.games for s in stats), "moves": moves, "positions_per_hour": moves / elapsed * 3600,
            "sims_per_s": sum(s.simulations for s in stats) / elapsed,
            "evals_per_s": sum(s.leaves for s in stats) / elapsed,
            **{f"{stage}_share": 100 * seconds / busy for stage, seconds in stages.items()}}


def _ensure_network(run_dir: Path, checkpoint: str | None) -> str:
    """--checkpoint, else the shipped checkpoint, else a random NetworkConfig.small() one, as run_dir's best."""
    from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
    from zero.run.rundir import RunDir

    if checkpoint:
        path = Path(checkpoint).resolve()
        step = load_checkpoint(path).step
        RunDir(run_dir).write_best(path, step, "--checkpoint")
        return f"checkpoint {path.name} (step {step})"
    if DEFAULT_CHECKPOINT.exists():
        return f"shipped checkpoint {DEFAULT_CHECKPOINT.name}"
    import torch

    from zero.net.checkpoint import save_checkpoint
    from zero.net.network import NetworkConfig, PolicyValueNet

    torch.manual_seed(0)
    cfg = NetworkConfig.small()
    path = save_checkpoint(RunDir(run_dir).checkpoints / "random-small.pt", net=PolicyValueNet(cfg), net_config=cfg,
                           step=0)
    RunDir(run_dir).write_best(path, 0, "no shipped checkpoint")
    return "random-init NetworkConfig.small() (shipped.pt not present)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="self-play time per actor count")
    parser.add_argument("--actors", default="1,2", help="actor counts to measure, e.g. 1,2")
    parser.add_argument("--skip-network", action="store_true", help="only the search with the uniform evaluator")
    parser.add_argument("--checkpoint", help="network for part 3 (default: the shipped checkpoint)")
    parser.add_argument("--precision", nargs="+", default=["float32", "int8-raw", "int8"],
                        choices=["float32", "int8-raw", "int8"],
                        help="the actors' network precision(s) in part 3 (selfplay.precision), taking turns")
    args = parser.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print("\n1. search alone, uniform evaluator, single thread")
    print("| trees | leaves/tree | sims/move | batch | M sims/s (CPU) | M sims/s (wall) "
          "| select (with encoding) | evaluate | expand |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for trees, leaves, sims in ((16, 16, 800), (64, 8, 800), (256, 8, 800)):
        r = bench_uniform(trees, leaves, sims)
        total = r["select"] + r["evaluate"] + r["expand"]
        print(f"| {trees} | {leaves} | {sims} | {r['batch']:.0f} | {r['sims'] / r['cpu'] / 1e6:.2f} | "
              f"{r['sims'] / r['wall'] / 1e6:.2f} | " + " | ".join(
                  f"{100 * r[k] / total:.0f}%" for k in ("select", "evaluate", "expand")) + " |")

    print("\n2. tree reuse (64 games, 400 visits per move, uniform evaluator, first 30 moves)")
    _print_reuse(bench_tree_reuse(UniformEvaluator()))

    if args.skip_network:
        return
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        network = _ensure_network(run_dir, args.checkpoint)
        from selfplay.actors.actor import SelfPlayConfig, current_best
        from zero.net.inference import Evaluator

        print(f"\n3. {network}, CPU")
        print("tree reuse with this network (8 games, 400 visits per move, first 15 moves):")
        _print_reuse(bench_tree_reuse(Evaluator.from_checkpoint(current_best(run_dir).path, device="cpu"),
                                      trees=8, moves=15))
        print(f"self-play, default SelfPlayConfig, {args.seconds:.0f} s per run")
        print("| precision | actors | load avg | games done | moves | positions/hour | sims/s | net evals/s "
              "| tree (with encoding) | inference |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for actors in (int(a) for a in args.actors.split(",")):
            for precision in args.precision:
                config = SelfPlayConfig(precision=precision)
                t = actors_total(bench_actors(actors, args.seconds, run_dir, config))
                print(f"| {precision} | {actors} | {os.getloadavg()[0]:.1f} | {t['games']} | {t['moves']} "
                      f"| {t['positions_per_hour']:.0f} | {t['sims_per_s']:.0f} | {t['evals_per_s']:.0f} | {t['tree_share']:.0f}% | "
                      f"{t['evaluate_share']:.0f}% |")


if __name__ == "__main__":
    main()
