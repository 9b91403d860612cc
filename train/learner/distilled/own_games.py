"""The distilled evaluation learning from its own games: the replay store's positions of the alpha-beta
player's self-play (selfplay.actors.alphabeta_actor) as labels for train.learner.distilled.training.

Each quiet position of the newest `window` (the evaluation is asked only for quiet ones: captures are played
out first) is labelled with what its game knows of it: the search's score (the generation's own search a few
plies deep) and the game's result for the side to move, blended by the training settings, as Cake fitted its
evaluation to its bullet games' results and NNUE engines blend the search score with the result. Given a
teacher (the policy-value network, in a run's first generations), its value joins them as a prior: then the
teacher's value is the labels' `wdl` and the search's score their `searched` (training.targets:
`result_weight` blends in the result, then `searched_weight` the search); without one the search's expected
score is the `wdl` itself. Positions the endgame database answers never reach the store (a game ends at its
first one). A game's positions all go to one split (by a hash of its id), 1 in TEST_EVERY games to the
held-out test split.

The learning starts from the generation that played the games (`training.train`'s `initial`): what
the network taught generation 0 stays as a prior that its own games correct, rather than being learnt anew.
"""

from __future__ import annotations

import numpy as np

from selfplay.replay.replay_buffer import ReplayReader
from train.learner.distilled.labels import NO_RESULT, DistilledLabelError, choose_positions, teacher_wdl
from train.learner.pretrain_dataset import SPLITS

TEST_EVERY = 20  # one game in this many is held out


def own_game_labels(reader: ReplayReader, window: int, teacher=None, batch: int = 1024) \
        -> tuple[dict[str, np.ndarray], np.ndarray | None, int]:
    """(the label columns of training.train, the search scores for its `searched` or None, games
    read) of the quiet positions of the newest committed games holding `window` positions; teacher: a
    zero.net.inference.Evaluator whose values are the labels' wdl, or None (module doc)."""
    games = reader.newest_games(window)
    if not games:
        raise DistilledLabelError(f"no committed self-play games in {reader.path} to learn from")
    parts: dict[str, list[np.ndarray]] = {n: [] for n in ("black", "white", "kings", "black_to_move", "value",
                                                           "result", "split")}
    for game in games:
        rows = game.positions
        parts["black"].append(rows.black)
        parts["white"].append(rows.white)
        parts["kings"].append(rows.kings)
        parts["black_to_move"].append(rows.black_to_move)
        parts["value"].append(rows.root_value)
        parts["result"].append(game.results_for_side_to_move())
        test = hash_split(game.game_id)
        parts["split"].append(np.full(len(rows), SPLITS.index("test" if test else "train"), np.uint8))
    cols = {n: np.concatenate(v) for n, v in parts.items()}
    chosen = np.zeros((len(cols["black"]), 6), np.int64)
    choose_positions(cols["black"], cols["white"], cols["kings"], cols["black_to_move"], 0, 0, chosen)
    quiet = chosen[:, 0] == 1
    expected = ((cols.pop("value")[quiet].astype(np.float64) + 1) / 2)
    labels = {n: v[quiet] for n, v in cols.items()}
    n = len(labels["black"])
    labels["result"] = labels["result"].astype(np.int8)
    labels["exact"] = np.full(n, NO_RESULT, np.int8)
    labels["walked"] = np.zeros(n, bool)
    if teacher is None:
        labels["wdl"] = np.stack([expected, np.zeros(n), 1 - expected], axis=1).astype(np.float32)
        return labels, None, len(games)
    labels["wdl"] = teacher_wdl(teacher, labels["black"], labels["white"], labels["kings"], labels["black_to_move"],
                                batch)
    # The search's expected score as the logit (thousandths) training.targets reads; a proven
    # result's 0 or 1 as the logit whose sigmoid rounds to it in float32.
    clipped = np.clip(expected, 1e-9, 1 - 1e-9)
    searched = np.round(1000 * np.log(clipped / (1 - clipped))).astype(np.int32)
    return labels, searched, len(games)


def hash_split(game_id: int) -> bool:
    """Whether the game is held out: a fixed function of its id, so a position never changes sides as the
    window moves."""
    mixed = (game_id * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF  # Fibonacci hashing: ids in a row spread
    return (mixed >> 32) % TEST_EVERY == 0
