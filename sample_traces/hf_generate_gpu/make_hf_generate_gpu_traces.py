"""Real PyTorch profiler traces of HF transformers generate() on one GPU, profiled per call (prof.step() after each
generate, as the profiler's docs show for a loop), in four ways: eager or CUDA-graph decoding, each with and without
record_shapes.

Model: the tiny randomly initialised Llama of sample_traces/vllm_cpu/tools/make_tiny_model.py (same config: 2 layers,
hidden 128, 4 heads, 2 KV heads, vocab 4096, bf16, SDPA attention), built here from its config with seed 0; no
tokenizer is needed since the prompts are token ids.

- eager: generate() with its default dynamic cache; every forward runs op by op.
- cudagraph: generate(cache_implementation="static"); transformers then compiles the decoding forward with its
  default CompileConfig (torch.compile mode "reduce-overhead": inductor + CUDA graphs), while the prefill runs eager.
  Three unprofiled calls first, so compilation and graph recording happen before the trace.

One more trace, hf_generate_medium_eager_shapes, runs a wider and deeper random Llama (MEDIUM below) eager, with
record_shapes, on 8 prompts x 512 tokens.

Each trace holds ProfilerStep#1 and #2, each one whole generate() of BATCH prompts x PROMPT tokens and NEW_TOKENS
new tokens: one prefill forward and NEW_TOKENS - 1 decode forwards. run_info.json beside the traces records the
versions, the GPU and these numbers.

- compiled (a second run, --compiled, in a fresh process): generate(cache_implementation="static") with
  CompileConfig(mode="default"): the decoding forward compiled by Inductor without CUDA graphs, so its attention
  runs as a CPU-side op inside each compiled region; with and without record_shapes.

- eager_stack (a third run, --stack): eager with record_shapes and with_stack=True, the profiler's Python frames
  (python_function) with each module call (nn.Module: LlamaForCausalLM_0) among them.

Run: python make_hf_generate_gpu_traces.py OUT_DIR [--cpu]   (--cpu: eager variants only, to check the script)
     python make_hf_generate_gpu_traces.py OUT_DIR --compiled   (after the first run: OUT_DIR holds its run_info.json)
     python make_hf_generate_gpu_traces.py OUT_DIR --stack      (likewise)
"""
import gzip
import json
import os
import sys
import time

import torch
import transformers
from torch.profiler import ProfilerActivity, profile, schedule
from transformers import CompileConfig, LlamaConfig, LlamaForCausalLM

out_dir = sys.argv[1]
cpu_only = "--cpu" in sys.argv
device = "cpu" if cpu_only else "cuda"
os.makedirs(out_dir, exist_ok=True)
BATCH, PROMPT, NEW_TOKENS = 4, 64, 8

TINY = dict(vocab_size=4096, hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2)
# a wider, deeper random Llama (0.16 B parameters), so that the GPU rather than the launches bounds the prefill
MEDIUM = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
              num_key_value_heads=4)


def build(shape: dict, batch: int, prompt: int) -> tuple:
    """The random Llama of this shape (seed 0) and a batch of random prompts."""
    torch.manual_seed(0)
    cfg = LlamaConfig(**shape, max_position_embeddings=4096, bos_token_id=0, eos_token_id=1,
                      tie_word_embeddings=False, attn_implementation="sdpa")
    m = LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16).eval()
    x = torch.randint(3, shape["vocab_size"], (batch, prompt), device=device)
    return cfg, m, x


cfg, model, ids = build(TINY, BATCH, PROMPT)
mask = torch.ones_like(ids)
info = {
    "torch": torch.__version__, "transformers": transformers.__version__,
    "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
    "batch": BATCH, "prompt_tokens": PROMPT, "new_tokens": NEW_TOKENS, "layers": cfg.num_hidden_layers,
    "forwards_per_generate": NEW_TOKENS, "profiled_generates": 2, "variants": {},
}


def generate(static: bool, compile_mode: str | None = None) -> torch.Tensor:
    kw = {"cache_implementation": "static"} if static else {}
    if compile_mode:  # generate() compiles the decoding forward with this mode instead of "reduce-overhead"
        kw["compile_config"] = CompileConfig(mode=compile_mode)
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS,
                              min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0, **kw)


def capture(name: str, static: bool, shapes: bool, compile_mode: str | None = None, stack: bool = False) -> None:
    t0 = time.time()
    for _ in range(3):  # warm up: kernels chosen, and for static: compiled and graphs recorded
        generate(static, compile_mode)
    if device == "cuda":
        torch.cuda.synchronize()
    warm_s = time.time() - t0
    path = os.path.join(out_dir, f"{name}.json")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=acts, record_shapes=shapes, with_stack=stack,
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for _ in range(3):
            out = generate(static, compile_mode)
            if device == "cuda":
                torch.cuda.synchronize()
            prof.step()
    with open(path, "rb") as f:
        raw = f.read()
    with gzip.open(path + ".gz", "wb", compresslevel=9) as f:
        f.write(raw)
    os.remove(path)
    doc = json.loads(raw)
    names = [e.get("name", "") for e in doc["traceEvents"]]
    info["variants"][name] = {
        "model": "tiny" if cfg.hidden_size == 128 else "medium", "batch": int(ids.shape[0]),
        "prompt_tokens": int(ids.shape[1]), "static_cache": static, "compile_mode": compile_mode or ("reduce-overhead" if static else None),
        "record_shapes": shapes, "with_stack": stack, "warmup_s": round(warm_s, 2),
        "generated_tokens": int(out.shape[1] - ids.shape[1]), "events": len(names),
        "cudaGraphLaunch": sum(n == "cudaGraphLaunch" for n in names),
        "sdpa_calls": sum(n == "aten::scaled_dot_product_attention" for n in names),
        "bytes": len(raw),
    }
    print(name, info["variants"][name], flush=True)


info_path = os.path.join(out_dir, "run_info.json")
if "--compiled" in sys.argv or "--stack" in sys.argv:  # runs of their own (fresh process): added to OUT_DIR's
    run = "compiled_run" if "--compiled" in sys.argv else "stack_run"  # run_info.json
    with open(info_path) as f:
        info = json.load(f) | {run: {k: info[k] for k in ("torch", "transformers", "device")}}
    if run == "compiled_run":
        capture("hf_generate_compiled_shapes", static=True, shapes=True, compile_mode="default")
        capture("hf_generate_compiled_noshapes", static=True, shapes=False, compile_mode="default")
    else:
        capture("hf_generate_eager_stack", static=False, shapes=True, stack=True)
    with open(info_path, "w") as f:
        json.dump(info, f, indent=1)
    sys.exit(0)
capture("hf_generate_eager_shapes", static=False, shapes=True)
capture("hf_generate_eager_noshapes", static=False, shapes=False)
if not cpu_only:
    capture("hf_generate_cudagraph_shapes", static=True, shapes=True)
    if not info["variants"]["hf_generate_cudagraph_shapes"]["cudaGraphLaunch"]:
        # generate() did not compile by itself: compile the forward as transformers' docs show
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        info["forward_compiled_by_hand"] = True
        capture("hf_generate_cudagraph_shapes", static=True, shapes=True)
    capture("hf_generate_cudagraph_noshapes", static=True, shapes=False)
cfg, model, ids = build(MEDIUM, 8, 512)
mask = torch.ones_like(ids)
info["medium_model"] = {**MEDIUM, "parameters": sum(p.numel() for p in model.parameters())}
capture("hf_generate_medium_eager_shapes", static=False, shapes=True)
with open(info_path, "w") as f:
    json.dump(info, f, indent=1)
