"""`checkers-zero replay ...`: look into a run's replay store.

`replay stats --run DIR` summarises the committed games: counts, results, lengths, how games ended,
resignations (and how often a resignation would have been wrong, from the games played on past one),
positions per checkpoint, and the solved-endgame mistake rate overall and per checkpoint (zero.endgame_judge). `replay export --run DIR --out FILE.pdn` writes every committed game as PDN.
`replay check --run DIR` verifies the store (every committed row readable, counts consistent, no duplicate
games) and names every damaged file; it exits 1 when it finds a problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

RESULT_NAMES = {1: "Black won (1-0)", -1: "White won (0-1)", 0: "draw (1/2-1/2)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="replay_command", metavar="ACTION", required=True)
    stats = sub.add_parser("stats", help="games, positions, results, lengths, resignations, positions per checkpoint",
                           description="Summarise the committed games of a run's replay store.")
    stats.add_argument("--run", required=True, type=Path, metavar="DIR", help="run directory (holds replay.zarr)")
    stats.add_argument("--json", action="store_true", help="print the figures as JSON instead of text")
    stats.add_argument("--no-endgame-judge", action="store_true",
                       help="leave out the solved-endgame mistake rate (moves judged against the largest endgame "
                            "database built; the 4-piece one is built on first use, in seconds)")
    export = sub.add_parser("export", help="write every committed game as PDN",
                            description="Write every committed game of a run's replay store to one PDN file.")
    export.add_argument("--run", required=True, type=Path, metavar="DIR", help="run directory (holds replay.zarr)")
    export.add_argument("--out", required=True, type=Path, metavar="FILE", help="PDN file to write")
    export.add_argument("--no-progress", action="store_true", help="no progress bar")
    check = sub.add_parser("check", help="verify the store: every committed row readable, counts, duplicates",
                           description="Read every committed row of a run's replay store, check the counts "
                                       "against the commit records and look for duplicate games; name every "
                                       "damaged file. Exit 1 when anything is wrong.")
    check.add_argument("--run", required=True, type=Path, metavar="DIR", help="run directory (holds replay.zarr)")


def run(args: argparse.Namespace) -> int:
    from selfplay.replay_buffer import ReplayError, ReplayReader
    from zero.rundir import RunDir

    store = RunDir(args.run).replay_store
    if not (store / "zarr.json").is_file():
        print(f"error: no replay store at {store}", file=sys.stderr)
        return 2
    if args.replay_command == "check":
        return check(args.run)
    try:
        reader = ReplayReader(args.run)
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.replay_command == "stats":
        egdb = None
        if not args.no_endgame_judge:
            from zero.egdb_build import largest_available

            egdb = largest_available()
        figures = replay_stats(reader, egdb)
        print(json.dumps(figures, indent=2) if args.json else format_stats(figures, args.run))
        return 0
    if args.replay_command == "export":
        return export_pdn(reader, args.out, progress=not args.no_progress)
    raise AssertionError(args.replay_command)


def _percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    k = (len(sorted_values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def replay_stats(reader, egdb=None) -> dict:
    """Figures over all committed games (read from the per-game table only; positions are not read); with
    an endgame database (zero.egdb.Egdb), each game's moves are judged against it from its PDN text."""
    from zero.endgame_judge import EndgameMistakes, judge_game
    from zero.pdn import PdnGame, read_pdn_text

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


