#!/usr/bin/env bash
# The GPU figures the README owes, in one command on a lent offline CUDA node:
#   rollout   bench_rollout.py --size gpu --device cuda --repeats 1: the engine's CUDA-graph steps, as they are and
#             traced by inductor (compile_steps), against transformers' loop at batch 160, 40, 1 (each saved as it
#             ends; issue 29: >= 10x the loop's ~900 tok/s at batch 160; the episodes were measured 2026-11-28)
#   trainer   2 steps of `searchgym train --recipe kg-wcr --size gpu` (the engine, the default on CUDA): the
#             per-step rollout / env / update split from metrics.jsonl (issue 29: rollouts < 50 % of a step)
#   selfplay  bench_selfplay.py --size gpu: the three arms of each seed in SELFPLAY_SEEDS as processes at once,
#             one host thread each, sharing the one GPU and one workdir (a 135M model leaves the card idle
#             between the host's steps; the host has 16 cores), then the collection (issue 31)
#
# On the development machine first: `bash benchmarks/gpu_bundle.sh` (fills .gpu/ and prints the transfers: the
# wheels and the model in parts under the 64 MiB cap). Each transfer sources .gpu/node-setup.sh; the last one
# (or the next, while the node is warm) runs this script:
#
#     bash benchmarks/gpu_checks.sh 560                  # seconds this command may take (default 540)
#     bash benchmarks/gpu_checks.sh 280 rollout,trainer  # some stages, run in this order (default
#                                                        # selfplay,rollout,trainer: issue 31's runs first)
#
# A stage gets a share of the time left (self-play 80 %, rollout 60 %, trainer 40 %; the last stage all of it).
# SELFPLAY_SEEDS (default "0") sets the seeds run at once, three processes each (SELFPLAY_ARMS, default "c b a",
# the arms of each): a node's 15 minutes hold about one seed (the first GPU step took 185 s with transformers' loop),
# so each node runs the next seed and the workdirs are collected together here. TMPDIR (default /tmp) holds the
# stages' scratch folders.
#
# Everything it writes goes to $OUT (the device machine's output folder; out/gpu here when unset), packed so it
# fits the 8 files that come back: rollout_gpu.json and selfplay_gpu.json as they are, results.tgz (every log,
# metrics file and nvidia-smi), selfplay_workdir.tgz (the self-play workdir without checkpoints or weights: untar
# it into a workdir here and `bench_selfplay.py --size gpu --collect` merges it with other nodes' runs) and
# adapter_<arm>_s<seed>.tgz (the first seed's LoRA adapters, one file each).
# Each stage has a deadline from the budget, so a slow stage leaves the next its share, and what finished comes
# back; self-play runs cut off resume from their checkpoints when the stage runs again on the same node. The exit
# status is 1 when any step exited non-zero (after packing what finished), 2 for a node that is not set up.
set -uo pipefail
budget=${1:-540}
stages=${2:-selfplay,rollout,trainer}
dest=${OUT:-out/gpu}
tmp=${TMPDIR:-/tmp}           # scratch: the stages' folders below (a fresh node's /tmp unless TMPDIR says)
out=$tmp/searchgym_gpu_checks # staged here, packed into $dest at the end
rm -rf "$out"
mkdir -p "$out" "$dest"
start=$SECONDS
left() { echo $((budget - (SECONDS - start) - 20)); } # 20 s kept to pack the results
failed=0 # steps that exited non-zero: the script still packs what finished, then exits 1
said() { # $1: what ran, $2: its exit status
  echo "gpu_checks: $1 exit $2"
  [ "$2" -eq 0 ] || failed=$((failed + 1))
}

if [ ! -f .gpu/node-setup.sh ]; then
  echo "gpu_checks: no .gpu/node-setup.sh here; run benchmarks/gpu_bundle.sh in the checkout and carry .gpu/" >&2
  exit 2
fi
# shellcheck disable=SC1091
source .gpu/node-setup.sh
if [ "${SEARCHGYM_HAVE_MODEL:-0}" != 1 ]; then
  echo "gpu_checks: the bundled model is not whole on this node; carry the parts benchmarks/gpu_bundle.sh printed" >&2
  exit 2
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true

