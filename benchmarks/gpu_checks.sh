#!/usr/bin/env bash
# The GPU figures the README owes, in one command on a lent offline CUDA node: the rollout engine's CUDA-graph
# steps against transformers' loop (bench_rollout.py --size gpu: batch 1/40/160, issue 29's target) and then
# the self-play benchmark's gpu size for as many seeds as the time left allows (issue 31).
#
# On the development machine first: ../shared/gpu/bundle.sh (fills .gpu/). The node's first call carries
# .gpu/wheels, .gpu/node-setup.sh, .gpu/model-a and only installs (`source .gpu/node-setup.sh`); the second,
# while the node is warm, carries .gpu/model-b and runs this script:
#
#     bash benchmarks/gpu_checks.sh 540        # seconds this command may take (default 540)
#
# Everything it writes goes to $OUT (the device machine's output folder; out/gpu here when unset): JSON,
# PNG, logs, nvidia-smi, and the self-play runs' LoRA adapters (a few MB each). Each stage has a deadline
# from the budget, so a slow stage leaves the next its share and what finished comes back.
set -uo pipefail
budget=${1:-540}
out=${OUT:-out/gpu}
mkdir -p "$out"
start=$SECONDS
left() { echo $((budget - (SECONDS - start) - 15)); }  # 15 s kept to copy the results

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

echo "gpu_checks: rollout engine (up to $(($(left) * 2 / 5)) s)"
timeout "$(($(left) * 2 / 5))" python3 benchmarks/bench_rollout.py --size gpu --device cuda \
  --out "$out/rollout_gpu.json" > "$out/rollout_gpu.log" 2>&1
echo "gpu_checks: bench_rollout exit $?"

work=/tmp/searchgym_selfplay
for seed in 0 1 2; do
  [ "$(left)" -gt 150 ] || { echo "gpu_checks: $(left) s left, seed $seed not started"; break; }
  echo "gpu_checks: self-play gpu size, seed $seed (up to $(left) s)"
  timeout "$(left)" python3 benchmarks/bench_selfplay.py --size gpu --seeds "$seed" --workdir "$work" \
    --out "$out/selfplay_gpu.json" > "$out/selfplay_gpu_s$seed.log" 2>&1
  echo "gpu_checks: bench_selfplay seed $seed exit $?"
done
for final in "$work"/gpu/*/final; do
  [ -d "$final" ] && mkdir -p "$out/adapters/$(basename "$(dirname "$final")")" \
    && cp "$final"/adapter_* "$final"/*.json "$out/adapters/$(basename "$(dirname "$final")")/" 2>/dev/null
done
echo "gpu_checks: done in $((SECONDS - start)) s; results in $out"
