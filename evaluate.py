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
import shlex
import sys
from contextlib import nullcontext

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import torch
from tqdm import tqdm

from configurator import FlagError, configure_globals, dead_link, flag, script_path
from hf import export_source, from_pretrained, init_from_conflict, is_export, tokenizer_reference
from model import (GPT, broken_link, folded_note, load_checkpoint, missing_hint, mixed_run_note,
                   pick_device, replaced_run, run_checkpoint, taper_note)
from tokens import (data_tokenizer, inner_data, meta_mismatch, open_tokens, prepare_again, prepare_command, raw_text,
                    read_meta, same_tokenizer)

# -----------------------------------------------------------------------------
init_from = flag('resume', "'resume' (out_dir's checkpoint), or an HF GPT-2 or Llama-family name or "
                 "save_pretrained folder (hf.py)")
out_dir = flag('out', "the run's folder, with init_from='resume'", path='run')
ckpt = flag('ckpt.pt', "the checkpoint file in out_dir: ckpt.pt, or ckpt_folded.pt (fold.py)")
data_dir = flag('data/openwebtext', "folder of val.bin, pile.bin and pile_filtered.bin (prepare_owt.py)")
batch_size = flag(8, "chunks per forward pass; a last, smaller batch is left out", min=1)
max_chunks = flag(0, "chunks per set at most, before that (0: every chunk)", min=0)
label = flag('', "the protocol name in the table ('': derived from the model's config)")
device = flag('', "'cuda', 'cuda:N' or 'cpu' ('': cuda when available)")
dtype = flag('float32', "Baroni's evaluation runs float32; 'bfloat16' autocasts on CUDA (moves the third "
             "decimal)", choices=('float32', 'bfloat16'))
# -----------------------------------------------------------------------------


def fail(message):
    """Stop with one sentence that says what to do."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


try:
    configure_globals(globals(), sys.argv[1:])
    device = pick_device(device)
except (FlagError, ValueError) as e:
    fail(str(e))
if dtype == 'bfloat16' and not device.startswith('cuda'):
    print(f"note: --dtype=bfloat16 autocasts on CUDA only, so on {device} the scores are float32")
conflict = init_from_conflict(init_from, out_dir, ckpt, 'evaluate.py scores')
if conflict:
    fail(conflict)
if 0 < max_chunks < batch_size:
    fail(f"max_chunks={max_chunks} is below batch_size={batch_size}, and a last batch of fewer chunks is "
         f"left out, so nothing would be scored: raise --max_chunks or lower --batch_size")
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


trained = {}  # the run's config, for a checkpoint: where its model and data came from


def data_advice(ref):
    """What gives data in the model's own tokens: the folder the run trained on, when it is still there,
    else prepare_owt.py for the model's tokenizer (GPT-2's BPE by default, an HF model's own by name)."""
    own = trained.get('data_dir')
    if isinstance(own, str) and os.path.isfile(os.path.join(own, 'val.bin')) and \
            os.path.abspath(own) != os.path.abspath(data_dir):
        return f"pass --data_dir={shlex.quote(own)} (the data the run trained on)"
    if (ref or {}).get('kind') != 'hf':
        return f"prepare it with `python {script_path('prepare_owt.py')}`, or pass the --data_dir it wrote"
    source = init_from if init_from != 'resume' else trained.get('init_from')
    model = shlex.quote(source) if isinstance(source, str) and source not in ('scratch', 'resume') else '<the model>'
    return f"prepare it with `python {script_path('prepare_owt.py')} --tokenizer={model}`, or pass the --data_dir it wrote"