stage_rollout() { # $1: seconds
  echo "gpu_checks: rollout engine (up to $1 s)"
  timeout "$1" python3 benchmarks/bench_rollout.py --size gpu --device cuda --repeats 1 --sides static,static-compiled \
    --batches 160 40 1 --no-episodes --out "$out/rollout_gpu.json" > "$out/rollout_gpu.log" 2>&1
  said "bench_rollout" $?
}

stage_trainer() { # $1: seconds
  echo "gpu_checks: 2 trainer steps, kg-wcr at the gpu size (up to $1 s)"
  timeout "$1" python3 -m searchgym.cli train --recipe kg-wcr --size gpu --steps 2 --no-resume \
    --output-dir "$tmp/searchgym_trainer" > "$out/trainer.log" 2>&1
  said "trainer" $?
  cp "$tmp/searchgym_trainer/metrics.jsonl" "$out/trainer_metrics.jsonl" 2>/dev/null
}

stage_selfplay() { # $1: seconds
  local work=$tmp/searchgym_selfplay seeds=${SELFPLAY_SEEDS:-0} size=${SELFPLAY_SIZE:-gpu} extra=${SELFPLAY_ARGS:-}
  local arms=${SELFPLAY_ARMS:-c b a}
  # SELFPLAY_SIZE=toy with SELFPLAY_ARGS="--model DIR": this stage's flow on a CPU in a minute
  # (tests/test_gpu_checks.py)
  local t=$(($1 - 40)) # 40 s for the collection and the packing
  if [ "$t" -gt 60 ]; then
    echo "gpu_checks: self-play $size size, arms $arms x seeds $seeds at once (up to $t s)"
    local pids=() seed arm p
    for seed in $seeds; do
      for arm in $arms; do
        OMP_NUM_THREADS=1 timeout "$t" python3 benchmarks/bench_selfplay.py --size "$size" $extra --seeds "$seed" \
          --arms "$arm" --workdir "$work" --out "$tmp/searchgym_selfplay_${arm}_s$seed.json" \
          > "$out/selfplay_${arm}_s$seed.log" 2>&1 &
        pids+=($!)
      done
    done
    for p in "${pids[@]}"; do wait "$p"; said "a self-play process" $?; done
  else
    echo "gpu_checks: $1 s left, self-play not started"
  fi
  timeout 60 python3 benchmarks/bench_selfplay.py --size "$size" $extra --collect --workdir "$work" \
    --out "$out/selfplay_gpu.json" > "$out/selfplay_collect.log" 2>&1
  said "self-play collection" $?
  # the workdir without checkpoints and weights (what --collect reads: evaluations, metrics, done markers), so
  # runs from several nodes can be collected together here; the adapters of the first seed, one file each
  [ -d "$work/$size" ] && tar czf "$dest/selfplay_workdir.tgz" -C "$work" --exclude=checkpoints \
    --exclude='*.safetensors' "$size"
  local first=${seeds%% *} final run
  for final in "$work/$size"/*_s"$first"/final; do
    [ -f "$final/adapter_model.safetensors" ] || continue
    run=$(basename "$(dirname "$final")")
    tar czf "$dest/adapter_$run.tgz" -C "$final" .
  done
}

IFS=, read -ra order <<< "$stages"
for i in "${!order[@]}"; do
  name=${order[$i]}
  case $name in
    selfplay) share=80 ;; rollout) share=60 ;; trainer) share=40 ;;
    *) echo "gpu_checks: unknown stage $name (use selfplay, rollout, trainer)" >&2; exit 2 ;;
  esac
  [ "$i" -eq $((${#order[@]} - 1)) ] && share=100
  t=$(($(left) * share / 100))
  if [ "$t" -lt 30 ]; then echo "gpu_checks: $t s left, $name not started"; continue; fi
  "stage_$name" "$t"
done
for f in rollout_gpu.json selfplay_gpu.json; do [ -f "$out/$f" ] && cp "$out/$f" "$dest/"; done
tar czf "$dest/results.tgz" -C "$out" .
echo "gpu_checks: done in $((SECONDS - start)) s; results in $dest: $(ls "$dest" | tr '\n' ' ')"
if [ "$failed" -gt 0 ]; then
  echo "gpu_checks: $failed step(s) failed; what finished came back, their logs are in results.tgz" >&2
  exit 1
fi
