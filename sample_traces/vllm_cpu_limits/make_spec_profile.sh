#!/usr/bin/env bash
# A real vLLM profiler trace of speculative decoding on CPU (vllm_cpu_spec_draft_decode.rank0.pt.trace.json.gz in
# sample_traces/): V_spec_draft's server (the draft model of make_draft_model.py, 3 tokens a draft) with the torch
# profiler on, and `vllm bench serve --profile` around a burst of 8 greedy requests (128 in, 32 out).
#   usage: bash make_spec_profile.sh OUT_DIR        env: VENV, WORK, PORT=8012 (as make_runs.sh)
set -euo pipefail
OUT="${1:?usage: make_spec_profile.sh OUT_DIR}"
VENV="${VENV:-${TMPDIR:-/tmp}/vllm-venv}"; WORK="${WORK:-${TMPDIR:-/tmp}/rce-work}"; PORT="${PORT:-8012}"
VLLM="$VENV/bin/vllm"; MODEL="$WORK/tiny-llama"
[ -d "$WORK/tiny-llama-draft" ] || "$VENV/bin/python" "$(dirname "${BASH_SOURCE[0]}")/make_draft_model.py" "$MODEL" "$WORK/tiny-llama-draft"
mkdir -p "$OUT/profiler" "$OUT/bench"
export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 VLLM_HOST_IP=127.0.0.1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 \
       HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_LOG_STATS_INTERVAL=2 VLLM_CACHE_ROOT="$WORK/vllm-cache" \
       TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" XDG_CACHE_HOME="$WORK/xdg-cache"
"$VLLM" serve "$MODEL" --served-model-name tiny-llama --host 127.0.0.1 --port "$PORT" --max-model-len 2048 \
  --dtype bfloat16 --enable-logging-iteration-details --max-num-seqs 16 \
  --speculative-config "{\"method\": \"draft_model\", \"model\": \"$WORK/tiny-llama-draft\", \"num_speculative_tokens\": 3}" \
  --profiler-config "{\"profiler\":\"torch\",\"torch_profiler_dir\":\"$OUT/profiler\",\"torch_profiler_with_stack\":false,\"torch_profiler_record_shapes\":true}" \
  > "$OUT/server.log" 2>&1 &
SRV=$!; trap 'kill $SRV 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "127.0.0.1:$PORT/health")" = 200 ] && break
  kill -0 "$SRV" 2>/dev/null || { echo "server died"; tail -30 "$OUT/server.log"; exit 1; }
  sleep 1
done
timeout 300 "$VLLM" bench serve --backend vllm --host 127.0.0.1 --port "$PORT" --model tiny-llama --tokenizer "$MODEL" \
  --dataset-name random --ignore-eos --random-input-len 128 --random-output-len 32 --num-prompts 8 --request-rate inf \
  --seed 81 --temperature 0 --profile --save-result --result-dir "$OUT/bench" --result-filename bench.json \
  > "$OUT/bench/client.log" 2>&1
echo "trace in $OUT/profiler"
