"""Figures over a replay store's committed games: results, lengths, duplicates, resignations, endgame mistakes."""

from __future__ import annotations

from collections import Counter

RESULT_NAMES = {1: "Black won (1-0)", -1: "White won (0-1)", 0: "draw (1/2-1/2)"}


def _percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = (len(sorted_values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def replay_stats(reader, egdb=None) -> dict:
    """Figures over all committed games (read from the per-game table only; positions are not read); with
    an endgame database (zero.endgames.egdb.Egdb), each game's moves are judged against it from its PDN text."""
    from zero.corpus.pdn import PdnGame, read_pdn_text
    from zero.endgames.endgame_judge import EndgameMistakes, judge_game

    lengths: list[int] = []
    results: Counter[int] = Counter()
    terminations: Counter[str] = Counter()
    per_actor: dict[int, list[int]] = {}
    per_checkpoint: dict[tuple[int, str], list[int]] = {}
    played_on = wrong = 0
    seen: set[tuple[int, int, str]] = set()
    duplicate_games = duplicate_positions = 0
    endgame = EndgameMistakes()
    endgame_per_checkpoint: dict[tuple[int, str], EndgameMistakes] = {}
    for game in reader.iter_games():
        # A replayed seed of an actor plays the same game again: the same seed and record, twice.
        key = (game.actor_id, game.seed, game.pdn)
        if key in seen:
            duplicate_games += 1
            duplicate_positions += game.length
        seen.add(key)
        lengths.append(game.length)
        results[game.winner] += 1
        terminations[game.termination] += 1
        per_actor.setdefault(game.actor_id, [0, 0])
        per_actor[game.actor_id][0] += 1
        per_actor[game.actor_id][1] += game.length
        key = (game.model_version, game.checkpoint)
        per_checkpoint.setdefault(key, [0, 0])
        per_checkpoint[key][0] += 1
        per_checkpoint[key][1] += game.length
        if egdb is not None:
            (replayed,) = read_pdn_text(game.pdn)
            if not isinstance(replayed, PdnGame):
                raise ValueError(f"game {game.game_id} of actor {game.actor_id}: its PDN does not replay: {replayed}")
            mistakes = endgame_per_checkpoint.setdefault(key, EndgameMistakes())
            # Both sides are the same network in self-play.
            for side in judge_game(egdb, replayed.start, replayed.moves, int(game.winner)):
                mistakes += side
                endgame += side
        if game.would_resign_side and game.termination != "resignation":
            # Played on past the point where this side would have resigned: the resignation was wrong
            # unless that side went on to lose.
            played_on += 1
            wrong += game.winner != -game.would_resign_side
    lengths.sort()
    games = len(lengths)
    return {
        "games": games,
        "positions": sum(lengths),
        "actors": {str(a): {"games": g, "positions": p} for a, (g, p) in sorted(per_actor.items())},
        "results": {RESULT_NAMES[w]: results[w] for w in (1, -1, 0)},
        "length": {
            "mean": sum(lengths) / games if games else 0.0,
            "min": lengths[0] if games else 0,
            "p10": _percentile(lengths, 0.10),
            "p50": _percentile(lengths, 0.50),
            "p90": _percentile(lengths, 0.90),
            "max": lengths[-1] if games else 0,
        },
        "duplicate_games": duplicate_games,
        "duplicate_positions": duplicate_positions,
        "terminations": dict(terminations.most_common()),
        "resignations": terminations.get("resignation", 0),
        "played_on_past_resignation": played_on,
        "wrong_resignations": wrong,
        "wrong_resignation_rate": wrong / played_on if played_on else None,
        "endgame": None if egdb is None else {"pieces": egdb.max_pieces, "moves": endgame.moves,
                                               "mistakes": endgame.mistakes, "rate": endgame.rate,
                                               "wins_held": endgame.wins_held, "wins_let_go": endgame.wins_let_go},
        "checkpoints": [
            {"model_version": version, "checkpoint": name, "games": g, "positions": p}
            | ({} if egdb is None else {"endgame": endgame_per_checkpoint[version, name].to_json()})
            for (version, name), (g, p) in sorted(per_checkpoint.items())
        ],
    }
