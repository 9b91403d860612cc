"""Shipping a distilled evaluation: the distilled loop's best generation (train.loop.distilled_loop) replaces
the shipped evaluation (zero.distilled.model.DEFAULT_DISTILLED) when the run's gates tie the two, with the lines
of its model card: the promotions that made it (`checkers-zero distilled ship`)."""

from __future__ import annotations

from pathlib import Path

from train.arena.generation_gate import generation_decisions
from zero.run.config import atomic_write_bytes, file_sha256
from zero.run.rundir import RunDir


class ShipError(ValueError):
    """A run whose best evaluation cannot be shipped; the message says why."""


def lineage(run: RunDir) -> list[str]:
    """The promotions that made the run's best, oldest first: one line a generation, with its gate's stages."""
    lines = []
    for entry in generation_decisions(run.root):
        if entry["decision"] == "promote":
            stages = "; ".join(f"{s['budget']}: {s['elo']:+.0f} ({s['low']:+.0f} .. {s['high']:+.0f}) after "
                               f"{s['pairs']} pairs" for s in entry["stages"])
            lines.append(f"generation {entry['generation']}: {Path(entry['candidate']).name} (cycle "
                         f"{entry['cycle']}), over generation {entry['generation'] - 1}: {stages}")
    return lines


def ship_best(run_dir: Path, shipped: Path, force: bool = False) -> list[str]:
    """Replace the shipped evaluation `shipped` by the run's best generation; the lines for its model card.

    A generation won its gates against the one before it, back to the run's generation 0, so it beats the
    shipped evaluation only when that is the run's generation 0: otherwise (another run shipped since, say) no
    gate ever played the two, and only `force` ships it."""
    from zero.distilled.model import load_eval

    run = RunDir(run_dir)
    if not run.distilled_config_file.exists():
        raise ShipError(f"{run_dir}: not a distilled loop's run (no {run.distilled_config_file.name})")
    best = run.read_best()
    if best is None or best.step == 0:
        raise ShipError(f"{run_dir}: its best is generation 0, the evaluation it started from; nothing to ship")
    load_eval(best.path)  # a damaged file is refused in one line, before the shipped one is touched
    initial = run.initial_evaluation()
    best_sha = file_sha256(best.path)
    shipped_sha = file_sha256(shipped) if shipped.is_file() else None
    if shipped_sha == best_sha:
        raise ShipError(f"{shipped} is generation {best.step} of {run_dir} already")
    if shipped_sha is not None and not force and (not initial.exists() or file_sha256(initial) != shipped_sha):
        raise ShipError(f"{run_dir}'s generation 0 is not {shipped}: no gate played its best against the shipped "
                        f"evaluation (a match can: benchmarks/distilled_generations.py); --force ships it anyway")
    atomic_write_bytes(shipped, best.path.read_bytes())
    return [f"{shipped}: generation {best.step} of {run.root} ({best.path.name}, sha256 {best_sha[:12]}...)",
            *lineage(run)]
