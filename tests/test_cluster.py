"""The loop on a Ray cluster: a one-node cluster on 127.0.0.1 (`ray start --head`), the real loop command with
--cluster on a tiny network, and a Ray worker killed mid-run (Ray restarts the role, no committed game is lost)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("ray", reason="the cluster tests need Ray: pip install -e \".[cluster]\"")

from processes import OutputReader, reaped, wait_until  # noqa: E402
from test_loop import TINY_CONFIG, check_invariants, committed_games, trainer_step  # noqa: E402
from zero.net.checkpoint import save_checkpoint  # noqa: E402
from zero.net.network import NetworkConfig, PolicyValueNet  # noqa: E402
from zero.run.data import data_file  # noqa: E402

pytestmark = pytest.mark.slow

# Loopback only: Ray turns 127.0.0.1 into the machine's outward address unless told that this is no
# multi-machine cluster; the cluster exists for this test alone, so it needs no token either.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head():
    """A one-node Ray cluster on 127.0.0.1 (three logical CPUs: an actor, the trainer, the gatekeeper)."""
    port = free_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    env = dict(os.environ, **RAY_ENV)
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
                             "--num-cpus=3", "--num-gpus=0", "--include-dashboard=false", "--disable-usage-stats"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        with socket.socket() as probe:
            deadline = time.monotonic() + 60
            while probe.connect_ex(("127.0.0.1", port)) != 0:
                assert head.poll() is None and time.monotonic() < deadline, "ray start --head did not come up"
                time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(head.pid, signal.SIGTERM)  # ray start --block takes its processes down with it
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait()


def role_host_of_actor(run: Path, actor_id: int) -> int | None:
    """The Ray worker process whose child holds the replay lock of `actor_id` (None while there is none)."""
    lock = str(run / "replay-locks" / f"actor-{actor_id}.lock")
    hosts = subprocess.run(["pgrep", "-f", "ray::RoleHost"], capture_output=True, text=True).stdout.split()
    for host in map(int, hosts):
        for child in subprocess.run(["pgrep", "-P", str(host)], capture_output=True, text=True).stdout.split():
            try:
                fds = os.listdir(f"/proc/{child}/fd")
                if any(os.readlink(f"/proc/{child}/fd/{fd}") == lock for fd in fds):
                    return host
            except OSError:
                continue
    return None


def tiny_run(tmp_path: Path) -> tuple[Path, Path]:
    """A config for a tiny loop with one actor (test_loop's settings) and the run directory it goes to."""
    torch.manual_seed(0)
    cfg = NetworkConfig(blocks=1, channels=8, policy_channels=2, value_channels=1, value_hidden=8)
    initial = tmp_path / "tiny.pt"
    save_checkpoint(initial, net=PolicyValueNet(cfg), net_config=cfg, step=0)
    config = tmp_path / "tiny.toml"
    config.write_text("actors = 1\n" + TINY_CONFIG.format(initial=initial)
                      + "[cluster]\nrestart_grace_seconds = 2.0\n")
    return config, tmp_path / "run"


def start_cluster_loop(run: Path, config: Path, address: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **RAY_ENV)
    return subprocess.Popen([sys.executable, "-m", "play", "loop", "--run", str(run), "--config", str(config),
                             "--cluster", address],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)


def test_loop_on_a_ray_cluster_restarts_a_killed_worker_and_loses_no_committed_game(tmp_path, ray_head):
    if data_file("openings/acf_3move_144.txt") is None:
        pytest.skip("openings/acf_3move_144.txt not found (set CHECKERS_ZERO_DATA)")
    config, run = tiny_run(tmp_path)
    run_copy = run / "checkpoints" / "initial-tiny.pt"
    with reaped(start_cluster_loop(run, config, ray_head)) as proc:
        output = OutputReader(proc)
        wait_until(lambda: len(committed_games(run)) >= 3, 240, proc, "three committed games on the cluster",
                   output=output)
        host = role_host_of_actor(run, 0)
        assert host is not None
        os.kill(host, signal.SIGKILL)
        before = check_invariants(run, run_copy, {})
        step_before = trainer_step(run)
        wait_until(lambda: role_host_of_actor(run, 0) not in (None, host), 120, proc,
                   "Ray to restart the actor's worker", output=output)
        wait_until(lambda: len(committed_games(run)) > len(before) and trainer_step(run) > step_before, 240, proc,
                   "self-play and training to go on after the restart", output=output)
        # The loop reports the restart at the new worker's first answer, which may come after its first
        # games: wait for the report rather than race it.
        wait_until(lambda: "actor-0 restarted by Ray" in output.text(), 120, proc, "the loop to report the restart",
                   output=output)
        proc.send_signal(signal.SIGINT)
        out = output.finish(timeout=120)
    assert proc.returncode == 0, out
    assert "on the Ray cluster at" in out and "actor-0 restarted by Ray (restart 1 of 5)" in out, out
    assert " | positions " in out  # the status line, read from the run directory as without --cluster
    check_invariants(run, run_copy, before)


def test_an_error_that_would_recur_stops_the_cluster_run_with_one_message(tmp_path, ray_head):
    if data_file("openings/acf_3move_144.txt") is None:
        pytest.skip("openings/acf_3move_144.txt not found (set CHECKERS_ZERO_DATA)")
    config, run = tiny_run(tmp_path)
    damaged = run / "replay.zarr" / "zarr.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text("{ not json")
    with reaped(start_cluster_loop(run, config, ray_head)) as proc:
        out = proc.communicate(timeout=240)[0]
    # The loop checks the store before any role starts (the same check as `replay check`), so the damage stops
    # it at once in one line, with no role placed on the cluster to fail and be restarted.
    assert proc.returncode == 2, out
    assert f"error: {damaged}: unreadable zarr metadata" in out and "replay check --run" in out, out
    assert "restarted by Ray" not in out and "Traceback" not in out, out
