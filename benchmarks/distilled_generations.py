"""The learning curve of a distilled loop run (`checkers-zero distilled loop`, docs/distilled-loop.md): every
promoted generation against generation 0 and against the whole player, at 0.1 s a move on a game clock, both
with the largest endgame database built, over the ballot split over processes (train.arena.split_match); then
the run's own record of each gate beside them.

    python benchmarks/distilled_generations.py --run RUN [--processes 2] [--first N] [--against default]
        [--generations 2 3]

A line a generation: its games and positions behind it, and each match's Elo with its 95 % interval.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from selfplay.actors.actor import load_ballot
from selfplay.replay.replay_buffer import ReplayReader
from train.arena.generation_gate import generation_decisions
from train.arena.match import format_elo, format_elo_interval, score_statistics
from train.arena.split_match import play_split_match
from zero.distilled.model import load_eval
from zero.run.rundir import RunDir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, type=Path)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--first", type=int, help="only the ballot's first N openings (2N games)")
    parser.add_argument("--budget", default="t0+0.1", help="each player's budget (default: a 0.1 s a move clock)")
    parser.add_argument("--against", default="mcts:t0+0.1:dbleaves:book",
                        help="the second yardstick, a player spec (default: the whole player, the network's MCTS "
                             "at the matches' 0.1 s a move)")
    parser.add_argument("--generations", type=int, nargs="+",
                        help="only these generations' matches (default: every promoted one)")
    args = parser.parse_args()
    run = RunDir(args.run)
    openings = load_ballot("openings/acf_3move_144.txt")[:args.first]
    decisions = generation_decisions(run.root)
    print(f"{run.root}: {len(decisions)} gates, {sum(e['decision'] == 'promote' for e in decisions)} promoted; "
          f"{ReplayReader(run.root).total_positions():,} positions in the store; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    for entry in decisions:
        stages = "; ".join(f"{s['budget']}: {s['decision']} after {s['pairs']} pairs, Elo {s['elo']:+.0f} "
                           f"({s['low']:+.0f} .. {s['high']:+.0f})" for s in entry["stages"])
        print(f"  cycle {entry['cycle']}: {entry['decision']} ({stages})")
    zero = run.initial_evaluation()
    generations = [(e["generation"], Path(e["candidate"])) for e in decisions if e["decision"] == "promote"
                   and (args.generations is None or e["generation"] in args.generations)]
    for generation, path in generations:
        made = load_eval(path).meta.get("made_from", {})
        line = [f"generation {generation} ({path.name}; {made.get('store_positions', 0):,} positions played)"]
        for label, other in (("generation 0", f"distilled:{zero}:{args.budget}:db:book"),
                             (args.against, args.against if ":" in args.against else f"{args.against}:{args.budget}")):
            started = time.time()
            result = play_split_match(f"distilled:{path}:{args.budget}:db:book", other, openings, args.processes)
            stats = score_statistics(result.units())
            line.append(f"against {label}: +{result.wins} ={result.draws} -{result.losses}, "
                        f"{format_elo(stats.elo)} ({format_elo_interval(*stats.elo_ci95)}), "
                        f"{(time.time() - started) / 60:.0f} min")
        print("; ".join(line), flush=True)


if __name__ == "__main__":
    main()
