"""What resolving captures (search.resolve_captures) does to a search, counted rather than timed: over
positions of real games, the network calls, nodes and proven visits per simulation, and how often the move
chosen differs, with and without it, at a fixed number of simulations a move. The strength it buys is
measured by a match at equal time (benchmarks/RESULTS.md).

    python benchmarks/capture_search_bench.py [--pdn games/tinsley_checkerboard.pdn] [--positions 200] [--sims 800]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from selfplay.tree_search import mcts
from selfplay.tree_search.analysis import analysis_of
from selfplay.tree_search.search import BatchedSearch, SearchConfig
from zero.corpus.pdn import PdnGame, read_pdn
from zero.net.checkpoint import DEFAULT_CHECKPOINT
from zero.net.inference import Evaluator
from zero.rules.game import Game
from zero.run.data import data_file


def sample_positions(pdn: str, count: int, seed: int) -> list[Game]:
    """`count` positions with a choice of moves, drawn from the games of a PDN file (data-folder relative)."""
    path = data_file(pdn)
    if path is None:
        raise SystemExit(f"no {pdn} in the data folder (set CHECKERS_ZERO_DATA)")
    choices = []  # (game record, ply) of every position with a choice
    for record in read_pdn(path):
        if isinstance(record, PdnGame):
            choices += [(record, ply) for ply, p in enumerate(record.positions()[:-1]) if len(p.legal_moves()) > 1]
    rng = np.random.default_rng(seed)
    games = []
    for i in rng.choice(len(choices), size=min(count, len(choices)), replace=False):
        record, ply = choices[i]
        game = Game(start=record.start)
        for move in record.moves[:ply]:
            game.play(move)
        if game.outcome is None:
            games.append(game)
    return games


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdn", default="games/tinsley_checkerboard.pdn")
    parser.add_argument("--positions", type=int, default=200)
    parser.add_argument("--sims", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    evaluator = Evaluator.from_checkpoint(DEFAULT_CHECKPOINT)
    positions = sample_positions(args.pdn, args.positions, args.seed)
    captures = sum(any(m.captured for m in g.legal_moves()) for g in positions)
    print(f"{len(positions)} positions of {args.pdn} with a choice ({captures} with a capture pending), "
          f"{args.sims} simulations each, the shipped network")
    chosen = {}
    for resolve in (False, True):
        config = SearchConfig(leaves_per_tree=16, resolve_captures=resolve)
        leaves = terminal = nodes = 0
        moves = []
        for game in positions:
            search = BatchedSearch(1, config, game.rules, simulations=args.sims)
            search.set_root(0, game)
            search.start(0, args.sims)
            search.run(evaluator)
            leaves += search.times.leaves
            terminal += search.times.terminal_visits
            nodes += int(search.forest.trees[0, mcts.USED])
            moves.append(str(analysis_of(search, game.position).moves[0].move))
        chosen[resolve] = moves
        sims = leaves + terminal
        print(f"resolve_captures={resolve}: network positions per simulation {leaves / sims:.3f}, nodes per "
              f"simulation {nodes / sims:.2f}, proven visits {terminal / sims:.1%}")
    differ = sum(a != b for a, b in zip(chosen[False], chosen[True]))
    print(f"the move chosen differs in {differ} of {len(positions)} positions ({differ / len(positions):.1%})")


if __name__ == "__main__":
    main()
