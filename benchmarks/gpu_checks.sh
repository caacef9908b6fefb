#!/usr/bin/env bash
# The GPU figures the README owes, in one command on a lent offline CUDA node:
#   rollout   bench_rollout.py --size gpu --device cuda: the engine's CUDA-graph steps against transformers' loop
#             at batch 1/40/160 (issue 29: >= 10x the loop's ~900 tok/s at batch 160)
#   trainer   2 steps of `searchgym train --recipe kg-wcr --size gpu` with each rollout engine (hf, static): the
#             per-step rollout / env / update split from metrics.jsonl (issue 29: rollouts < 50 % of a step)
#   selfplay  bench_selfplay.py --size gpu, seed 0 then 1 then 2, arm (c) first, while time is left (issue 31)
#
# On the development machine first: ../shared/gpu/bundle.sh (fills .gpu/). The node's first call carries
# .gpu/wheels, .gpu/node-setup.sh, .gpu/model-a and only installs (`source .gpu/node-setup.sh`); the second,
# while the node is warm, carries .gpu/model-b and runs this script:
#
#     bash benchmarks/gpu_checks.sh 540                  # seconds this command may take (default 540)
#     bash benchmarks/gpu_checks.sh 540 selfplay         # only some stages (comma list, default all three)
#
# Everything it writes goes to $OUT (the device machine's output folder; out/gpu here when unset), packed so it
# fits the 8 files that come back: rollout_gpu.json and selfplay_gpu.json as they are, results.tgz (every JSON,
# PNG, log, metrics file and nvidia-smi) and adapters.tgz (the self-play runs' LoRA adapters, a few MB each).
# Each stage has a deadline from the budget, so a slow stage leaves the next its share, and what finished comes
# back; a self-play run cut off resumes from its checkpoint in a later call on the same node.
set -uo pipefail
budget=${1:-540}
stages=${2:-rollout,trainer,selfplay}
dest=${OUT:-out/gpu}
out=/tmp/searchgym_gpu_checks # staged here, packed into $dest at the end
rm -rf "$out"
mkdir -p "$out" "$dest"
start=$SECONDS
left() { echo $((budget - (SECONDS - start) - 15)); } # 15 s kept to copy the results
has() { [[ ",$stages," == *",$1,"* ]]; }

if [ ! -f .gpu/node-setup.sh ]; then
  echo "gpu_checks: no .gpu/node-setup.sh here; run ../shared/gpu/bundle.sh in the checkout and carry .gpu/" >&2
  exit 2
fi
# shellcheck disable=SC1091
source .gpu/node-setup.sh
if [ "${SEARCHGYM_HAVE_MODEL:-0}" != 1 ]; then
  echo "gpu_checks: the bundled model is not whole on this node; carry .gpu/model-b (see ../shared/gpu/README.md)" >&2
  exit 2
fi
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true

if has rollout; then
  t=$(($(left) * 35 / 100))
  echo "gpu_checks: rollout engine (up to $t s)"
  timeout "$t" python3 benchmarks/bench_rollout.py --size gpu --device cuda --out "$out/rollout_gpu.json" \
    > "$out/rollout_gpu.log" 2>&1
  echo "gpu_checks: bench_rollout exit $?"
fi

if has trainer; then
  for engine in static hf; do
    t=$(($(left) * 20 / 100))
    echo "gpu_checks: 2 trainer steps, rollout_engine=$engine (up to $t s)"
    timeout "$t" python3 -m searchgym.cli train --recipe kg-wcr --size gpu --steps 2 --no-resume \
      --output-dir "/tmp/searchgym_trainer_$engine" --set rollout_engine="$engine" \
      > "$out/trainer_$engine.log" 2>&1
    echo "gpu_checks: trainer ($engine) exit $?"
    cp "/tmp/searchgym_trainer_$engine/metrics.jsonl" "$out/trainer_${engine}_metrics.jsonl" 2>/dev/null
  done
fi

if has selfplay; then
  work=/tmp/searchgym_selfplay
  for seed in 0 1 2; do
    [ "$(left)" -gt 120 ] || { echo "gpu_checks: $(left) s left, self-play seed $seed not started"; break; }
    echo "gpu_checks: self-play gpu size, seed $seed (up to $(left) s)"
    timeout "$(left)" python3 benchmarks/bench_selfplay.py --size gpu --seeds "$seed" --arms c,b,a \
      --workdir "$work" --out "$out/selfplay_gpu.json" > "$out/selfplay_gpu_s$seed.log" 2>&1
    echo "gpu_checks: bench_selfplay seed $seed exit $?"
  done
  mkdir -p /tmp/searchgym_adapters "$out/selfplay_metrics"
  for m in "$work"/gpu/*/metrics.jsonl; do
    [ -f "$m" ] && cp "$m" "$out/selfplay_metrics/$(basename "$(dirname "$m")").jsonl"
  done
  for final in "$work"/gpu/*/final; do
    [ -d "$final" ] || continue
    run=$(basename "$(dirname "$final")")
    mkdir -p "/tmp/searchgym_adapters/$run" && cp "$final"/*.json "$final"/*.safetensors "/tmp/searchgym_adapters/$run/" 2>/dev/null
  done
  [ -n "$(ls -A /tmp/searchgym_adapters)" ] && tar czf "$dest/adapters.tgz" -C /tmp/searchgym_adapters .
fi
for f in rollout_gpu.json selfplay_gpu.json; do [ -f "$out/$f" ] && cp "$out/$f" "$dest/"; done
tar czf "$dest/results.tgz" -C "$out" .
echo "gpu_checks: done in $((SECONDS - start)) s; results in $dest: $(ls "$dest" | tr '\n' ' ')"
