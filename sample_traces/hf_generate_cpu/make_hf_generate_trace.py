"""A real PyTorch profiler trace of HF transformers generate() on CPU, profiled per call (prof.step() after each
generate, as the profiler's docs show for a loop): each ProfilerStep#N holds one prefill and its decodes.

Model: the tiny randomly initialised Llama of sample_traces/vllm_cpu/tools/make_tiny_model.py (2 layers, SDPA attention).
Run: python make_hf_generate_trace.py MODEL_DIR OUT.json  (torch 2.13.0+cpu, transformers 5.19.0)
"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, out = sys.argv[1], sys.argv[2]
BATCH, NEW_TOKENS = 2, 6
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
tok = AutoTokenizer.from_pretrained(model_dir)
inputs = tok(["the quick brown fox jumps over the lazy dog " * 4] * BATCH, return_tensors="pt")
print("prompt tokens per request:", inputs.input_ids.shape[1])


def save(prof):
    prof.export_chrome_trace(out)


with profile(
    activities=[ProfilerActivity.CPU],
    record_shapes=True,
    schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
    on_trace_ready=save,
) as prof:
    for _ in range(3):
        model.generate(**inputs, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
        prof.step()