def load_model():
    """The model to evaluate, in eval mode, its protocol name (Table 3's for GPT-2) and its tokenizer
    reference."""
    try:
        if init_from != 'resume':
            model = from_pretrained(init_from).to(device).eval()
            family = 'GPT-2' if model.config.arch == 'gpt2' else 'Llama'
            name = f"{family} norm-free (fold.py --export_hf)" if is_export(init_from) else f"{family} (pretrained)"
            return model, name, tokenizer_reference(init_from)
        path, elsewhere = run_checkpoint(out_dir, ckpt, 'evaluate')
        if elsewhere:
            print(f"note: {elsewhere}")
        replaced_run(os.path.dirname(path), 'evaluate')
        broken_link(path, 'evaluate')
        if not os.path.isfile(path):
            hint = missing_hint(out_dir, ckpt,
                                "pass --out_dir=<a run's folder>, or --init_from=<an HF model>", init_from=True)
            fail(f"cannot evaluate: no checkpoint at {path}: {hint}")
        checkpoint = load_checkpoint(path, device)
        model = GPT.from_checkpoint(checkpoint, device).eval()
        trained.update(checkpoint.get('config') or {})
    except (FileNotFoundError, OSError, ValueError, KeyError) as e:
        fail(f"cannot evaluate: {e}")
    if taper_note(checkpoint) and (model.tapered_norms() or getattr(model.config, 'fakeln', False)):
        print(taper_note(checkpoint))
    mixed = mixed_run_note(path, checkpoint)
    if mixed:
        print(mixed)
    if folded_note(checkpoint, path):
        print(folded_note(checkpoint, path))
    config = model.config
    folded = ', folded' if config.folded else ''
    if getattr(config, 'fakeln', False):
        return model, 'FakeLN' + AUX_SUFFIX[getattr(config, 'aux_loss', 'none')] + folded, checkpoint.get('tokenizer')
    names = ('Vanilla', 'Internal-TaperLN', 'All-TaperLN') if config.arch == 'gpt2' else \
        ('Baseline', 'Internal-Taper', 'All-Taper')
    if config.norm == 'dyt':
        return model, 'DyT' + AUX_SUFFIX[config.aux_loss], checkpoint.get('tokenizer')
    name = names[('none', 'internal', 'all').index(config.taper)]
    return model, name + AUX_SUFFIX[config.aux_loss] + folded, checkpoint.get('tokenizer')


def check_tokenizer(ref, meta):
    """The data must be in the model's own tokens: GPT-2's BPE for GPT-2, a tokenizer that encodes as the
    model's own does for an HF model (tokens.same_tokenizer). A TinyStories checkpoint (SentencePiece)
    is refused (checked before the data: see check_model_tokenizer); its HF export, whose tokenizer.json
    encodes as the run's SentencePiece model, is not."""
    kind = (ref or {}).get('kind')
    if not meta:
        print(f"note: {data_dir} has no meta.json, so its tokens are taken to be GPT-2's, unchecked")
    data_kind = meta.get('tokenizer', 'tiktoken')  # prepare_owt.py's GPT-2 data
    try:
        theirs = data_tokenizer(data_dir, meta) or dict(kind='tiktoken', name='gpt2')
    except (OSError, ValueError, KeyError):
        fail(f"cannot evaluate: the tokenizer of {data_dir} (its meta.json names {data_kind}) is missing or "
             f"damaged: {data_advice(ref)}")
    if same_tokenizer(ref, theirs):
        return
    theirs = meta.get('tokenizer_name', 'GPT-2' if data_kind == 'tiktoken' else data_kind)
    fail(f"cannot evaluate: {data_dir} holds {theirs} tokens, not the model's own ({kind or 'unknown'} "
         f"tokenizer): {data_advice(ref)}")


def check_model_tokenizer(ref):
    """A model evaluate.py can score: one in GPT-2's tokens or an HF tokenizer's, not a TinyStories run's
    SentencePiece vocabulary (said before anything about the data, which could not help)."""
    kind = (ref or {}).get('kind')
    if kind not in ('tiktoken', 'hf'):
        fail(f"cannot evaluate a model with a {kind} tokenizer: evaluate.py scores OpenWebText in GPT-2's or "
             f"an HF model's own tokens (diagnose.py scores any checkpoint on its own data)")


def open_set(split):
    """data_dir/<split>.bin, after checking that it is a whole number of tokens, and, for a Pile set,
    that it is one of the folder's own: prepare_owt.py records the tokens of each set it writes."""
    meta = read_meta(data_dir)
    if split != 'val' and 'val_tokens' in meta and f'{split}_tokens' not in meta:
        fail(f"{data_dir}/{split}.bin is not one of this folder's sets: its meta.json records the tokens of every set "
             f"prepare_owt.py wrote, and none of {split}.bin (copied in from another folder?): remove it; then "
             f"`python {prepare_command(data_dir)}` writes the folder's own")
    try:
        return open_tokens(data_dir, split)
    except ValueError as e:
        fail(f"cannot evaluate: {e}; {prepare_again(data_dir, e)}")


