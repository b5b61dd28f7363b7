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

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import torch

from memory import device_bytes
from hf import from_pretrained, init_from_conflict, tokenizer_reference
from configurator import FlagError, configure_globals, dead_link, flag, not_utf8, script_path, special_kind
from model import (GPT, broken_link, folded_note, load_checkpoint, missing_hint, mixed_run_note,
                   pick_device, replaced_run, run_checkpoint, taper_note)
from tokens import load_tokenizer, tokenizer_size

# -----------------------------------------------------------------------------
init_from = flag('resume', "'resume' (out_dir's checkpoint), or an HF GPT-2 or Llama-family name or "
                 "save_pretrained folder (hf.py)")
out_dir = flag('out', "the run's folder, with init_from='resume'", path='run')
ckpt = flag('ckpt.pt', "the checkpoint file in out_dir: ckpt.pt, or ckpt_folded.pt (fold.py)")
start = flag('', "the prompt, or FILE:path to read it from a text file")
num_samples = flag(3, "samples to draw", min=1)
max_new_tokens = flag(200, "new tokens per sample; past the model's context each is predicted from the last "
                      "block_size tokens, as in nanoGPT", min=1)
temperature = flag(0.8, "softmax temperature; 0 decodes greedily", min=0)
top_k = flag(200, "sample among the k likeliest tokens (a k at least the vocabulary's size samples "
             "among all of them)", min=1)
seed = flag(1337, "seeds the sampling", min=0, max=2**63 - 1)
device = flag('', "'cuda', 'cuda:N' or 'cpu' ('': cuda when available)")
dtype = flag('bfloat16', "'bfloat16' autocasts on CUDA; the CPU always runs float32",
             choices=('bfloat16', 'float32'))
# -----------------------------------------------------------------------------


def piped_in():
    """Whether standard input holds text not yet read: a pipe with bytes waiting (echo ... | python
    sample.py) or a file redirected in (< prompt.txt); a terminal, /dev/null or an idle pipe does not."""
    import fcntl
    import stat
    import struct
    import termios
    try:
        mode = os.fstat(0).st_mode
        if stat.S_ISREG(mode):
            return os.fstat(0).st_size > os.lseek(0, 0, os.SEEK_CUR)
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return struct.unpack('i', fcntl.ioctl(0, termios.FIONREAD, b'\0' * 4))[0] > 0
    except OSError:  # no standard input at all, or one that cannot be asked
        pass
    return False


