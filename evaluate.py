"""
Cross-entropy of a GPT-2 model on the paper's three evaluation sets, printed beside its Table 3; of an
HF Llama-family model on OpenWebText in its own tokens.

    python evaluate.py --out_dir=out-gpt2-s-internaltaper
    python evaluate.py --out_dir=out-gpt2-s-internaltaper --ckpt=ckpt_folded.pt
    python evaluate.py --init_from=gpt2                       # HF GPT-2 as published
    python evaluate.py --out_dir=out-smollm2-135m-alltaper --data_dir=data/openwebtext-SmolLM2-135M

The sets are token files prepare_owt.py writes into data_dir: OWT validation (val.bin), The Pile
(pile.bin) and The Pile-filtered (pile_filtered.bin). As in Baroni et al.'s evaluation code, which the
paper reuses: each set is cut into consecutive 1024-token chunks, a chunk predicts its tokens 2..1024
from the ones before (end-of-text targets included), chunks go 8 to a batch and a last batch with
fewer is left out, the model runs in float32, and the score is the mean cross-entropy over all those
predictions. A tapered model is evaluated at g = 0, as in the paper. The data must be in the model's own
tokens: the tokenizer the checkpoint (or HF model) carries is checked against data_dir's. The last
line printed is one JSON object for scripts.
"""

import json
import os
import sys
from contextlib import nullcontext

import numpy as np
import torch
from tqdm import tqdm

from hf import from_pretrained, tokenizer_reference
from model import GPT, load_checkpoint
from tokens import open_tokens, read_meta

# -----------------------------------------------------------------------------
init_from = 'resume'      # 'resume' (out_dir/ckpt) | an HF GPT-2 or Llama-family name or directory
out_dir = 'out'
ckpt = 'ckpt.pt'          # or 'ckpt_folded.pt', written by fold.py
data_dir = 'data/openwebtext'
batch_size = 8            # chunks per forward pass; a last, smaller batch is left out
max_chunks = 0            # per set, before that; 0 evaluates every chunk
label = ''                # the protocol name in the table; '' derives it from the model's config
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = 'float32'         # Baroni's evaluation; 'bfloat16' autocasts on CUDA (moves the third decimal)
# -----------------------------------------------------------------------------
from configurator import configure_globals  # noqa: E402

configure_globals(globals(), sys.argv[1:])
# -----------------------------------------------------------------------------

# The paper's Table 3: end-of-run cross-entropy on (OWT, Pile, Pile-filtered). Vanilla and FakeLN
# are Baroni et al. (2025)'s. XL FakeLN on the Pile is dominated by a few outlier sequences.
PAPER = {
    'S': {'Vanilla': (3.0126, 2.8511, 2.8112), 'FakeLN (+Baroni-aux)': (3.0797, 2.8852, 2.8757),
          'Internal-TaperLN (+fixed-target aux)': (3.0584, 2.8381, 2.8374),
          'All-TaperLN (+fixed-target aux)': (3.0685, 2.8326, 2.8416)},
    'M': {'Vanilla': (2.7390, 2.5752, 2.5724), 'FakeLN (+Baroni-aux)': (2.7642, 2.6579, 2.6352),
          'Internal-TaperLN (+fixed-target aux)': (2.7550, 2.5937, 2.5936),
          'All-TaperLN (+fixed-target aux)': (2.7715, 2.6248, 2.6191)},
    'L': {'Vanilla': (2.6240, 2.6233, 2.5074), 'FakeLN (+Baroni-aux)': (2.6384, 2.7504, 2.5159),
          'Internal-TaperLN (+fixed-target aux)': (2.6277, 2.7860, 2.4910),
          'All-TaperLN (+fixed-target aux)': (2.6230, 2.6539, 2.4814)},
    'XL': {'Vanilla': (2.4799, 2.4673, 2.3821), 'FakeLN (+Baroni-aux)': (2.5052, 130.2197, 2.3992),
           'Internal-TaperLN (+fixed-target aux)': (2.5144, 2.5303, 2.3844),
           'All-TaperLN (+fixed-target aux)': (2.5305, 2.6504, 2.4000)},
}
SIZES = {(12, 768): 'S', (24, 1024): 'M', (36, 1280): 'L', (48, 1600): 'XL'}  # (n_layer, n_embd)
SETS = [('owt', 'OWT', 'val'), ('pile', 'Pile', 'pile'), ('pile_filtered', 'Pile-filtered', 'pile_filtered')]
AUX_SUFFIX = {'fixed': ' (+fixed-target aux)', 'baroni': ' (+Baroni-aux)', 'none': ''}


def load_model():
    """The model to evaluate, in eval mode, its protocol name (Table 3's for GPT-2) and its tokenizer
    reference."""
    try:
        if init_from != 'resume':
            model = from_pretrained(init_from).to(device).eval()
            return model, 'GPT-2 (pretrained)' if model.config.arch == 'gpt2' else 'pretrained', tokenizer_reference(init_from)
        checkpoint = load_checkpoint(f"{out_dir}/{ckpt}", device)
        model = GPT.from_checkpoint(checkpoint, device).eval()
    except (FileNotFoundError, OSError, ValueError, KeyError) as e:
        raise SystemExit(f"cannot evaluate: {e}") from None
    config = model.config
    if getattr(config, 'fakeln', False):
        return model, 'FakeLN (+Baroni-aux)', checkpoint.get('tokenizer')
    names = ('Vanilla', 'Internal-TaperLN', 'All-TaperLN') if config.arch == 'gpt2' else \
        ('Baseline', 'Internal-Taper', 'All-Taper')
    name = names[('none', 'internal', 'all').index(config.taper)]
    return model, name + AUX_SUFFIX[config.aux_loss], checkpoint.get('tokenizer')


