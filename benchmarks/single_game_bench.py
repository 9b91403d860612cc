"""Single-game search speed at a fixed time a move (play, analyze, a match player on the clock): the
shipped network on one thread, one game per setting played by two GameSearch players from the start.

For each setting it prints new simulations a move (descents made this move: network leaves plus visits to
proven nodes), root visits a move (reused ones included), leaves per network call and network calls a move.
`today` is the search as it was before issue 11's part 2: two leaves a call and a fresh tree each move.
With --specs, match players on the clock instead, each with its own evaluator and search settings (e.g.
`mcts:t0.1 mcts:t0.1:distilled2`: MCTS leaves valued by the distilled player's 2-ply search).

    python benchmarks/single_game_bench.py [--seconds 0.1] [--leaves 1 2 4 8 16 32] [--plies 40] [--specs SPEC ...]
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
    parser.add_argument("--specs", nargs="+", default=None, metavar="SPEC",
                        help="mcts players (train.arena.player_specs) measured instead of the leaf settings, each with "
                             "its own evaluator (cached) and search settings; their time a move is --seconds")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.specs:
        from train.arena.player_specs import make_player

        players = [make_player(spec) for spec in args.specs]
        settings = [(player.name, player.config, player.evaluator) for player in players]
    else:
        evaluator = Evaluator(load_checkpoint(DEFAULT_CHECKPOINT).build_network(), "cpu")
        if args.cache:
            evaluator = CachedEvaluator(evaluator)
        settings = [("today (2 leaves, fresh tree)", SearchConfig(leaves_per_tree=2, reuse_tree=False), evaluator)]
        settings += [(f"{n} leaves, tree reused", SearchConfig(leaves_per_tree=n), evaluator) for n in args.leaves]
    print(f"cache {args.cache or bool(args.specs)}, load average {os.getloadavg()[0]:.1f} at start, "
          f"{args.seconds:g} s a move")
    for _name, config, evaluator in settings:
        GameSearch(evaluator, config).analyse(Game(), seconds=0.5)  # warm-up: compile the kernels
    width = max(30, *(len(name) + 2 for name, _, _ in settings))
    print(f"{'setting':<{width}}{'new sims/move':>14}{'root visits':>13}{'leaves/call':>13}{'calls/move':>12}")
    for name, config, evaluator in settings:
        r = play_one_game(evaluator, config, args.seconds, args.plies)
        print(f"{name:<{width}}{r['sims']:>14.0f}{r['root']:>13.0f}{r['per_call']:>13.1f}{r['calls']:>12.1f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
