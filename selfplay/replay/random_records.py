"""Self-play game records from random legal play, for testing and measuring the replay store.

The games obey the rules (each move is legal, draws and losses as `zero.rules.game.Game` decides them, PDN text that
the PDN reader replays); the search fields (visit shares, root values, full-search flags) are random but have
the shapes and invariants real actors produce. The same seed always gives the same record.
"""

from __future__ import annotations

import numpy as np

from selfplay.replay.records import POSITION_FIELDS, GameRecord, PositionRows, padded_policy
from zero.corpus.pdn import write_game
from zero.net.encoding import move_action
from zero.rules.game import Game, Termination


def random_game_record(seed: int, *, max_plies: int = 160, checkpoint: str = "random",
                       model_version: int = 0) -> GameRecord:
    """One game of uniformly random legal moves; sometimes resigned, sometimes with a would-be resignation."""
    rng = np.random.default_rng(seed)
    game = Game()
    resign_ply = int(rng.integers(8, max_plies)) if rng.random() < 0.1 else -1
    columns: dict[str, list] = {name: [] for name in POSITION_FIELDS}
    while game.outcome is None:
        if game.ply == resign_ply:
            game.finish(-1 if game.position.black_to_move else 1, Termination.RESIGNATION)
            break
        if game.ply == max_plies:
            game.finish(0, Termination.MAX_LENGTH)
            break
        position = game.position
        legal = game.legal_moves()
        actions = sorted({move_action(m, position.black_to_move) for m in legal})
        shares = rng.dirichlet(np.ones(len(actions)))
        row_actions, row_visits = padded_policy(np.array(actions), shares)
        forced = len(legal) == 1
        for name, value in (("black", position.black), ("white", position.white), ("kings", position.kings),
                            ("black_to_move", position.black_to_move), ("no_progress", game.no_progress[-1]),
                            ("repetitions", game.repetitions()), ("ply", game.ply),
                            ("policy_actions", row_actions), ("policy_visits", row_visits),
                            ("full_search", not forced and rng.random() < 0.75), ("forced", forced),
                            ("root_value", rng.uniform(-1, 1))):
            columns[name].append(value)
        game.play(legal[int(rng.integers(len(legal)))])
    n = game.ply
    rows = PositionRows.from_lists(columns)
    would_resign_side, would_resign_ply = 0, -1
    if game.outcome.termination != Termination.RESIGNATION and n > 4 and rng.random() < 0.3:
        would_resign_ply = int(rng.integers(2, n))
        would_resign_side = 1 if would_resign_ply % 2 == 0 else -1  # the side to move at that ply
    outcome = game.outcome
    pdn = write_game(game.moves, outcome.pdn_result, tags={
        "Event": "checkers-zero self-play (random)", "Round": str(seed),
        "Black": checkpoint, "White": checkpoint, "Termination": outcome.termination.value})
    return GameRecord(positions=rows, winner=outcome.winner, termination=outcome.termination.value, length=n,
                      opening="start", pdn=pdn, seed=seed, seed_index=seed, checkpoint=checkpoint,
                      model_version=model_version, would_resign_side=would_resign_side,
                      would_resign_ply=would_resign_ply)