def format_stats(figures: dict, run_dir: Path) -> str:
    from zero.endgame_judge import EndgameMistakes

    games = figures["games"]

    def share(count: int) -> str:
        return f"{count:>9}  ({100 * count / games:5.1f}%)" if games else f"{count:>9}"

    length = figures["length"]
    lines = [
        f"replay store of {run_dir}",
        f"  games:      {games}",
        f"  positions:  {figures['positions']}",
        f"  duplicates: {figures['duplicate_games']} games, {figures['duplicate_positions']} positions "
        f"(repeats of a game already stored; there should be none)",
        f"  actors:     {len(figures['actors'])}  "
        + ", ".join(f"{a}: {v['games']} games" for a, v in figures["actors"].items()),
        "  results:",
        *(f"    {name:<18}{share(count)}" for name, count in figures["results"].items()),
        f"  game length (plies): mean {length['mean']:.1f}, min {length['min']}, p10 {length['p10']:.0f}, "
        f"median {length['p50']:.0f}, p90 {length['p90']:.0f}, max {length['max']}",
        "  how games ended:",
        *(f"    {name:<18}{share(count)}" for name, count in figures["terminations"].items()),
        f"  resignations: {figures['resignations']}",
    ]
    rate = figures["wrong_resignation_rate"]
    lines.append(
        f"  played on past a would-be resignation: {figures['played_on_past_resignation']} games, "
        + (f"{figures['wrong_resignations']} of them not lost: wrong-resignation rate {100 * rate:.1f}%"
           if rate is not None else "no wrong-resignation rate yet")
    )
    endgame = figures["endgame"]
    if endgame is not None:
        judged = EndgameMistakes(endgame["moves"], endgame["mistakes"], endgame["wins_held"], endgame["wins_let_go"])
        lines.append(f"  solved-endgame mistakes ({endgame['pieces']}-piece database): {judged} "
                     "(moves with a choice that gave up a database win or draw; games with a position proven won "
                     "for a side that side did not win)")
    lines.append("  positions per checkpoint:")
    lines.append(f"    {'version':>8}  {'games':>8}  {'positions':>10}  {'endgame mistakes':<32}  checkpoint")
    for row in figures["checkpoints"]:
        judged = str(EndgameMistakes.from_json(row["endgame"])) if endgame is not None else "not judged"
        lines.append(f"    {row['model_version']:>8}  {row['games']:>8}  {row['positions']:>10}  {judged:<32}  "
                     f"{row['checkpoint']}")
    return "\n".join(lines)


def check(run_dir: Path) -> int:
    """`replay check`: the store's own verification, then duplicates over the games it could read."""
    from selfplay.reanalysis_store import check_reanalysis
    from selfplay.replay_buffer import ReplayError, ReplayReader, check_store

    report = check_store(run_dir)
    print(f"replay store of {run_dir}: {report.actors} actors read, {report.games} committed games, "
          f"{report.positions} positions")
    problems = list(report.problems)
    reanalysis = check_reanalysis(run_dir)
    if reanalysis.workers or reanalysis.problems:
        print(f"reanalysis: {reanalysis.workers} reanalysers read, {reanalysis.targets} fresh targets")
    problems += reanalysis.problems
    if not problems:
        try:
            figures = replay_stats(ReplayReader(run_dir))
        except ReplayError as exc:
            problems.append(str(exc))
        else:
            if figures["duplicate_games"]:
                problems.append(f"{figures['duplicate_games']} duplicate games ({figures['duplicate_positions']} "
                                f"positions): repeats of a game already stored")
    for problem in problems:
        print(f"problem: {problem}")
    print("ok: every committed row is readable, the counts agree and no game is stored twice" if not problems
          else f"{len(problems)} problem(s) found")
    return 1 if problems else 0


def export_pdn(reader, out: Path, progress: bool = True) -> int:
    """Write the stored PDN text of every committed game to `out` (atomically); 0, or 1 if some had none."""
    from tqdm import tqdm

    from zero.config import atomic_write_bytes

    texts: list[str] = []
    missing: list[int] = []
    for game in tqdm(reader.iter_games(), total=reader.total_games(), unit="game", desc="export",
                     disable=not progress, file=sys.stderr):
        if not game.pdn.strip():
            missing.append(game.game_id)
            continue
        texts.append(game.pdn.rstrip("\n") + "\n\n")
    atomic_write_bytes(out, "".join(texts).encode("utf-8"))
    print(f"wrote {len(texts)} games to {out}")
    if missing:
        print(f"error: {len(missing)} games have no PDN text (game ids {missing[:10]}"
              f"{' ...' if len(missing) > 10 else ''})", file=sys.stderr)
        return 1
    return 0
