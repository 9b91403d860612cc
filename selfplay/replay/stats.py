"""Figures over a replay store's committed games: results, lengths, duplicates, repeated games and replayed
seeds, distinct openings, resignations, endgame mistakes."""

from __future__ import annotations

import hashlib
import re
from collections import Counter

RESULT_NAMES = {1: "Black won (1-0)", -1: "White won (0-1)", 0: "draw (1/2-1/2)"}
# Plies after which `replay_stats` counts the distinct openings of the games that reach them.
OPENING_PLIES = (4, 8, 16)
# Repeated games listed by their actors and seed indexes, for a look at them (`replay export`).
REPEAT_EXAMPLES = 5

_COMMENT = re.compile(r"\{[^}]*\}")
_PDN_RESULTS = frozenset(("1-0", "0-1", "1/2-1/2", "*"))


def game_moves(opening: str, pdn: str) -> list[str]:
    """A stored game's moves from the initial position, as written: its ballot moves (the record's opening,
    "start" for none), then the moves of its PDN text (which starts after them). Read from the text alone,
    without replaying the rules, so that every game of a long run is read in seconds."""
    movetext = " ".join(line for line in pdn.splitlines() if not line.lstrip().startswith("["))
    words = _COMMENT.sub(" ", movetext).split()
    moves = [w for w in words if w[:1].isdigit() and not w.endswith(".") and w not in _PDN_RESULTS]
    return (opening.split() if opening != "start" else []) + moves


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
    # Games that play the same moves as an earlier game (two seeds can meet on one game by chance), and
    # games whose actor played the same (seed, seed index) before (a resumed actor must never do that).
    first_of_sequence: dict[bytes, tuple[int, int]] = {}
    repeats: dict[bytes, list[tuple[int, int]]] = {}
    repeated_games = repeated_positions = 0
    seeds_seen: set[tuple[int, int, int]] = set()
    replayed_seeds = 0
    openings: dict[int, set[str]] = {plies: set() for plies in OPENING_PLIES}
    endgame = EndgameMistakes()
    endgame_per_checkpoint: dict[tuple[int, str], EndgameMistakes] = {}
    for game in reader.iter_games():
        # A replayed seed of an actor plays the same game again: the same seed and record, twice.
        key = (game.actor_id, game.seed, game.pdn)
        if key in seen:
            duplicate_games += 1
            duplicate_positions += game.length
        seen.add(key)
        seed_key = (game.actor_id, game.seed, game.seed_index)
        replayed_seeds += seed_key in seeds_seen
        seeds_seen.add(seed_key)
        moves = game_moves(game.opening, game.pdn)
        sequence = hashlib.blake2b(" ".join(moves).encode(), digest_size=16).digest()
        where = (game.actor_id, game.seed_index)
        if sequence in first_of_sequence:
            repeated_games += 1
            repeated_positions += game.length
            repeats.setdefault(sequence, [first_of_sequence[sequence]]).append(where)
        else:
            first_of_sequence[sequence] = where
        for plies, seen_openings in openings.items():
            if len(moves) >= plies:
                seen_openings.add(" ".join(moves[:plies]))
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
        "repeated_games": repeated_games,
        "repeated_positions": repeated_positions,
        # A few repeated games: each a list of [actor id, seed index] of the games that played it.
        "repeated_examples": [[list(w) for w in games_of] for games_of in list(repeats.values())[:REPEAT_EXAMPLES]],
        "replayed_seeds": replayed_seeds,
        "distinct_openings": {str(plies): len(seen_openings) for plies, seen_openings in openings.items()},
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
