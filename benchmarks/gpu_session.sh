#!/usr/bin/env bash
# One GPU session's checks, compiled here and run on a GPU machine that has no native build
# (torch, CUDA and Python 3.12 there; no MLIR, no network).
#
#   benchmarks/gpu_session.sh pack     # here: compile everything into .gpu/pack (< 64 MiB)
#   benchmarks/gpu_session.sh run      # there, in the repository root: results into $OUT
#
# pack: tileopt's matmul kernels of matmul_tflops.py (--save-kernels; int8 in its --quick
# configurations), the formed linear
# layers of linear_tflops.py (plain and with warp_specialize), the formed attention of
# attention_tflops.py, the replay cases of test/python/gpu/replay (groups $REPLAY_GROUPS), and
# the wheels of cuda-core, cuda-bindings and cuda-pathfinder at requirements.txt's pins for the
# GPU machine's Python. Each part is a .tar.xz in .gpu/pack; keep .gpu out of git
# (`echo /.gpu/ >> .git/info/exclude`) and carry .gpu/pack.
#
# run: the replay (cubin and PTX-JIT paths; its benchmarks beside torch's), then matmul_tflops
# (f16 also beside the Triton there; int8 beside torch._int_mm), linear_tflops and
# attention_tflops, each under its own
# time limit so that one that hangs leaves the others their time; every log goes to $OUT (at
# most 8 files come back from it). About 5 minutes on an H200.
set -uo pipefail

REPLAY_GROUPS=${REPLAY_GROUPS:-schedules,bench}
PACK=.gpu/pack

pack() {
  local py=${PY:-.venv/bin/python}
  rm -rf .gpu/work "$PACK" && mkdir -p .gpu/work "$PACK" || exit 1
  (cd benchmarks &&
    "../$py" matmul_tflops.py --save-kernels ../.gpu/work/mm --target sm_90a &&
    "../$py" matmul_tflops.py --save-kernels ../.gpu/work/mm8 --dtypes i8,f8E4M3FN \
      --quick --target sm_90a &&
    "../$py" linear_tflops.py --save ../.gpu/work/lin --target sm_90a &&
    "../$py" linear_tflops.py --save ../.gpu/work/linws --warp-specialize --target sm_90a &&
    "../$py" attention_tflops.py --save ../.gpu/work/att --target sm_90a) >/dev/null || exit 1
  "$py" test/python/gpu/replay/collect.py --groups "$REPLAY_GROUPS" --out .gpu/work/cases \
    | tail -3 || exit 1
  local pins
  pins=$(grep -E '^cuda-(core|bindings|pathfinder)==' requirements.txt)
  # shellcheck disable=SC2086 # one argument a pin
  "$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    -d .gpu/work/whl $pins || exit 1
  for part in mm mm8 lin linws att cases whl; do
    tar -C .gpu/work -cf - "$part" | xz -6 -T0 >"$PACK/$part.tar.xz" || exit 1
  done
  du -ch "$PACK"/* | sed 's/^/  /'
  # The run tool carries at most 64 MiB: the pack and the working tree together.
  local bytes
  bytes=$(($(du -cb "$PACK"/* | tail -1 | cut -f1) + $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)))
  if ((bytes > 64 * 1024 * 1024)); then
    echo "the pack and the working tree are $((bytes / 1048576)) MiB, more than the 64 MiB a run carries: collect fewer replay groups (REPLAY_GROUPS)" >&2
    exit 1
  fi
}

# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output into $OUT/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit}s)"
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "   exit $? after $((SECONDS - start)) s"
  tail -n 40 "$OUT/$name.log"
}

run() {
  : "${OUT:?run writes into \$OUT}"
  local work=/tmp/tileopt-gpu
  mkdir -p "$work/site" || exit 1
  for part in "$PACK"/*.tar.xz; do tar -C "$work" -xJf "$part" || exit 1; done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$work/site" "$work"/whl/*.whl || exit 1
  export PYTHONPATH=$PWD/python:$work/site PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  step replay 90 python3 test/python/gpu/replay/run.py --cases "$work/cases" \
    --out "$work/replay"
  cp "$work/replay/results.txt" "$OUT/replay_results.txt"
  (cd benchmarks || exit 1
    step matmul_f16 200 python3 matmul_tflops.py --kernels "$work/mm" --dtypes f16 \
      --details "$OUT/matmul_details.jsonl"
    step linear 45 python3 linear_tflops.py --load "$work/lin"
    step linear_ws 45 python3 linear_tflops.py --load "$work/linws"
    step attention 45 python3 attention_tflops.py --load "$work/att"
    # one log for both (8 files come back at most)
    step matmul_bf16_i8 180 sh -c "python3 matmul_tflops.py --kernels '$work/mm' --no-triton \
      --dtypes bf16 --details '$OUT/matmul_details.jsonl'; python3 matmul_tflops.py \
      --kernels '$work/mm8' --no-triton --quick --dtypes i8,f8E4M3FN")
}

case ${1:-} in
  pack) pack ;;
  run) run ;;
  *) echo "usage: $0 pack|run" >&2; exit 2 ;;
esac