def check_tokenizer(ref):
    """The data must be in the model's own tokens: GPT-2's BPE for GPT-2, the same HF tokenizer
    (tokenizer.json) for an HF model. A TinyStories checkpoint (SentencePiece) is refused."""
    kind = (ref or {}).get('kind')
    if kind not in ('tiktoken', 'hf'):
        raise SystemExit(f"cannot evaluate a model with a {kind} tokenizer: evaluate.py scores OpenWebText in "
                         f"GPT-2's or an HF model's own tokens (diagnose.py scores any checkpoint on its own data)")
    meta = read_meta(data_dir)
    data_kind = meta.get('tokenizer', 'tiktoken')  # prepare_owt.py's GPT-2 data
    if kind == 'hf' and data_kind == 'hf':
        with open(os.path.join(data_dir, meta['tokenizer_dir'], 'tokenizer.json'), encoding='utf-8') as f:
            if json.loads(f.read()) == json.loads(ref['json']):
                return
    elif kind == data_kind:
        return
    theirs = meta.get('tokenizer_name', 'GPT-2' if data_kind == 'tiktoken' else data_kind)
    raise SystemExit(f"cannot evaluate: {data_dir} holds {theirs} tokens, not the model's own ({kind or 'unknown'} "
                     f"tokenizer): prepare the data with `python prepare_owt.py --tokenizer=<the model>`, or "
                     f"pass the matching --data_dir")


@torch.no_grad()
def mean_ce(model, split, chunk_len, name):
    """Mean cross-entropy over the chunk_len - 1 next-token predictions of each chunk of
    data_dir/<split>.bin, and the chunk count."""
    try:
        data = open_tokens(data_dir, split)
    except ValueError as e:
        raise SystemExit(f"cannot evaluate: {e}; rerun python prepare_owt.py") from None
    n_chunks = len(data) // chunk_len
    if max_chunks:
        n_chunks = min(n_chunks, max_chunks)
    n_chunks -= n_chunks % batch_size  # Baroni's evaluation skips a last batch of fewer chunks
    if n_chunks == 0:
        raise SystemExit(f"{data_dir}/{split}.bin holds fewer than {batch_size} chunks of {chunk_len} tokens: "
                         f"rerun python prepare_owt.py, or lower --batch_size")
    use_bf16 = device.startswith('cuda') and dtype == 'bfloat16'
    ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16) if use_bf16 else nullcontext()
    total = torch.zeros((), dtype=torch.float64, device=device)  # summed on device: no sync per batch
    for start in tqdm(range(0, n_chunks, batch_size), desc=name):
        chunks = torch.from_numpy(data[start * chunk_len:(start + batch_size) * chunk_len].astype(np.int64))
        chunks = chunks.view(batch_size, chunk_len).to(device)
        x, y = chunks[:, :-1], chunks[:, 1:]
        with ctx:
            _, _, stats = model(x, y, return_stats=True)
        total += stats['ce']  # full batches of as many predictions each: the mean of the batch means
    return (total * batch_size / n_chunks).item(), n_chunks


if device.startswith('cuda') and not torch.cuda.is_available():
    raise SystemExit("CUDA is not available on this machine: run with --device=cpu")
if dtype not in ('float32', 'bfloat16'):
    raise SystemExit(f"dtype={dtype!r} is not supported: use 'float32' or 'bfloat16'")
present = [(key, name, split) for key, name, split in SETS if os.path.isfile(f"{data_dir}/{split}.bin")]
if not present:
    raise SystemExit(f"{data_dir} has none of val.bin, pile.bin, pile_filtered.bin: run "
                     f"python prepare_owt.py to write them")
model, protocol, tokenizer = load_model()
check_tokenizer(tokenizer)
label = label or protocol
if model.started and model.tapered_norms():
    model.set_gate(0.0)
    print("evaluating the tapered model at g = 0")
# The paper scores 1024-token chunks; a model with a shorter context gets chunks of its block_size.
chunk_len = min(1024, model.config.block_size)
ce, chunks = {key: None for key, _, _ in SETS}, {key: None for key, _, _ in SETS}
for key, name, split in present:
    ce[key], chunks[key] = mean_ce(model, split, chunk_len, name)

size = SIZES.get((model.config.n_layer, model.config.n_embd))
prefix = f"{size}/" if size else ''
rows = [(prefix + protocol_name, values) for protocol_name, values in PAPER.get(size, {}).items()]
rows.append((f"ours: {prefix}{label}", tuple(ce[key] for key, _, _ in SETS)))
width = max(len(row) for row, _ in rows) + 2
print(f"\n{'Model/Protocol':<{width}}" + ''.join(f"{name:>15}" for _, name, _ in SETS))
for row, values in rows:
    print(f"{row:<{width}}" + ''.join(f"{'-' if v is None else f'{v:.4f}':>15}" for v in values))
print(f"{'chunks used':<{width}}" + ''.join(
    f"{'-' if chunks[key] is None else chunks[key]:>15}" for key, _, _ in SETS))
print(f"(each chunk: {chunk_len} tokens, {chunk_len - 1} predictions; "
      + ", ".join(f"{name} {chunks[key] * (chunk_len - 1)}" for key, name, _ in present)
      + " predictions in all)")
print(json.dumps(dict(label=label, size=size, **ce, chunks=chunks)))
