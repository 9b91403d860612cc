"""benchmarks/gpu_lease.sh off a GPU machine: it checks the device and its variables first, and a stage that
fails stops it with one line and a non-zero status (the script is run with fakes for the device and Python)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_lease.sh"


def fake(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


def lease(tmp_path: Path, env: dict[str, str], gpu: bool) -> subprocess.CompletedProcess:
    """The script in an empty folder, with a PATH of fakes: python3 that fails the loop (and passes any other
    call), nvidia-smi when `gpu`, and the few tools it uses besides."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake(bin_dir, "python3", 'for a in "$@"; do [ "$a" = loop ] && { echo "loop broke"; exit 3; }; done; exit 0')
    if gpu:
        fake(bin_dir, "nvidia-smi", 'echo "GPU 0: Fake"')
    for tool in ("date", "tee", "grep", "tail", "nproc", "timeout", "ls", "tar", "cp"):
        found = next((Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists()), None)
        if found is not None:
            (bin_dir / tool).symlink_to(found)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(["/bin/bash", str(SCRIPT)], cwd=work, capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir), "HOME": str(tmp_path), **env})


def test_without_out_it_stops_in_one_line(tmp_path):
    # Before: "OUT: unbound variable", and the script went on.
    done = lease(tmp_path, {}, gpu=True)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "OUT is not set" in done.stderr, done.stderr


def test_without_a_gpu_it_stops_in_one_line(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    done = lease(tmp_path, {"OUT": str(out)}, gpu=False)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "no GPU here" in done.stderr, done.stderr
    assert not any(out.iterdir())  # nothing started


@pytest.mark.parametrize("variable, value", [("LOOP_MIN", "five"), ("BUDGET_S", "1e9"), ("FROM", "absent.pt")])
def test_a_bad_variable_stops_it_in_one_line(tmp_path, variable, value):
    out = tmp_path / "out"
    out.mkdir()
    done = lease(tmp_path, {"OUT": str(out), variable: value}, gpu=True)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and f"{variable}={value}" in done.stderr, done.stderr


def test_a_failed_loop_is_a_failed_lease(tmp_path):
    # Before: the loop's failure was echoed, and the script exited 0.
    out = tmp_path / "out"
    out.mkdir()
    done = lease(tmp_path, {"OUT": str(out), "RUNS": "gpu=", "BUDGET_S": "0"}, gpu=True)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [f"gpu_lease.sh: loop gpu exited 3 (its log: {out}/gpu.log)"], \
        done.stderr
    assert (out / "gpu.log").read_text() == "loop broke\n"
