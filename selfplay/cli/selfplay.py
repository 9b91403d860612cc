"""`checkers-zero selfplay --run DIR --actors N [--games M]`: N actor processes writing to DIR's replay store.

Each actor is a spawned process with its own copy of the network (selfplay.actors.actor.run_actor). Ctrl-C once:
the actors start no new game and finish the ones in flight; Ctrl-C again: they discard those and exit.
Either way every finished game is committed and none is half-written.
"""

from __future__ import annotations

import argparse
import os
import queue
import signal
import sys
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from zero.run.config import add_config_arguments

    parser.add_argument("--run", required=True, metavar="DIR", help="run directory (replay store, checkpoints)")
    parser.add_argument("--actors", type=int, default=1, metavar="N", help="actor processes (default 1)")
    parser.add_argument("--games", type=int, default=None, metavar="M",
                        help="stop after M games in all (default: play until Ctrl-C)")
    parser.add_argument("--first-actor", type=int, default=0, metavar="ID",
                        help="id of the first actor (to run more actors on another machine; default 0)")
    add_config_arguments(parser)


def games_per_actor(games: int | None, actors: int) -> list[int | None]:
    """Split a total game count over the actors as evenly as possible."""
    if games is None:
        return [None] * actors
    return [games // actors + (i < games % actors) for i in range(actors)]


def check_inputs(run_dir: Path, cfg, actor_ids: list[int]) -> str | None:
    """What would stop every actor at once (no network to load, a bad ballot, actor ids another process
    writes: a running loop's actors, a damaged replay store), found before starting them."""
    from selfplay.actors.actor import current_best, load_ballot
    from selfplay.replay.replay_buffer import ReplayError, refuse_damaged_store
    from zero.corpus.openings import BallotError
    from zero.net.checkpoint import CheckpointError
    from zero.run.rundir import RunDir, RunDirError

    run = RunDir(run_dir)
    for actor_id in actor_ids:
        try:
            run.take_replay_lock(actor_id).close()
        except RunDirError as exc:
            return (f"{exc} (a running loop's actors hold ids from 0 on): stop it, or give this command "
                    f"--first-actor above the ids in use")

    try:
        refuse_damaged_store(run_dir)
    except ReplayError as exc:
        return str(exc)
    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            return "device = cuda, but torch sees no GPU on this machine (use cpu or auto)"
    try:
        current_best(run_dir)
        load_ballot(cfg.openings)
    except (CheckpointError, BallotError, FileNotFoundError, ValueError, KeyError) as exc:
        return str(exc)
    return None


def run(args: argparse.Namespace) -> int:
    import multiprocessing as mp

    from tqdm import tqdm

    from selfplay.actors.actor import SelfPlayConfig, run_actor
    from zero.run.config import ConfigError, load_config, write_run_record

    if args.actors < 1:
        print("--actors must be at least 1", file=sys.stderr)
        return 2
    if args.games is not None and args.games < 1:
        print("--games must be at least 1", file=sys.stderr)
        return 2
    try:
        cfg = load_config(SelfPlayConfig, args.config, args.overrides)
        cfg.validate()
    except (ConfigError, ValueError) as exc:
        print(f"selfplay: {exc}", file=sys.stderr)
        return 2
    run_dir = Path(args.run)
    run_dir.mkdir(parents=True, exist_ok=True)
    actor_ids = list(range(args.first_actor, args.first_actor + args.actors))
    problem = check_inputs(run_dir, cfg, actor_ids)
    if problem:
        print(f"selfplay: {problem}", file=sys.stderr)
        return 2
    write_run_record(run_dir, cfg, {"seed": cfg.seed, "first_actor": args.first_actor, "actors": args.actors},
                     name=f"selfplay-{actor_ids[0]}-{actor_ids[-1]}")

    ctx = mp.get_context("spawn")
    progress = ctx.Queue()
    procs = []
    for actor_id, games in zip(actor_ids, games_per_actor(args.games, args.actors)):
        p = ctx.Process(target=run_actor, args=(str(run_dir), actor_id, cfg, games, progress, False),
                        name=f"actor-{actor_id}")
        p.start()
        procs.append(p)

    interrupts = 0

    def on_sigint(signum, frame):
        nonlocal interrupts
        interrupts += 1
        # The actors ignore SIGINT; this process tells them what to do.
        sig = signal.SIGUSR1 if interrupts == 1 else signal.SIGTERM
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, sig)
        if interrupts == 1:
            tqdm.write("stopping: finishing the games in flight (Ctrl-C again discards them)")
        else:
            tqdm.write("stopping: discarding the games in flight")

    def on_sigterm(signum, frame):
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGINT, on_sigint)
    signal.signal(signal.SIGTERM, on_sigterm)

    latest = {}
    t0 = time.monotonic()
    with tqdm(total=args.games, unit="game", desc="self-play", dynamic_ncols=True) as bar:
        while any(p.is_alive() for p in procs) or not progress.empty():
            try:
                stats = progress.get(timeout=0.5)
            except queue.Empty:
                continue
            before = latest.get(stats.actor_id)
            latest[stats.actor_id] = stats
            bar.update(stats.games - (before.games if before else 0))
            stored = sum(s.positions for s in latest.values())
            played = sum(s.moves for s in latest.values())  # also counts the games still in flight
            hours = (time.monotonic() - t0) / 3600
            bar.set_postfix(positions=stored, moves_per_hour=f"{played / max(hours, 1e-9):.0f}",
                            checkpoint=stats.checkpoint)
    for p in procs:
        p.join()
    _print_summary(list(latest.values()), time.monotonic() - t0)
    failed = [p.name for p in procs if p.exitcode != 0]
    if failed:
        print(f"selfplay: {', '.join(failed)} failed (see the log above)", file=sys.stderr)
        return 1
    return 130 if interrupts else 0


def _print_summary(stats: list, seconds: float) -> None:
    games = sum(s.games for s in stats)
    positions = sum(s.positions for s in stats)
    if not stats:
        print("no actor reported")
        return
    results = {k: sum(s.results[k] for s in stats) for k in ("black", "white", "draw")}
    would = sum(s.would_resign for s in stats)
    wrong = sum(s.wrong_resignations for s in stats)
    leaves = sum(s.leaves for s in stats)
    tree = sum(s.tree_seconds for s in stats)
    evaluate = sum(s.evaluate_seconds for s in stats)
    print(f"{games} games, {positions} positions in {seconds:.0f} s "
          f"({positions / max(seconds, 1e-9) * 3600:.0f} positions/hour); "
          f"Black {results['black']}, White {results['white']}, draws {results['draw']}; "
          f"{sum(s.resigned for s in stats)} resigned, {sum(s.discarded_games for s in stats)} discarded")
    if would:
        print(f"wrong resignations: {wrong} of {would} play-through games with a resignation "
              f"({100 * wrong / would:.0f}%)")
    if leaves:
        print(f"network evaluations: {leaves}; mean time per actor: search {tree / len(stats):.1f} s, "
              f"inference {evaluate / len(stats):.1f} s")
