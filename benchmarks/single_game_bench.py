"""Single-game search speed at a fixed time a move (play, analyze, a match player on the clock): the
shipped network on one thread, one game per setting played by two GameSearch players from the start.

For each setting it prints new simulations a move (descents made this move: network leaves plus visits to
proven nodes), root visits a move (reused ones included), leaves per network call and network calls a move.
`today` is the search as it was before issue 11's part 2: two leaves a call and a fresh tree each move.

    python benchmarks/single_game_bench.py [--seconds 0.1] [--leaves 1 2 4 8 16 32] [--plies 40]
"""

from __future__ import annotations

import argparse
import os

import torch

from selfplay.tree_search.analysis import GameSearch, best_move
from selfplay.tree_search.evaluators import CachedEvaluator, PositionEvaluator
from selfplay.tree_search.search import SearchConfig
from zero.net.checkpoint import DEFAULT_CHECKPOINT, load_checkpoint
from zero.net.inference import Evaluator
from zero.rules.game import Game


def play_one_game(evaluator: PositionEvaluator, config: SearchConfig, seconds: float, plies: int) -> dict:
    players = [GameSearch(evaluator, config), GameSearch(evaluator, config)]
    game = Game()
    moves = simulations = root_visits = leaves = batches = 0
    while game.outcome is None and game.ply < plies:
        if len(game.legal_moves()) == 1:
            game.play(game.legal_moves()[0])
            continue
        player = players[game.ply % 2]
        if not config.reuse_tree:
            player._root = None  # a fresh tree every move, as the search before tree reuse
        before = player._search.times if player._search is not None else None
        start = (before.simulations, before.leaves, before.batches) if before else (0, 0, 0)
        analysis = player.analyse(game, seconds=seconds)
        t = player._search.times
        simulations += t.simulations - start[0]
        leaves += t.leaves - start[1]
        batches += t.batches - start[2]
        root_visits += analysis.simulations
        moves += 1
        game.play(best_move(analysis))
    return {"moves": moves, "sims": simulations / moves, "root": root_visits / moves,
            "per_call": leaves / max(batches, 1), "calls": batches / moves}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.1)
    parser.add_argument("--leaves", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--plies", type=int, default=40, help="plies of the game played for each setting")
    parser.add_argument("--cache", action="store_true", help="evaluations through a CachedEvaluator")
    args = parser.parse_args()
    torch.set_num_threads(1)
    evaluator = Evaluator(load_checkpoint(DEFAULT_CHECKPOINT).build_network(), "cpu")
    if args.cache:
        evaluator = CachedEvaluator(evaluator)
    print(f"cache {args.cache}, load average {os.getloadavg()[0]:.1f} at start, {args.seconds:g} s a move")
    GameSearch(evaluator).analyse(Game(), seconds=0.5)  # warm-up: compile the kernels
    settings = [("today (2 leaves, fresh tree)", SearchConfig(leaves_per_tree=2, reuse_tree=False))]
    settings += [(f"{n} leaves, tree reused", SearchConfig(leaves_per_tree=n)) for n in args.leaves]
    print(f"{'setting':<30}{'new sims/move':>14}{'root visits':>13}{'leaves/call':>13}{'calls/move':>12}")
    for name, config in settings:
        r = play_one_game(evaluator, config, args.seconds, args.plies)
        print(f"{name:<30}{r['sims']:>14.0f}{r['root']:>13.0f}{r['per_call']:>13.1f}{r['calls']:>12.1f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
