#!/bin/bash
# One lease of a GPU machine (a bare image with torch, numba and onnxruntime, no network): the self-play loop
# on the GPU from the shipped network for LOOP_MIN minutes, then the feed bench with what is left of
# BUDGET_S seconds. What comes back is written under $OUT: the loop's log, the run without its replay store
# and expert dataset (run.tgz), its newest candidate, the replay store in 15 MiB parts when it fits in three,
# and the feed bench's table.
#
# Prepared on the developer's machine, in the repo root (both folders are git-ignored there through
# .git/info/exclude, and carried to the device machine):
#   .whl/      wheels of what the image lacks, for its Python 3.12: zarr, numcodecs, donfig, google-crc32c,
#              tomli_w (`pip download --no-deps --only-binary=:all: --python-version 3.12 ...`)
#   .gpudata/  a copy of ../shared/data (the OCA file for the trainer's expert positions, the ballots)
# Run there: OUT=... [LOOP_MIN=5.5] [FEED_SECONDS=15] [BUDGET_S=575] bash benchmarks/gpu_lease.sh
set -u
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
if ! python3 -c "import zarr, numcodecs, tomli_w" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD CHECKERS_ZERO_DATA=$PWD/.gpudata PYTHONUNBUFFERED=1
LOOP_MIN=${LOOP_MIN:-5.5}
FEED_SECONDS=${FEED_SECONDS:-15}
BUDGET_S=${BUDGET_S:-575}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; echo "cpus $(nproc)";
  python3 -c "import torch, numba, numpy, zarr, onnxruntime; print('torch', torch.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'zarr', zarr.__version__, 'ort', onnxruntime.__version__, 'cuda', torch.cuda.is_available())"; } 2>&1 | tee "$OUT/env.txt"

echo "== loop ($LOOP_MIN min) at $(elapsed) s"
timeout 420 python3 -m play loop --run runs/gpu --minutes "$LOOP_MIN" \
  --set selfplay.gpu_games_in_flight=128 --set gating.calibration_games=0 --set gating.rating_games=0 >"$OUT/loop.log" 2>&1
echo "loop exit $? at $(elapsed) s"
grep -v "gatekeeper: waiting" "$OUT/loop.log" | tail -40

# What comes back: the run without its replay store, expert dataset and older candidates (size limits).
R=runs/gpu
if [ -d $R ]; then
  latest=$(ls $R/checkpoints/candidate-*.pt 2>/dev/null | sort | tail -1)
  tar czf "$OUT/run.tgz" --exclude='candidate-*' --exclude=replay.zarr --exclude=expert-oca --exclude=replay-locks $R
  [ -n "$latest" ] && cp "$latest" "$OUT/"
  du -sh $R/replay.zarr $R/checkpoints
  tar czf /tmp/replay.tgz -C $R replay.zarr && ls -la /tmp/replay.tgz
  if [ "$(stat -c %s /tmp/replay.tgz)" -le $((45 * 1024 * 1024)) ]; then
    split -b 15M -d /tmp/replay.tgz "$OUT/replay.tgz.part"
  else
    echo "replay store too large to bring back: $(stat -c %s /tmp/replay.tgz) bytes"
  fi
  ls -la "$OUT"
fi

left=$(( BUDGET_S - $(elapsed) ))
echo "== feed bench at $(elapsed) s, $left s left"
if [ $left -gt 60 ]; then
  timeout $left python3 benchmarks/gpu_feed_bench.py --seconds "$FEED_SECONDS" --actors 1,7,14 \
    --sizes 128x4,512x4 2>&1 | tee "$OUT/feed.txt" | grep -v "^\s*$" | tail -20
fi
echo "done at $(elapsed) s"
