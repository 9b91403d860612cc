"""`checkers-zero classical fit`: the classical engine's evaluation fitted to the OCA games' results.

Reads OCA_2.0.pdn from the data folder (--data, else $CHECKERS_ZERO_DATA, else ../shared/data) or the file
--pdn names, and writes the weights file (--out; checkpoints/classical_eval.json, which the classical players
load and git tracks, only with --force): train/learner/classical_fit.py says how.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from zero.run.data import OCA_FILE, data_dir


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    f = sub.add_parser("fit", help="fit the evaluation's weights on the OCA train split and write them")
    f.add_argument("--data", type=Path, default=None,
                   help=f"data folder holding {OCA_FILE} (default $CHECKERS_ZERO_DATA, else ../shared/data)")
    f.add_argument("--pdn", type=Path, default=None, help=f"a PDN file instead of the data folder's {OCA_FILE}")
    f.add_argument("--out", type=Path, default=None,
                   help="weights file (default checkpoints/classical_eval.json, replaced only with --force)")
    f.add_argument("--force", action="store_true",
                   help="replace checkpoints/classical_eval.json, the weights every classical player loads")
    f.add_argument("--every", type=int, default=1, help="fit on every N-th train position (quick trials)")
    f.add_argument("--l2", type=float, default=None, help="L2 penalty on standardised features (default 1e-6)")


def run(args: argparse.Namespace) -> int:
    from train.learner.classical_fit import DEFAULT_L2, FitError, fit_and_write, format_fit
    from zero.yardsticks.classical import DEFAULT_EVAL

    if args.every < 1:
        print("error: --every must be at least 1", file=sys.stderr)
        return 2
    if args.out is None and DEFAULT_EVAL.exists() and not args.force:
        # The tracked weights: a trial fit (--every, --l2) run as listed would change every classical player.
        print(f"error: {DEFAULT_EVAL} holds the weights every classical player loads; give --out FILE to fit "
              f"elsewhere, or --force to replace them", file=sys.stderr)
        return 2
    pdn = args.pdn
    if pdn is None:
        folder = args.data or data_dir()
        if folder is None:
            print(f"error: no data folder: give --data DIR (holding {OCA_FILE}) or set CHECKERS_ZERO_DATA",
                  file=sys.stderr)
            return 2
        pdn = Path(folder) / OCA_FILE
    if not pdn.is_file():
        print(f"error: {pdn} not found", file=sys.stderr)
        return 2
    words = ["checkers-zero", "classical", "fit"]
    if args.every != 1:
        words += ["--every", str(args.every)]
    if args.l2 is not None:
        words += ["--l2", repr(args.l2)]
    if args.force:
        words.append("--force")
    try:
        doc = fit_and_write(pdn, args.out or DEFAULT_EVAL, args.every, DEFAULT_L2 if args.l2 is None else args.l2,
                            command=shlex.join(words))
    except FitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_fit(doc))
    print(f"weights written to {args.out or DEFAULT_EVAL}")
    return 0