def chunks_of(data, split, chunk_len, vocab_size):
    """How many chunks of data are scored, after checking that it can be scored: a full batch of
    chunks, and every id inside the model's vocabulary."""
    n_chunks = len(data) // chunk_len
    if max_chunks:
        n_chunks = min(n_chunks, max_chunks)
    n_chunks -= n_chunks % batch_size  # Baroni's evaluation skips a last batch of fewer chunks
    if len(data) < chunk_len:
        fail(f"{data_dir}/{split}.bin holds {len(data)} tokens, less than one chunk of {chunk_len}: prepare it "
             f"again with `python {prepare_command(data_dir)}` (a file cut short, or too little text)")
    if n_chunks == 0:
        fail(f"{data_dir}/{split}.bin holds {len(data) // chunk_len} chunks of {chunk_len} tokens, fewer than "
             f"batch_size={batch_size}: lower --batch_size, or prepare more data with `python {script_path('prepare_owt.py')}`")
    top = int(data[:n_chunks * chunk_len].max())
    if top >= vocab_size:
        fail(f"cannot evaluate: {data_dir}/{split}.bin holds token id {top}, beyond the model's vocabulary of "
             f"{vocab_size}: pass the --data_dir prepared in the model's own tokens")
    return n_chunks


@torch.no_grad()
def mean_ce(model, data, n_chunks, chunk_len, name):
    """Mean cross-entropy over the chunk_len - 1 next-token predictions of each of the first n_chunks
    chunks of data."""
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
    return (total * batch_size / n_chunks).item()


model, protocol, tokenizer = load_model()
check_model_tokenizer(tokenizer)
if os.path.isfile(data_dir):
    fail(f"data_dir={data_dir} is a file, not a data folder: pass --data_dir=<the folder prepare_owt.py wrote>")
if not os.path.isdir(data_dir):
    fail(f"data_dir={dead_link(data_dir, 'the data folder')}" if dead_link(data_dir, 'the data folder') else
         f"no folder {data_dir}: {data_advice(tokenizer)}")
present = [(key, name, split) for key, name, split in SETS if os.path.isfile(f"{data_dir}/{split}.bin")]
for key, name, split in SETS:  # a link to nothing is not a set left out: said, not taken for one not prepared
    if dead_link(f"{data_dir}/{split}.bin", f"the {split} token file", named=False):
        fail(f"cannot evaluate: {dead_link(f'{data_dir}/{split}.bin', f'the {split} token file', named=False)}")
if not present:
    fail(raw_text(data_dir) or f"{data_dir} has none of val.bin, pile.bin, pile_filtered.bin: "
         f"{inner_data(data_dir, 'val', tokenizer=tokenizer) or data_advice(tokenizer)}")
missing = [f"{split}.bin" for key, name, split in SETS if (key, name, split) not in present]
if missing:  # scored as '-': said, so that a missing set is not read as one left out on purpose
    print(f"note: {data_dir} has no {' or '.join(missing)}, so the table shows '-' for "
          f"{'it' if len(missing) == 1 else 'them'} (prepare_owt.py writes the Pile sets unless --skip_pile)")
try:
    meta = read_meta(data_dir)
except ValueError as e:
    fail(f"cannot evaluate: {e}: {prepare_again(data_dir, e)}")
if meta_mismatch(data_dir, meta):
    fail(f"cannot evaluate: {meta_mismatch(data_dir, meta)}")
if meta.get('tokenizer') == 'sentencepiece':  # prepare_tinystories.py's: its val.bin is no OpenWebText
    try:  # a TinyStories run's export reads these tokens, and diagnose.py scores its run on them
        own = same_tokenizer(tokenizer, data_tokenizer(data_dir, meta))
    except (OSError, KeyError, ValueError):
        own = False
    run = os.path.dirname(export_source(init_from) or '') if init_from != 'resume' and own else ''
    fail(f"cannot evaluate: {data_dir} is TinyStories data (prepare_tinystories.py's), and evaluate.py scores "
         f"OpenWebText and the Pile (prepare_owt.py's): " +
         (f"diagnose.py --out_dir={shlex.quote(run)} scores the run {init_from} was exported from on TinyStories"
          if run else data_advice(tokenizer)))
sets = {key: open_set(split) for key, _, split in present}
check_tokenizer(tokenizer, meta)
# The paper scores 1024-token chunks; a model with a shorter context gets chunks of its block_size.
chunk_len = min(1024, model.config.block_size)
sets = {key: (sets[key], chunks_of(sets[key], split, chunk_len, model.config.vocab_size))
        for key, _, split in present}
label = label or protocol
if model.started and model.tapered_norms():
    model.set_gate(0.0)
    print("evaluating the tapered model at g = 0")
ce, chunks = {key: None for key, _, _ in SETS}, {key: None for key, _, _ in SETS}
for key, name, split in present:
    data, chunks[key] = sets[key]
    ce[key] = mean_ce(model, data, chunks[key], chunk_len, name)

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
