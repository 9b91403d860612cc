"""`checkers-zero serve`: play against the default player or a checkpoint in the browser (play.server)."""

from __future__ import annotations

import argparse
import sys

from play.engine import Engine, EngineError, add_engine_arguments
from play.server import DEFAULT_HOST, DEFAULT_PORT, PlayServer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_engine_arguments(parser, plays=True)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to bind (default {DEFAULT_HOST}: this machine only)")
    parser.add_argument("--verbose", action="store_true", help="log every request")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        print(f"checkers-zero serve: --port {args.port}: a port is 0 (any free one) to 65535", file=sys.stderr)
        return 2
    # Loading the engine and compiling the search take seconds (more after an install): say so at once.
    print("checkers-zero serve: loading the engine and preparing the search ...", flush=True)
    try:
        engine = Engine.load(args.checkpoint, endgame_database=not args.no_egdb, threads=args.threads,
                             opening_book=not args.no_book)
    except EngineError as exc:
        print(f"checkers-zero serve: {exc}", file=sys.stderr)
        return 2
    try:
        server = PlayServer(engine, args.host, args.port)
    except OSError as exc:
        print(f"checkers-zero serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    engine.warm_up()  # after the port is ours (a port in use is said at once), before the person's first move
    server.verbose = args.verbose
    print(f"Playing {engine.name}: open {server.url} in your browser (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
