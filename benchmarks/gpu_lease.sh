#!/bin/bash
# One lease of a GPU machine (a bare image with torch, numba and onnxruntime, no network): self-play loop runs
# on the GPU from the shipped network, LOOP_MIN minutes each, then the feed bench with what is left of
# BUDGET_S seconds. RUNS lists the runs as NAME=SETTINGS separated by ';' (SETTINGS: the loop's --set
# overrides beyond the lease's own, space-separated KEY=VALUE), e.g. to compare two configurations at equal
# GPU time: RUNS='visits=;gumbel=selfplay.root_search=gumbel selfplay.policy_target=improved'.
# The lease's own overrides keep the self-play settings links 9-13 were trained with (400 / 64 simulations,
# the promoted network): the defaults' 200 / 32 and newest network were measured on the 2-core CPU only.
# What comes back under $OUT: per run its loop log (NAME.log), its final network (NAME.pt, the trainer's
# state) and the run without its replay store, expert dataset and candidates (NAME-run.tgz); the feed
# bench's table (feed.txt).
#
# Prepared on the developer's machine, in the repo root (both folders are git-ignored there through
# .git/info/exclude, and carried to the device machine):
#   .whl/      wheels of what the image lacks, for its Python 3.12: zarr, numcodecs, donfig, google-crc32c,
#              tomli_w (`pip download --no-deps --only-binary=:all: --python-version 3.12 ...`)
#   .gpudata/  a copy of ../shared/data (the OCA file for the trainer's expert positions, the ballots)
# Run there: OUT=... [RUNS=gpu=] [LOOP_MIN=5.5] [FROM=checkpoint] [LOOP_TIMEOUT_S=...] [FEED_SECONDS=15]
#   [BUDGET_S=575] [TEACHER='network.blocks=6 network.channels=64'] [TEACHER_STEPS=6000]
#   [STUDENT_STEPS=3000] bash benchmarks/gpu_lease.sh
# FROM starts each run from that checkpoint (carried) instead of the shipped network; LOOP_TIMEOUT_S bounds
# one loop's wall time so that a slow shutdown cannot take the call's files with it.
# TEACHER (issue 67's use of a lease: a larger teacher trained in the loop there, distilled into the fast tower
# on the CPU): first distil the shipped network (its policy, win/draw/loss and plies left, with the experts'
# moves and results) into a tower of those network settings on the GPU, TEACHER_STEPS batches of 1,024 of the
# OCA dataset built there, and start the runs from it; its file comes back as teacher.pt. After the runs, the
# last run's final state is distilled back into the shipped network's own shape (`--init`, STUDENT_STEPS batches),
# which comes back as student.pt, for `ship` at equal time on the CPU. Both trainings log to distil.log. The
# 3x32 tower's own leases bought +79, +70, +42, +11 and +1 over their starts (benchmarks/RESULTS.md): it is near
# what it holds.
set -u
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
# One line and a non-zero status for whatever stops the lease: a lease's time is too short to be spent on a
# machine without a GPU or a stage whose failure a later one hides.
fail() { echo "gpu_lease.sh: $*" >&2; exit 1; }
number() {  # NAME VALUE PATTERN: VALUE must match PATTERN
  [[ $2 =~ $3 ]] || fail "$1=$2 is not a number of the form the script takes"
}
[ -n "${OUT:-}" ] || fail "OUT is not set: the folder the lease's files go to (OUT=DIR bash benchmarks/gpu_lease.sh)"
[ -d "$OUT" ] && [ -w "$OUT" ] || fail "OUT=$OUT is not a writable folder"
nvidia-smi -L >/dev/null 2>&1 || fail "no GPU here (nvidia-smi is missing or finds none): this is a GPU lease's script"
if ! python3 -c "import zarr, numcodecs, tomli_w" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1 || fail "cannot install the wheels of .whl/ (see the header: prepared on the developer's machine)"
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD CHECKERS_ZERO_DATA=$PWD/.gpudata PYTHONUNBUFFERED=1
RUNS=${RUNS:-gpu=}
LOOP_MIN=${LOOP_MIN:-5.5}
number LOOP_MIN "$LOOP_MIN" '^[0-9]+(\.[0-9]+)?$'
LOOP_TIMEOUT_S=${LOOP_TIMEOUT_S:-$(( ${LOOP_MIN%.*} * 60 + 120 ))}
FROM=${FROM:-}
FEED_SECONDS=${FEED_SECONDS:-15}
BUDGET_S=${BUDGET_S:-575}
TEACHER=${TEACHER:-}
TEACHER_STEPS=${TEACHER_STEPS:-6000}
STUDENT_STEPS=${STUDENT_STEPS:-3000}
for var in LOOP_TIMEOUT_S FEED_SECONDS BUDGET_S TEACHER_STEPS STUDENT_STEPS; do number $var "${!var}" '^[0-9]+$'; done
[ -z "$FROM" ] || [ -f "$FROM" ] || fail "FROM=$FROM is not a file here (carry it to the device machine)"
distil() {  # OUT_FILE TEACHER_FILE STEPS [pretrain train arguments...]
  local out=$1 teacher=$2 steps=$3; shift 3
  python3 -m play pretrain train --data runs/lease-oca --out "$out" --run-dir "${out%.pt}" --teacher "$teacher" \
    --set steps="$steps" --set batch_size=1024 --set eval_every=1000 --no-wandb "$@" >>"$OUT/distil.log" 2>&1 \
    || fail "the distillation into $out failed (its log: $OUT/distil.log)"
  grep -aE "^(network, all|value: cross-entropy)" "$OUT/distil.log" | tail -2  # the test split's top-1 and value CE
  cp "$out" "$OUT/" || fail "cannot copy $out to $OUT"
}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; echo "cpus $(nproc)";
  python3 -c "import torch, numba, numpy, zarr, onnxruntime; print('torch', torch.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'zarr', zarr.__version__, 'ort', onnxruntime.__version__, 'cuda', torch.cuda.is_available())"; } 2>&1 | tee "$OUT/env.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "the image lacks what the loop needs (torch, numba, numpy, zarr, onnxruntime: $OUT/env.txt)"

