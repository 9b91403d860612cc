"""`checkers-zero replay ...`: look into a run's replay store.

`replay stats --run DIR` summarises the committed games: counts, results, lengths, duplicates, replayed seeds
and repeated games (the same moves as an earlier game), distinct openings after 4, 8 and 16 plies, how games ended,
resignations (and how often a resignation would have been wrong, from the games played on past one),
positions per checkpoint, and the solved-endgame mistake rate overall and per checkpoint (zero.endgames.endgame_judge).
`replay export --run DIR --out FILE.pdn` writes every committed game as PDN. `replay check --run DIR` verifies the store
(every committed row readable, counts consistent, no duplicate
games) and names every damaged file; it exits 1 when it finds a problem.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from selfplay.replay.stats import replay_stats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="replay_command", metavar="ACTION", required=True)
    stats = sub.add_parser("stats", help="games, positions, results, lengths, repeated games, openings, resignations, "
                                          "positions per checkpoint",
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
    from selfplay.replay.replay_buffer import ReplayError, ReplayReader
    from zero.run.rundir import RunDir

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
            from zero.endgames.egdb_build import largest_available

            egdb = largest_available()
        figures = replay_stats(reader, egdb)
        print(json.dumps(figures, indent=2) if args.json else format_stats(figures, args.run))
        return 0
    if args.replay_command == "export":
        return export_pdn(reader, args.out, progress=not args.no_progress)
    raise AssertionError(args.replay_command)




def format_stats(figures: dict, run_dir: Path) -> str:
    from zero.endgames.endgame_judge import EndgameMistakes

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
        f"  replayed seeds: {figures['replayed_seeds']} games (an actor's seed and seed index played again; "
        f"there should be none)",
        f"  repeated games: {figures['repeated_games']} games{_share_of(figures['repeated_games'], games)}, "
        f"{figures['repeated_positions']} positions (the same moves as an earlier game)"
        + "".join(f"\n    played by " + ", ".join(f"actor {a} seed index {i}" for a, i in example)
                  for example in figures["repeated_examples"]),
        "  distinct openings: " + ", ".join(f"{count} after {plies} plies"
                                            for plies, count in figures["distinct_openings"].items())
        + " (of the games that long)",
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


def _share_of(count: int, games: int) -> str:
    return f" ({100 * count / games:.2f} %)" if games else ""


def check(run_dir: Path) -> int:
    """`replay check`: the store's own verification, then duplicates over the games it could read."""
    from selfplay.replay.replay_buffer import ReplayError, ReplayReader, check_store

    report = check_store(run_dir)
    print(f"replay store of {run_dir}: {report.actors} actors read, {report.games} committed games, "
          f"{report.positions} positions")
    if report.reanalysers:
        print(f"reanalysis: {report.reanalysers} reanalysers read, {report.targets} fresh targets")
    problems = list(report.problems)
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

    from zero.run.config import atomic_write_bytes

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
