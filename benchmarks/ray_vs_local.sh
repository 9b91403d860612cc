#!/usr/bin/env bash
# Positions per hour: the loop under the local supervisor against the same loop on a one-node Ray cluster.
# Usage: bash benchmarks/ray_vs_local.sh [MINUTES]  (a one-node cluster on 127.0.0.1; runs in /tmp/bench-*)
set -u
MIN=${1:-4}  # minutes per side
cd "$(dirname "$0")/.." && . .venv/bin/activate
rm -rf /tmp/bench-local /tmp/bench-ray
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0
echo "== local $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
checkers-zero loop --run /tmp/bench-local --actors 1 --minutes $MIN > /tmp/bench-local.log 2>&1
tail -1 /tmp/bench-local.log
setsid ray start --head --block --node-ip-address=127.0.0.1 --port=6395 --num-cpus=3 --num-gpus=0 \
    --include-dashboard=false --disable-usage-stats > /tmp/bench-rayhead.log 2>&1 &
HEAD=$!
sleep 15
echo "== ray $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
checkers-zero loop --run /tmp/bench-ray --actors 1 --minutes $MIN --cluster 127.0.0.1:6395 > /tmp/bench-ray.log 2>&1
tail -1 /tmp/bench-ray.log
kill -TERM -$HEAD; sleep 15; kill -KILL -$HEAD 2>/dev/null
echo "== done $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
python - <<'PY'
from selfplay.replay.replay_buffer import ReplayReader
for name in ("local", "ray"):
    r = ReplayReader(f"/tmp/bench-{name}")
    games = list(r.iter_games())
    t = sorted(g.commit_time for g in games)
    span = t[-1] - t[0]
    first = [g for g in games if g.commit_time == t[0]]
    later = r.total_positions() - sum(g.length for g in first)
    print(f"{name}: {r.total_games()} games, {r.total_positions()} positions; commits over {span:.0f} s: "
          f"{later / span * 3600:.0f} positions/hour between the first and the last commit")
PY
