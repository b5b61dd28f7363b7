"""
Generate text with the static KV cache, from a training checkpoint, a folded one, or an HF GPT-2 or
Llama-family model.

    python sample.py --out_dir=out-taper-internal-512
    python sample.py --out_dir=out-taper-internal-512 --ckpt=ckpt_folded.pt --start="Once upon a time"
    python sample.py --init_from=gpt2 --start=FILE:prompt.txt --num_samples=1
    python sample.py --init_from=HuggingFaceTB/SmolLM2-135M --start="The capital of France"

A tapered model is sampled at g = 0 once its taper has started. Tokens are decoded with the run's own
tokenizer, which the checkpoint carries: SentencePiece for TinyStories, tiktoken's GPT-2 BPE for GPT-2,
an HF model's own tokenizer for a Llama-family model (or data prepared with prepare_owt.py --tokenizer).
"""

import os
import sys
from contextlib import nullcontext

import torch

from hf import from_pretrained, tokenizer_reference
from model import GPT, load_checkpoint
from tokens import load_tokenizer

# -----------------------------------------------------------------------------
init_from = 'resume'      # 'resume' (out_dir/ckpt) | an HF GPT-2 or Llama-family name or directory
out_dir = 'out'
ckpt = 'ckpt.pt'          # or 'ckpt_folded.pt', written by fold.py
start = ''                # the prompt, or FILE:path to read it from a file
num_samples = 3
max_new_tokens = 200
temperature = 0.8         # 0 decodes greedily
top_k = 200               # None samples from the whole vocabulary
seed = 1337
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = 'bfloat16'        # on CUDA; the CPU runs float32
# -----------------------------------------------------------------------------
from configurator import configure_globals  # noqa: E402

configure_globals(globals(), sys.argv[1:])
# -----------------------------------------------------------------------------


if temperature < 0:
    raise SystemExit(f"temperature={temperature} must be at least 0 (0 decodes greedily)")
if top_k is not None and top_k < 1:
    raise SystemExit(f"top_k={top_k} must be at least 1, or None to sample from the whole vocabulary")
if num_samples < 1 or max_new_tokens < 1:
    raise SystemExit(f"num_samples={num_samples} and max_new_tokens={max_new_tokens} must be at least 1")
if start.startswith('FILE:') and not os.path.isfile(start[5:]):
    raise SystemExit(f"no prompt file at {start[5:]}: --start=FILE:path names a text file")
torch.manual_seed(seed)
if device.startswith('cuda') and not torch.cuda.is_available():
    raise SystemExit("CUDA is not available on this machine: run with --device=cpu")
if init_from == 'resume':
    path = f"{out_dir}/{ckpt}"
    try:
        checkpoint = load_checkpoint(path, device)
        model = GPT.from_checkpoint(checkpoint, device)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"cannot sample: {e}") from None
    tokenizer = checkpoint.get('tokenizer')
else:
    try:
        model = from_pretrained(init_from).to(device)
        tokenizer = tokenizer_reference(init_from)  # GPT-2's BPE, or the model's own tokenizer
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"cannot sample: {e}") from None
model.eval()
if model.started and model.tapered_norms():
    model.set_gate(0.0)
    print("sampling the tapered model at g = 0")
encode, decode = load_tokenizer(tokenizer)
if start.startswith('FILE:'):
    try:
        with open(start[5:], encoding='utf-8') as f:
            start = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"cannot read the prompt file {start[5:]} as UTF-8 text ({e})") from None
x = torch.tensor(encode(start), dtype=torch.long, device=device)[None].repeat(num_samples, 1)
use_bf16 = device.startswith('cuda') and dtype == 'bfloat16'
ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16) if use_bf16 else nullcontext()
with ctx:
    try:
        y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
    except ValueError as e:  # prompt + new tokens beyond the context
        raise SystemExit(f"cannot sample: {e}; shorten --start or lower --max_new_tokens") from None
for row in y.tolist():
    print(decode(row))
    print('---------------')
