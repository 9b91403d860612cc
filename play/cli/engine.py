"""`checkers-zero engine`: the JSON-lines analysis engine on stdin and stdout (`play/ENGINE_PROTOCOL.md`)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from play.engine import add_no_egdb_argument, add_threads_argument
from play.queries import EngineSettings

DEFAULTS = EngineSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Read JSON queries from stdin, one per line, and write one JSON answer per analysed "
                          "position to stdout; the protocol is play/ENGINE_PROTOCOL.md. Queries in flight are "
                          "searched together. A {\"stop\": true} line or the end of the input ends it, after "
                          "answering every query already read.")
    parser.add_argument("--sims", type=int, default=DEFAULTS.default_simulations, metavar="N",
                        help="simulations for a query that names no limit "
                             f"(default {DEFAULTS.default_simulations})")
    add_analysis_engine_arguments(parser)


def add_analysis_engine_arguments(parser: argparse.ArgumentParser, slots: int = DEFAULTS.slots) -> None:
    """The options of every command built on the analysis engine (engine, review)."""
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="network: a checkpoint file or a run directory (its best network); default the shipped one")
    add_no_egdb_argument(parser)
    parser.add_argument("--slots", type=int, default=slots, metavar="N",
                        help=f"positions searched together in one batched search (default {slots})")
    parser.add_argument("--tree-nodes", type=int, default=DEFAULTS.tree_nodes, metavar="N",
                        help=f"nodes a search tree holds to begin with; a search for time or simulations that fills "
                             f"it grows every tree's, up to a quarter of the memory this process may have over them "
                             f"all (default {DEFAULTS.tree_nodes})")
    add_threads_argument(parser)
    parser.add_argument("--cache", type=int, default=DEFAULTS.cache_positions, metavar="N",
                        help=f"network answers remembered by position, 0 = none (default {DEFAULTS.cache_positions})")


def engine_settings(args: argparse.Namespace, default_simulations: int) -> EngineSettings:
    return EngineSettings(slots=args.slots, tree_nodes=args.tree_nodes, default_simulations=default_simulations,
                          cache_positions=args.cache, search=replace(DEFAULTS.search, threads=args.threads))


def run(args: argparse.Namespace) -> int:
    from play.api import Engine
    from play.engine import EngineError
    from play.protocol import serve

    try:
        engine = Engine(args.checkpoint, endgame_database=not args.no_egdb, settings=engine_settings(args, args.sims))
    except (EngineError, ValueError) as exc:
        print(f"checkers-zero engine: {exc}", file=sys.stderr)
        return 2
    # The input is read by a thread of its own, which a session that ends while the client still holds the
    # pipe open leaves blocked in a read: on a file object of its own, so that the interpreter's shutdown,
    # which flushes sys.stdin, does not wait on that read's lock and abort ("Fatal Python error", exit 134).
    source = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    try:
        serve(engine, source, sys.stdout)
    except BrokenPipeError:  # the client went away: nobody is left to answer
        return 0
    return 0