if [ -n "$TEACHER" ]; then
  echo "== teacher ($TEACHER, $TEACHER_STEPS steps) at $(elapsed) s"
  tsets=()
  for kv in $TEACHER; do tsets+=(--set "$kv"); done
  python3 -m play pretrain dataset --pdn .gpudata/OCA_2.0.pdn --out runs/lease-oca --quiet >"$OUT/distil.log" 2>&1 \
    || fail "the OCA dataset could not be built (its log: $OUT/distil.log)"
  distil runs/teacher.pt checkpoints/shipped.pt "$TEACHER_STEPS" "${tsets[@]}"
  FROM=runs/teacher.pt
  echo "teacher done at $(elapsed) s"
fi

# 128 games in flight (not 512) so that the first games finish within a short lease; no calibration or
# rating games, so that the gatekeeper's first job is gating.
IFS=';' read -ra runs <<< "$RUNS"
for spec in "${runs[@]}"; do
  name=${spec%%=*}
  sets=()
  for kv in ${spec#*=}; do sets+=(--set "$kv"); done
  R=runs/$name
  echo "== loop $name ($LOOP_MIN min; ${sets[*]:-defaults}) at $(elapsed) s"
  timeout "$LOOP_TIMEOUT_S" python3 -m play loop --run $R --minutes "$LOOP_MIN" ${FROM:+--from "$FROM"} \
    --set selfplay.gpu_games_in_flight=128 --set gating.calibration_games=0 --set gating.rating_games=0 \
    --set selfplay.full_simulations=400 --set selfplay.fast_simulations=64 --set selfplay.network=best \
    "${sets[@]}" >"$OUT/$name.log" 2>&1
  status=$?
  echo "loop $name exit $status at $(elapsed) s"
  grep -v "gatekeeper: waiting" "$OUT/$name.log" | tail -6
  # What the run left comes back even when the loop failed: it is what says why.
  if [ -d $R ]; then
    grep "candidate" $R/logs/trainer.log 2>/dev/null | tail -3
    [ -f $R/checkpoints/trainer-state.pt ] && cp $R/checkpoints/trainer-state.pt "$OUT/$name.pt"
    tar czf "$OUT/$name-run.tgz" --exclude='candidate-*' --exclude=replay.zarr --exclude=expert-oca \
      --exclude=replay-locks $R || fail "cannot pack $R into $OUT/$name-run.tgz"
  fi
  [ $status -eq 0 ] || fail "loop $name exited $status (its log: $OUT/$name.log)"
done
if [ -n "$TEACHER" ] && [ -f "$R/checkpoints/trainer-state.pt" ]; then
  echo "== student: $R's final state distilled into the shipped shape ($STUDENT_STEPS steps) at $(elapsed) s"
  distil runs/student.pt "$R/checkpoints/trainer-state.pt" "$STUDENT_STEPS" --init checkpoints/shipped.pt
  echo "student done at $(elapsed) s"
fi

left=$(( BUDGET_S - $(elapsed) ))
echo "== feed bench at $(elapsed) s, $left s left"
if [ $left -gt 60 ]; then
  timeout $left python3 benchmarks/gpu_feed_bench.py --seconds "$FEED_SECONDS" --actors 1,7,14 \
    --sizes 128x4,512x4 2>&1 | tee "$OUT/feed.txt" | grep -v "^\s*$" | tail -20
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "the feed bench failed (its output: $OUT/feed.txt)"
fi
ls -la "$OUT"
echo "done at $(elapsed) s"