def fail(message):
    """Stop with one sentence that says what to do."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


try:
    configure_globals(globals(), sys.argv[1:])
    device = pick_device(device)
except (FlagError, ValueError) as e:
    fail(str(e))
if dtype == 'bfloat16' and not device.startswith('cuda') and any(a.startswith('--dtype') for a in sys.argv[1:]):
    print(f"note: --dtype=bfloat16 autocasts on CUDA only, so on {device} the samples are drawn in float32")
if temperature == 0 and num_samples > 1:
    print(f"note: temperature=0 decodes greedily, so the {num_samples} samples are the same (top_k and seed are not "
          f"read): set a temperature above 0 for different ones")
if start[:5].lower() == 'file:' and not start.startswith('FILE:') and os.path.isfile(start[5:]):
    fail(f"--start={start} reads as the prompt text itself: write FILE: in capitals, --start=FILE:{start[5:]}, to "
         f"read the prompt from that file")
if start == '-' or (start[:1] == '@' and os.path.isfile(start[1:])):  # other tools' ways to name a prompt file
    fail(f"--start={start} reads as the prompt text itself: sample.py reads a prompt from a file with "
         f"--start=FILE:path" + (f", --start=FILE:{start[1:]}" if start != '-' else " (e.g. FILE:/dev/stdin)"))
named = start[1:] if start[:1] == '@' else start[5:] if start[:5].lower() == 'file:' and start[:5] != 'FILE:' else start
if start and not start.startswith('FILE:') and not any(c.isspace() for c in start) and \
        not os.path.exists(os.path.expanduser(named)) and (
        named.lower().endswith(('.txt', '.md', '.json', '.jsonl')) or (named != start and os.sep in named)):
    fail(f"--start={start} looks like a file name, but there is no such file, and it would be the prompt text itself: "
         f"name an existing prompt file with --start=FILE:path")
if os.path.isfile(start) or os.path.isfile(os.path.expanduser(start)):  # a path alone is its own text
    fail(f"--start={start} names a file, but reads as the prompt text itself: --start=FILE:{start} reads the "
         f"prompt from the file")
if not start and piped_in():  # never read: the prompt would be lost without a word
    print("note: sample.py reads no prompt from standard input, so what is piped in is not read and sampling starts "
          "a document: pass --start=FILE:/dev/stdin to make it the prompt")
if start == 'FILE:-' and not os.path.exists('-'):
    fail("--start=FILE:- names a file called -, and there is none: standard input is read with "
         "--start=FILE:/dev/stdin")
if start.startswith('FILE:'):
    prompt_file = os.path.expanduser(start[5:].strip())  # FILE: prompt.txt; a ~ the shell left, after the colon
    if prompt_file in ('/dev/stdin', '/dev/fd/0', '/proc/self/fd/0') and sys.stdin is None:  # started with <&-
        fail(f"--start=FILE:{prompt_file} reads the prompt from standard input, which is closed (<&-?): pipe the "
             f"prompt in (echo 'Once upon a time' | python {script_path('sample.py')} ...), or name a text file")
    if os.path.isdir(prompt_file):
        fail(f"{prompt_file} is a folder: --start=FILE:path names a text file")
    piped = os.path.exists(prompt_file) and not os.path.isfile(prompt_file)  # FILE:/dev/stdin, FILE:<(...)
    real = os.path.realpath(prompt_file)
    if special_kind(prompt_file) == 'a device' and not real.startswith(('/dev/pts/', '/dev/tty', '/dev/console')):
        fail(f"--start=FILE:{prompt_file} is a device ({real}), not a text file (a terminal or a pipe may be read): "
             f"name the prompt's text file")
    if not prompt_file.strip():
        fail("--start=FILE: names no file: write the prompt's text file after it, e.g. --start=FILE:prompt.txt")
    if not os.path.isfile(prompt_file) and not piped and dead_link(prompt_file, "the prompt's text file"):
        fail(f"--start=FILE:{dead_link(prompt_file, 'the prompt' + chr(39) + 's text file')}")
    if not os.path.isfile(prompt_file) and not piped:
        fail(f"no prompt file at {prompt_file}: --start=FILE:path names a text file")
    try:
        if not piped:  # a pipe is read once, below
            not_utf8('start', prompt_file, subject=f"the prompt file {prompt_file}")
    except FlagError as e:
        fail(str(e))
    try:
        with open(prompt_file, encoding='utf-8-sig') as f:
            start = f.read()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"cannot read the prompt file {prompt_file} as UTF-8 text ({type(e).__name__}): pass a text file")
    if not start:
        fail(f"the prompt file {prompt_file} is empty: write the prompt in it, or drop --start to sample "
             f"from the start of a document")
torch.manual_seed(seed)
conflict = init_from_conflict(init_from, out_dir, ckpt, 'sample.py samples')
if conflict:
    fail(conflict)
if init_from == 'resume':
    path, elsewhere = run_checkpoint(out_dir, ckpt, 'sample')
    if elsewhere:
        print(f"note: {elsewhere}")
    replaced_run(os.path.dirname(path), 'sample')
    broken_link(path, 'sample')
    if not os.path.isfile(path) and not os.path.isdir(path):
        hint = missing_hint(out_dir, ckpt,
                            f"pass --out_dir=<a run's folder> (train one with `python {script_path('train.py')}`) or --init_from=<an HF model>", init_from=True)
        fail(f"cannot sample: no checkpoint at {path}: {hint}")
    try:
        checkpoint = load_checkpoint(path, device)
        model = GPT.from_checkpoint(checkpoint, device)
    except (FileNotFoundError, ValueError) as e:
        fail(f"cannot sample: {e}")
    tokenizer = checkpoint.get('tokenizer')
else:
    try:
        model = from_pretrained(init_from).to(device)
        tokenizer = tokenizer_reference(init_from)  # GPT-2's BPE, or the model's own tokenizer
    except (OSError, ValueError, KeyError) as e:
        fail(f"cannot sample: {e}")
model.eval()
if tokenizer is None:
    fail(f"cannot sample: {path} names no tokenizer (its data_dir had no meta.json), so its tokens cannot "
         f"be decoded: retrain on data prepared by prepare_tinystories.py or prepare_owt.py")
encode, decode = load_tokenizer(tokenizer)
prompt = encode(start)
if max(prompt) >= model.config.vocab_size:
    fail(f"the tokenizer the model names gives id {max(prompt)}, beyond the model's vocabulary of "
         f"{model.config.vocab_size}: the run's data named another tokenizer than it was prepared with; "
         f"prepare the data again and retrain")
context = model.config.block_size
ids_bytes = num_samples * (len(prompt) + max_new_tokens) * 8  # the samples' int64 ids, held until they print
if ids_bytes > device_bytes('cpu'):
    fail(f"num_samples={num_samples} samples of {len(prompt)} prompt and max_new_tokens={max_new_tokens} new tokens "
         f"need {ids_bytes / 2**30:,.0f} GiB for their token ids alone, more than this machine's "
         f"{device_bytes('cpu') / 2**30:,.0f} GiB of RAM: lower --max_new_tokens or --num_samples")
if len(prompt) + max_new_tokens > context:
    print(f"the prompt's {len(prompt)} tokens and max_new_tokens={max_new_tokens} exceed the model's context of "
          f"{context}: each new token is predicted from the last {context} (the prompt's start is cropped)")
if model.started and model.tapered_norms():
    model.set_gate(0.0)
    print("sampling the tapered model at g = 0")
if init_from == 'resume':
    for said in (taper_note(checkpoint) if model.started or getattr(model.config, 'fakeln', False) else None,
                 mixed_run_note(path, checkpoint), folded_note(checkpoint, path)):
        if said:
            print(said)
x = torch.tensor(prompt, dtype=torch.long, device=device)[None].repeat(num_samples, 1)
use_bf16 = device.startswith('cuda') and dtype == 'bfloat16'
ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16) if use_bf16 else nullcontext()
with ctx:
    y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k, vocab=tokenizer_size(tokenizer))
for row in y.tolist():
    print(decode(row))
    print('---------------')
