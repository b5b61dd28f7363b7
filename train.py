"""
One training loop for every run of the paper: TinyStories pre-training (Baseline, Internal-Taper,
All-Taper, with or without the fixed-target scale loss) and GPT-2 fine-tuning from HF weights.

    python train.py config/taper_internal_512.py                           # one GPU
    torchrun --standalone --nproc_per_node=8 train.py config/taper_internal_512.py
    python train.py config/quick_cpu.py

nanoGPT's loop with the taper schedule added: start_taper() once at taper_start, the gate g(k) set
every step, and tapered models evaluated at g = 0.
"""

import atexit
import errno
import fcntl
import functools
import inspect
import json
import math
import os
import re
import signal
import shlex
import socket
import sys
import time
import urllib.parse
import uuid
from contextlib import nullcontext
from dataclasses import asdict

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict, set_optimizer_state_dict)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

import memory
from memory import describe as describe_memory
from hf import (TokenizerMismatch, export_source, from_pretrained, is_export, local_mistake, pretrained_config,
                tokenizer_reference)
from model import GPT, GPTConfig, broken_link, device_mistake, load_checkpoint, renamed_checkpoint
from tokens import (data_tokenizer, inner_data, open_tokens, other_tokens, prepare_again, prepare_command, read_meta,
                    same_tokenizer, tokenizer_size)

# -----------------------------------------------------------------------------
# Defaults: the paper's default run, Internal-Taper (+aux) at d = 512 (App. C). Override them with a
# config file and --key=value; each flag says what it takes (configurator.py), and --help lists them.
from configurator import (Flag, FlagError, configure_globals, dead_link, discard, elsewhere_remedy, flag, folder_kind, init_from_mistake,  # noqa: E402
                          locked, note, replaced_link, script_path, write_failure, write_remedy)
# I/O
out_dir = flag('out', "the run's folder: ckpt.pt, log.jsonl, config.json", path='out',
               read_only_when=lambda values: values['eval_only'] or values['memory_plan'])  # they write nothing
init_from = flag('scratch', "'scratch', 'resume' (out_dir's checkpoint), or an HF GPT-2 or Llama-family "
                 "name or save_pretrained folder (hf.py)")
overwrite = flag(False, "start from scratch over the run already in out_dir (its files go once the "
                 "new run has taken its first step)")
reschedule = flag(False, "on a resume, accept a changed taper_start, taper_end or FakeLN schedule: the "
                  "gate and removals follow the new schedule from the checkpoint's step on")
stop_iter = flag(0, "end this invocation early at this step, checkpointed (0: max_iters), e.g. to fit a "
                 "cluster's time limit; --init_from=resume continues the same run", min=0)
eval_interval = flag(5000, "steps between evaluations, each followed by a checkpoint", min=1)
log_interval = flag(100, "steps between training-log rows", min=1)
eval_iters = flag(50, "batches per split; the same fixed-seed batches at every evaluation", min=1)
eval_only = flag(False, "evaluate the starting model once and exit")
wandb_log = flag(False, "also log to Weights & Biases (needs `pip install wandb`)")
wandb_project = flag('tapernorm', "W&B project")
wandb_run_name = flag('run', "W&B run name")
# data
data_dir = flag('data/tinystories10000', "folder of train.bin, val.bin and meta.json (prepare_*.py)")
gradient_accumulation_steps = flag(1, "micro-batches per step in one process; N ranks split the global "
                                   "batch of gradient_accumulation_steps x batch_size sequences", min=1)
batch_size = flag(16, "sequences per micro-batch", min=1)
block_size = flag(512, "tokens per training window", min=1)
data_layout = flag('random', "'random': contiguous windows at random offsets (App. C); 'blocks': shuffled "
                   "non-overlapping blocks, each predicting its own tokens 2..T (App. D, Baroni et al.)",
                   choices=('random', 'blocks'))
mask_eot_targets = flag(False, "leave end-of-text targets out of the loss (Baroni's collator)")
# model
arch = flag('llama', "block layout", choices=('llama', 'gpt2'))
vocab_size = flag(10000, "embedding rows; at least the data's vocabulary", min=1)
n_layer = flag(8, "transformer blocks", min=1)
n_head = flag(16, "attention heads", min=1)
n_embd = flag(512, "model width d", min=1)
n_kv_head = flag(0, "key/value heads of grouped-query attention (0: n_head)", min=0)
mlp_hidden = flag(0, "SwiGLU's hidden size (0: the LLaMA rule, about 8d/3)", min=0)
tied_head = flag(True, "the output head is the token embedding")
norm = flag('rmsnorm', "the norm every block uses", choices=('rmsnorm', 'layernorm', 'dyt'))
dropout = flag(0.0, "HF GPT-2's placement (embeddings, attention, residual), training only", min=0, below=1)
taper = flag('internal', "'none' (Baseline), 'internal' or 'all' (Sec. 3)", choices=('none', 'internal', 'all'))
taper_start = flag(50_000, "g = 1 before; c and s_tgt are calibrated here", min=0)
taper_end = flag(1_000_000, "g = 0 from here on", min=1)
aux_loss = flag('fixed', "'fixed': the fixed-target scale loss (eq. 5); 'baroni': Baroni et al.'s",
                choices=('none', 'fixed', 'baroni'))
aux_weight = flag(0.1, "lambda, the scale loss's weight", min=0)
ema_rate = flag(0.01, "mu, the EMA's weight on each new sample", above=0, max=1)
# FakeLN, Baroni et al.'s protocol (GPT-2): layer i's ln_2 is removed at step start[0] + i gap[0],
# then ln_1 on the Q/K path (start[1], gap[1]), on the V path (start[2], gap[2]), then ln_f at
# start[3]; sigma_avg comes from an EMA that moves every training forward, or from the starting model
fakeln = flag(False, "replace every LayerNorm by Baroni et al.'s FakeLN, removed step by step")
fakeln_start = flag((20, 44, 68, 104), "removal steps of the first ln_2, ln_1 (Q/K), ln_1 (V), and ln_f, in that order",
                    items=int, length=4, min=0)
fakeln_gap = flag((2, 2, 3), "steps between layers' removals of ln_2, ln_1 (Q/K), ln_1 (V)",
                  items=int, length=3, min=0)
fakeln_momentum = flag(0.9, "the weight of sigma's EMA on its old value", min=0, below=1)
fakeln_sigma = flag('live', "a removed FakeLN's sigma_avg: 'live', our choice, the EMA, each ln_1 path "
                    "frozen at its own removal; 'live_shared', Baroni's EXP_RECOMPUTE_STD_ON_REAL=1, the EMA "
                    "with ln_1's paths sharing one sigma; 'pretrained', his default, measured on the starting "
                    "model over the first step's batch", choices=('live', 'live_shared', 'pretrained'))
# AdamW, linear warmup then cosine decay
learning_rate = flag(3e-4, "peak learning rate", above=0)
max_iters = flag(1_000_000, "optimizer steps in the run", min=1)
weight_decay = flag(0.0, "AdamW's decoupled weight decay (2-D weights only, unless decay_fakeln_weight)", min=0)
decay_fakeln_weight = flag(False, "also decay FakeLN's gamma, as Baroni et al.'s HF Trainer does (it exempts "
                           "only nn.LayerNorm members and biases)")
beta1 = flag(0.9, "AdamW's beta1", min=0, below=1)
beta2 = flag(0.95, "AdamW's beta2", min=0, below=1)
grad_clip = flag(1.0, "global gradient-norm clip (0 disables)", min=0)
warmup_iters = flag(50_000, "linear warmup steps", min=0)
lr_decay_iters = flag(1_000_000, "the cosine decay reaches min_lr here", min=1)
min_lr = flag(0.0, "the learning rate after lr_decay_iters", min=0)
# system
grad_checkpoint = flag(False, "recompute blocks in backward (activation checkpointing), for GPT-2 XL")
fsdp = flag(False, "under torchrun: shard parameters, gradients and AdamW state (FSDP2) instead of "
            "replicating them (DDP), for GPT-2 XL on smaller GPUs")
device = flag('', "'cuda', 'cuda:N' or 'cpu' ('': CUDA when this machine has it, else the CPU)")
dtype = flag('bfloat16', "'bfloat16' autocasts on CUDA; the CPU always runs float32",
             choices=('bfloat16', 'float32'))
compile = flag(False, "torch.compile the model")
seed = flag(1337, "seeds the weights, the batches and dropout", min=0, max=2**63 - 1)
peak_flops = flag(989e12, "per device, for MFU (H100 SXM dense bf16)", above=0)
memory_plan = flag(False, "print the memory plan (memory.py) and exit")
# -----------------------------------------------------------------------------


def launcher():
    """(ddp, rank, world_size) from torchrun's environment, refusing a partial or stale one: a RANK or
    WORLD_SIZE left set in a shell would otherwise split every batch among ranks that do not exist."""
    names = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')
    present = [n for n in names if n in os.environ]
    if not any(n in os.environ for n in names[:3]):  # a rendezvous address alone launches nothing
        return False, 0, 1
    missing = [n for n in names if n not in os.environ]
    if not missing and not os.environ['MASTER_PORT'].isdigit():
        print(f"MASTER_PORT={os.environ['MASTER_PORT']} is not a port number: launch with torchrun, which sets "
              f"it, or unset {', '.join(present)}", file=sys.stderr)
        sys.exit(1)
    numbers = [os.environ.get(n, '') for n in names[:3]]
    if missing or not all(v.isdigit() for v in numbers) or not int(numbers[0]) < int(numbers[1]) \
            or not int(numbers[2]) < int(numbers[1]):
        what = f"{', '.join(present)} set but not {', '.join(missing)}" if missing else \
            f"RANK={numbers[0]}, WORLD_SIZE={numbers[1]}, LOCAL_RANK={numbers[2]}"
        print(f"the environment has {what}: launch with torchrun --nproc_per_node=N, or unset "
              f"{', '.join(present)} to train in one process", file=sys.stderr)
        sys.exit(1)
    try:  # gloo and NCCL retry an unresolvable rendezvous host for ever
        socket.getaddrinfo(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']))
    except (OSError, UnicodeError):
        print(f"MASTER_ADDR={os.environ['MASTER_ADDR']} does not resolve to a host: launch with torchrun, which "
              f"sets it, or unset {', '.join(present)}", file=sys.stderr)
        sys.exit(1)
    return True, int(numbers[0]), int(numbers[1])


ddp, rank, world_size = launcher()
configurator.printing('train.py')  # `train.py | head` must not stop the run


def continue_command():
    """The command that continues this run from its checkpoint, started as this one was: under torchrun,
    with its ranks (an FSDP run's config keeps fsdp=True, which one process refuses)."""
    command = f"{script_path('train.py')} --init_from=resume --out_dir={shlex.quote(out_dir)}"
    if not ddp:
        return f"`python {command}`"
    if os.environ.get('LOCAL_WORLD_SIZE', '').strip() == str(world_size):  # one machine
        return f"`torchrun --standalone --nproc_per_node={world_size} {command}`"
    return f"this run's torchrun command ({world_size} ranks) on `{command}`"


def fail(message):
    """Stop with one sentence that says what to do; under torchrun rank 0 alone prints it."""
    if rank == 0:
        print(message, file=sys.stderr, flush=True)
    else:  # the same mistake stops rank 0 a moment later: let it print before torchrun ends the ranks
        time.sleep(10)
    sys.exit(1)


TRAIN_FLAGS = {k: v for k, v in globals().items() if isinstance(v, Flag)}  # before they become values
PER_INVOCATION = ('init_from', 'overwrite', 'stop_iter', 'reschedule', 'eval_only', 'memory_plan')


def restore_replaced(folder):
    """A run killed outright (SIGKILL) before its first checkpoint left the run it replaced (--overwrite)
    aside in folder/.replaced: put it back, over the killed run's config.json and log.jsonl."""
    held = os.path.join(folder, '.replaced')
    if not os.path.isdir(held):
        return
    for f in os.listdir(held):
        os.replace(os.path.join(held, f), os.path.join(folder, f))
    os.rmdir(held)
    print(f"note: restored the run in {folder} that a killed --overwrite run had moved to .replaced")


def run_config(values):
    """A resume continues the run in out_dir with its own config, the one its checkpoint holds, so only
    the flags that change it need passing; None for a scratch run, or a folder without a checkpoint
    (the resume then stops at it, saying why); a checkpoint that cannot be read stops here."""
    path = os.path.join(values['out_dir'], 'ckpt.pt')
    if values['init_from'] == 'resume' and not values.get('memory_plan') and rank == 0:
        restore_replaced(values['out_dir'])  # before its config is read: the run to resume is the one put back
    if values['init_from'] != 'resume' or not os.path.isfile(path):
        return None
    try:  # mmap: the config, without reading the weights
        held = load_checkpoint(path, 'cpu', mmap=True)
    except ValueError as e:  # damaged, or another program's: nothing to resume, whatever the flags say
        fail(f"cannot resume: {e}")
    if not isinstance(held.get('config'), dict):
        return None
    whole = 'folded_from' not in held and 'optimizer' in held  # else the resume says below what it is
    RESUMED.update(config=held['config'], iter_num=held.get('iter_num') if whole else None)
    return {k: v for k, v in held['config'].items() if k not in PER_INVOCATION}


RESUMED = {}  # the config and step of the checkpoint a resume continues, as run_config read them


def recorded():
    """The config the run's files keep (the checkpoint, config.json): this invocation's, but with the
    run's origin as init_from ('scratch', or the model it fine-tunes), which a resume keeps."""
    origin = RESUMED.get('config', {}).get('init_from')
    return dict(config, init_from=origin) if init_from == 'resume' and isinstance(origin, str) else config


def invocation_clash():
    """Flags of this invocation (PER_INVOCATION) that contradict each other, whatever the run in out_dir: said
    before anything about that run, whose advice would only lead to this sentence next."""
    if overwrite and init_from == 'resume':
        return "--overwrite starts again over out_dir's run and --init_from=resume continues it: choose one"
    if eval_only and memory_plan:
        return "--eval_only and --memory_plan each run instead of training, and the plan exits first: pass one of them"
    if reschedule and init_from != 'resume':
        return "--reschedule changes the schedule of a run being resumed: drop it, or add --init_from=resume"
    if eval_only and stop_iter:
        return "--eval_only trains no step, so --stop_iter means nothing with it: drop one of them"
    if eval_only and overwrite:
        return "--eval_only writes nothing, so --overwrite means nothing with it: drop one of them"
    return None


try:
    config = configure_globals(globals(), sys.argv[1:], start=run_config)
except FlagError as e:
    fail(str(e))
if invocation_clash():
    fail(invocation_clash())
FIXED_BY_RUN = ('data_dir', 'vocab_size', 'n_layer', 'n_head', 'n_embd', 'n_kv_head', 'mlp_hidden', 'arch', 'norm',
                'tied_head', 'taper', 'aux_loss', 'fakeln', 'seed', 'data_layout')  # what a resume cannot change
files = [a for a in sys.argv[1:] if not a.startswith('-') and a.lower().endswith('.py')]
flagged = {a[2:].partition('=')[0] for a in sys.argv[1:] if a.startswith('--')}
undone = [k for k in FIXED_BY_RUN if RESUMED and k not in flagged and k in RESUMED['config']
          and config[k] != RESUMED['config'][k]]
if files and not RESUMED and not memory_plan and 'out_dir' not in flagged:  # config/baseline_64.py --taper=internal
    named = [f for f in files if 'out_dir' in memory.assigned(f)]
    as_filed = memory.resolve(files) if named else {}
    moved = [k for k in ('arch', 'norm', 'taper', 'fakeln') if k in flagged and named and as_filed[k] != config[k]]
    if moved:  # the folder's name would say one setting and hold another
        fail(f"--{moved[0]}={config[moved[0]]} makes {named[-1]}'s run ({moved[0]}={as_filed[moved[0]]!r}) another "
             f"setting, and the file's out_dir={as_filed['out_dir']} names its own: pass --out_dir=<a folder for this "
             f"run>, or start from the config of the setting meant (config/ has one per setting)")
if files and undone:  # a config file over a resume: its values are the run's to keep
    fail(f"a resume continues its run's own config, and {', '.join(files)} would change its "
         f"{', '.join(undone[:3])}{', ...' if len(undone) > 3 else ''}: drop the config file (a resume needs only "
         f"--init_from=resume --out_dir=<run>)")
# -----------------------------------------------------------------------------
# Checks, before anything is loaded or written: one sentence for each mistake a user can make.


def run_origin(folder):
    """Where the run in folder started from, as its config.json records it: 'scratch', or the HF model it
    fine-tunes (a new start of the run starts there too); 'scratch' when config.json says nothing readable."""
    try:
        with open(os.path.join(folder, 'config.json'), encoding='utf-8-sig') as f:
            origin = json.load(f).get('init_from')
    except (OSError, ValueError, AttributeError):
        return 'scratch'
    return origin if isinstance(origin, str) and origin.strip() and origin != 'resume' else 'scratch'


def nothing_to_train(done, key, value, by_hand=''):
    """The sentence for a resume whose key (max_iters or stop_iter) = value is not past the run's iter done;
    by_hand: what config.json, edited to go on, gives instead."""
    return (f"the run in {out_dir} is already at iter {done}, so {key}={value} leaves nothing to train{by_hand}: "
            f"raise it, or pass --eval_only{' instead of --stop_iter' if key == 'stop_iter' else ''} to evaluate "
            f"the checkpoint")


def check_resumable():
    """A resume needs a checkpoint of this repository in out_dir: checked before the data, whose folder
    the checkpoint's config names."""
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')
    if not os.path.exists(ckpt_path):
        kind = folder_kind(out_dir) if os.path.isdir(out_dir) else None
        if kind and not kind.startswith('a training run'):
            fail(f"cannot resume: out_dir={out_dir} is {kind}, not a run: pass the run's folder as --out_dir"
                 + (f", or fine-tune this model with --init_from={out_dir} --out_dir=<a new folder>"
                    if kind.startswith('an HF') else ''))
        broken_link(ckpt_path, 'resume')
        runs = sorted(f for f in os.listdir(out_dir) if os.path.isfile(os.path.join(out_dir, f, 'ckpt.pt'))) \
            if os.path.isdir(out_dir) else []
        origin = run_origin(out_dir)
        if os.path.isfile(os.path.join(out_dir, 'ckpt_folded.pt')):  # --overwrite would remove the folded model
            fail(f"cannot resume: {out_dir} holds ckpt_folded.pt but no ckpt.pt, and a folded model (fold.py's, for "
                 f"inference) has no optimizer state to go on from: sample or score it with --ckpt=ckpt_folded.pt (sample.py, "
                 f"diagnose.py; evaluate.py on OpenWebText), or start the run again in a new folder, "
                 f"--init_from={shlex.quote(origin)} --out_dir=<a new folder>")
        if os.path.isfile(ckpt_path + '.tmp'):  # a kill while the first checkpoint was written: no run to go on
            fail(f"cannot resume: the run in {out_dir} was stopped while it wrote its first checkpoint (only "
                 f"ckpt.pt.tmp, cut short, is there), so there is nothing to resume: start it again with "
                 f"--init_from=scratch --overwrite")
        name = renamed_checkpoint(out_dir, 'ckpt.pt')
        if name:  # a checkpoint copied or renamed by hand: ckpt.pth, ckpt (1).pt
            fail(f"cannot resume: no checkpoint at {ckpt_path}, but {out_dir} holds {name}: a resume reads ckpt.pt, "
                 f"so rename {name} to ckpt.pt if it is this run's checkpoint")
        fail(f"cannot resume: no checkpoint at {ckpt_path}: "
             + (f"it is a folder of runs ({', '.join(runs[:3])}{', ...' if len(runs) > 3 else ''}): pass one of "
                f"them as --out_dir" if runs else
                elsewhere_remedy(out_dir, 'out_dir') or
                f"pass --out_dir=<the run's folder>, or start the run again with --init_from={shlex.quote(origin)}" + (
                    " --overwrite (which replaces its log.jsonl and config.json)" if any(
                        os.path.isfile(os.path.join(out_dir, f)) for f in ('log.jsonl', 'config.json')) else "")))
    try:
        load_checkpoint(ckpt_path, 'cpu', mmap=True)  # the weights stay on disk: they are loaded below
    except ValueError as e:
        fail(f"cannot resume: {e}")


# The model settings a resume may change: the context (it must only hold the windows), lambda (it weights
# a loss, not a tensor) and, in a run without FakeLN, FakeLN's settings, which mean nothing to it.
RESUME_MAY_CHANGE = ('block_size', 'aux_weight', *(() if fakeln else ('fakeln_momentum', 'fakeln_sigma')))


def check_config():
    """The rules that tie flags together; each flag's own range is checked as it is read."""
    done = RESUMED.get('iter_num')
    if isinstance(done, int) and not (eval_only or memory_plan) and (stop_iter or max_iters) <= done:  # said first
        key = 'stop_iter' if stop_iter else 'max_iters'
        try:  # config.json edited by hand to go on: a resume reads the checkpoint's config, never that copy
            with open(os.path.join(out_dir, 'config.json'), encoding='utf-8-sig') as f:
                edited = json.load(f).get(key)
        except (OSError, ValueError, AttributeError):
            edited = None
        by_hand = (f" (config.json's {key}={edited!r} is not read: a resume takes the checkpoint's config, and a "
                   f"flag changes it: --{key}={edited})" if isinstance(edited, int) and edited > done else "")
        fail(nothing_to_train(done, key, stop_iter or max_iters, by_hand))
    held = RESUMED.get('config', {})  # a flag that would make the resumed model another: before the rules below,
    remade = [k for k in GPTConfig.__dataclass_fields__ if k in flagged and k in held and held[k] != config[k]
              and k not in RESUME_MAY_CHANGE]  # whose advice is for a new run
    if remade:
        k = remade[0]
        fail(f"cannot resume: the run in {out_dir} has {k}={held[k]!r}, and --{k}={config[k]!r} would change the "
             f"model it continues: a resume keeps its run's model; drop --{k}, or start a new run in another "
             f"--out_dir")
    if min_lr > learning_rate:
        fail(f"min_lr={min_lr} must not exceed learning_rate={learning_rate}")
    if warmup_iters >= max_iters and not eval_only:  # an evaluation takes no step: its schedule is no matter
        fail(f"warmup_iters={warmup_iters} is not below max_iters={max_iters}: the learning rate would never reach "
             f"its peak; lower warmup_iters")
    if warmup_iters >= lr_decay_iters and not eval_only:
        fail(f"warmup_iters={warmup_iters} must be below lr_decay_iters={lr_decay_iters}: the cosine "
             f"decay runs from the end of warmup to lr_decay_iters")
    if n_embd % n_head:
        fail(f"n_embd={n_embd} is not divisible by n_head={n_head}: pick a width that is a multiple "
             f"of the head count")
    if arch == 'llama' and (n_embd // n_head) % 2:
        fail(f"the head size n_embd/n_head={n_embd // n_head} is odd: RoPE rotates pairs of features, "
             f"so pick an even head size")
    try:
        GPTConfig(arch=arch, norm=norm, taper=taper, aux_loss=aux_loss, fakeln=fakeln, n_embd=n_embd,
                  n_head=n_head, n_kv_head=n_kv_head, tied_head=tied_head, mlp_hidden=mlp_hidden, dropout=dropout,
                  fakeln_momentum=fakeln_momentum, fakeln_sigma=fakeln_sigma, vocab_size=vocab_size,
                  block_size=block_size, n_layer=n_layer)
    except ValueError as e:
        fail(f"{e}: {memory.model_remedy(sys.argv[1:])}")
    if init_from_mistake(init_from, ['scratch', 'resume']):
        fail(init_from_mistake(init_from, ['scratch', 'resume']))
    if init_from not in ('scratch', 'resume') and local_mistake(init_from):  # before the data: it is not what is wrong
        fail(local_mistake(init_from))
    if not re.fullmatch(r'(cpu|cuda(:\d+)?)?', device):
        fail(device_mistake(device))
    if device.startswith('cuda') and not torch.cuda.is_available() and not memory_plan:
        fail("CUDA is not available on this machine: run with --device=cpu")
    if stop_iter > max_iters:
        fail(f"stop_iter={stop_iter} lies past max_iters={max_iters}, where the run ends anyway: lower --stop_iter, "
             f"or raise --max_iters (and --lr_decay_iters with it) for a longer run")
    if eval_only and init_from == 'scratch' and rank == 0:  # allowed (a baseline for the untrained model), said
        print("eval_only with init_from=scratch: this evaluates an untrained model (--init_from=resume evaluates "
              "the run in out_dir)")
    if eval_only:
        return
    if taper != 'none' and not 0 <= taper_start < taper_end <= max_iters:
        fail(f"the taper needs 1 <= taper_start < taper_end <= max_iters, not taper_start={taper_start}, "
             f"taper_end={taper_end}, max_iters={max_iters}: otherwise the gate jumps or never reaches 0"
             + (f"; a resume that ends the run sooner moves taper_end as well, which changes the run's schedule: "
                f"--taper_end={max_iters} --reschedule" if init_from == 'resume' and taper_start < max_iters < taper_end
                else ""))
    if aux_loss == 'fixed' and not 0 <= taper_start < max_iters:
        fail(f"the fixed-target loss freezes s_tgt at taper_start={taper_start}, which must lie inside "
             f"the run's max_iters={max_iters}")
    if aux_loss != 'none' and aux_weight == 0:
        fail(f"aux_weight=0 turns the {'fixed-target scale' if aux_loss == 'fixed' else 'Baroni'} loss off: pass "
             f"--aux_loss=none for that")
    if (taper != 'none' or aux_loss == 'fixed') and taper_start < 1:
        fail(f"taper_start={taper_start} leaves no step at g = 1 to calibrate c and s_tgt from: "
             f"start the taper at step 1 or later")
    if fakeln and list(fakeln_start) != sorted(fakeln_start) and init_from != 'resume':  # a resume: once its steps are read
        fail(unordered_removals())


def unordered_removals():
    """The sentence for fakeln_start out of Baroni et al.'s order, which the flag's items name."""
    return (f"fakeln_start={tuple(fakeln_start)} removes the LayerNorms out of Baroni et al.'s order (ln_2, then "
            f"ln_1 on the Q/K path, ln_1 on the V path, ln_f last), which its four steps give in turn: pass them in "
            f"that order, e.g. --fakeln_start={','.join(map(str, sorted(fakeln_start)))}")


def hold_out_dir(probe=False):
    """One train.py at a time in out_dir: rank 0 of a run that writes holds an exclusive lock on the
    folder itself (nothing is written for it) from its first write until it exits, so a job submitted
    twice, or a resume started beside a running one, stops instead of interleaving two runs' checkpoints
    and log. probe: only ask, up front, whether a run holds it (a shared lock, let go at once: refusals
    that only read the folder never block one another)."""
    global out_dir_lock
    if out_dir_lock is not None or not os.path.isdir(out_dir):
        return
    fd = os.open(out_dir, os.O_RDONLY)
    for attempt in range(1 if probe else 100):  # a run's own lock waits out other processes' brief probes
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB if probe else fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.01)
    else:
        os.close(fd)
        fail(f"another train.py is running in {out_dir} right now: wait for it to end (a resume then "
             f"continues where it stopped), or choose another out_dir")
    if probe:
        os.close(fd)
    else:
        out_dir_lock = fd


def same_value(a, b):
    """Whether two values of a log row are the same: numbers to 6 digits (a tool that rewrote the log
    may have printed fewer), NaN as NaN (a NaN loss is logged as NaN)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(b, (int, float)) and isinstance(a, (int, float)) and (
            math.isclose(a, b, rel_tol=1e-6) or math.isnan(a) and math.isnan(b))
    return a == b


def log_dicts(path):
    """The rows of the log at path that parse as JSON objects (a torn or foreign line is passed over)."""
    with open(path, encoding='utf-8-sig', errors='replace') as f:
        for line in f:
            try:
                held = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(held, dict):
                yield held


def logged(row, path):
    """Whether the log at path holds row, value for value: a log a tool rewrote (keys sorted, spacing,
    numbers printed to fewer digits) still holds its rows; one of another run does not."""
    return any(held.keys() == row.keys() and all(same_value(row[k], held[k]) for k in row) for held in log_dicts(path))


def changed_row(row, path):
    """For an evaluation row the log at path lacks: how the log's row of the same step and keys differs
    ("val_loss=5.91, not the checkpoint's 5.9137"), or None when it has no such row."""
    for held in log_dicts(path):
        if held.keys() == row.keys() and held.get('iter') == row['iter']:
            key = next(k for k in row if not same_value(row[k], held[k]))
            return f"{key}={held[key]!r}, not the checkpoint's {row[key]!r}"
    return None


RUN_FILES = ('ckpt.pt', 'log.jsonl', 'config.json', 'ckpt_folded.pt', 'train_time.json')  # --overwrite's


def folder_state():
    """out_dir's run files (and their .tmp), by name, size and time of change ({} when there is no folder):
    what the checks below saw, which must still hold at the run's first write. Other files (figures a
    plot.py put beside the run) are not the run's."""
    if not os.path.isdir(out_dir):
        return {}
    return {e.name: (e.stat(follow_symlinks=False).st_size, e.stat(follow_symlinks=False).st_mtime_ns)
            for e in os.scandir(out_dir) if (e.is_file(follow_symlinks=False) or e.is_symlink())
            and e.name.removesuffix('.tmp') in RUN_FILES}


def folding():
    """One sentence when a fold.py is folding out_dir's checkpoint right now (it holds the file's lock):
    a run written over it meanwhile would leave the old run's folded file beside the new run."""
    if os.path.isfile(ckpt_path) and locked(ckpt_path):
        return (f"a fold.py is folding {ckpt_path} right now: wait for it to end, then run this again (it writes "
                f"{out_dir}/ckpt_folded.pt of the run as it is now)")
    return None


out_dir_lock = None
if rank == 0 and not memory_plan and not eval_only:
    hold_out_dir(probe=True)
if init_from == 'resume' and not memory_plan:  # first: without the run's checkpoint its config is the defaults
    check_resumable()
check_config()
if rank == 0 and not memory_plan:  # allowed, but said: settings that have no effect, or an odd schedule
    defaults = {k: v.default for k, v in TRAIN_FLAGS.items()}
    no_start = taper == 'none' and aux_loss != 'fixed'  # nothing starts at taper_start (s_tgt does, with 'fixed')
    idle = [k for k, off in (('aux_weight', aux_loss == 'none'), ('fakeln_start', not fakeln),
                             ('fakeln_gap', not fakeln), ('fakeln_momentum', not fakeln),
                             ('fakeln_sigma', not fakeln), ('decay_fakeln_weight', not fakeln),
                             ('taper_start', no_start), ('ema_rate', no_start), ('taper_end', taper == 'none'),
                             ('wandb_project', not wandb_log), ('wandb_run_name', not wandb_log))
            if k in config and off and config[k] != defaults[k]]
    if idle:
        print(f"note: {', '.join(f'{k}={config[k]!r}' for k in idle)} has no effect in this run "
              f"(taper={taper!r}, aux_loss={aux_loss!r}, fakeln={fakeln}, wandb_log={wandb_log})")
    if fakeln and fakeln_sigma == 'pretrained' and init_from == 'scratch':
        print("note: fakeln_sigma='pretrained' measures each LayerNorm's sigma on the model as it starts, which "
              "from scratch is its random initialization: 'live' (the default) follows the sigma as it trains")
    if log_interval >= max_iters > 1 and init_from != 'resume' and not eval_only:  # valid, but a curve of one point
        print(f"note: log_interval={log_interval} is not below max_iters={max_iters}, so the log holds the training "
              f"loss of step 0 alone (plot.py draws the curve from those rows): lower --log_interval for a curve")
    if lr_decay_iters < max_iters and not eval_only:
        print(f"note: the learning rate decays to min_lr={min_lr} by lr_decay_iters={lr_decay_iters} and stays "
              f"there for the last {max_iters - lr_decay_iters} steps")
    if lr_decay_iters > max_iters and not eval_only:  # e.g. max_iters lowered alone (GPT-2 L's config: by design)
        print(f"note: the cosine decay runs to lr_decay_iters={lr_decay_iters}, past max_iters={max_iters}, so the "
              f"run ends before the learning rate reaches min_lr={min_lr} (--lr_decay_iters={max_iters} decays it "
              f"over the run)")
# N ranks split the global batch of one process evenly, so the step sees the same sequences whatever
# N is (memory.split_batch says how).
world_batch = gradient_accumulation_steps * batch_size  # sequences per optimizer step, all ranks
try:
    accum_steps, micro_batch = memory.split_batch(config, world_size)  # per rank per step; sequences each
except ValueError as e:
    fail(str(e))
# the fine-tuning config of each family of HF model, which advice names for a config of the other family
FINETUNE_CONFIGS = {'llama': 'config/finetune_smollm2_135m_alltaper.py', 'gpt2': 'config/finetune_gpt2_s_alltaper.py'}


def model_shape(pretrained):
    """Refuse a fine-tune whose config's shape is not the HF model's (pretrained, its GPTConfig), or
    whose block_size exceeds its context: the shape first, which says when the config is another model's."""
    if fakeln and pretrained.norm != 'layernorm':  # before the shape: no shape makes FakeLN fit an RMSNorm model
        fail(f"fakeln replaces GPT-2's LayerNorms (Baroni et al.), and {init_from} is a {pretrained.arch} model with "
             f"{pretrained.norm}: fine-tune it with a config written for {pretrained.arch} models, such as "
             f"{FINETUNE_CONFIGS.get(pretrained.arch, FINETUNE_CONFIGS['llama'])}, or start this config from a "
             f"GPT-2 model")
    ours_config = memory.model_config(config)  # 0 for n_kv_head or mlp_hidden: their rule, as the model reads it
    keys = ('arch', 'norm', 'vocab_size', 'n_layer', 'n_head', 'n_embd', 'n_kv_head', 'mlp_hidden', 'tied_head')
    wrong = {key for key in keys if ours_config.resolved(key) != pretrained.resolved(key)}
    # n_kv_head and mlp_hidden follow rules of the others (0: n_head's, the arch's width): read them as they
    # resolve once the others are set as said, so that the command given is the whole of the fix
    try:
        fixed = memory.model_config(config | {k: getattr(pretrained, k) for k in wrong})
        wrong = [key for key in keys if key in wrong and config[key] != getattr(pretrained, key)
                 or fixed.resolved(key) != pretrained.resolved(key)]  # n_kv_head=0 in both: right once n_head is
    except ValueError:  # the config's own n_kv_head does not fit the model's other fields: set it as well
        wrong = [key for key in keys if key in wrong or config[key] != getattr(pretrained, key)
                 and key in ('n_kv_head', 'mlp_hidden')]
    longer = block_size > pretrained.block_size
    if wrong:  # every one at once: a fine-tune names the model's whole shape (and a context it exceeds)
        has = [f'{k}={getattr(pretrained, k)!r}' for k in wrong] + [f'a context of {pretrained.block_size}'] * longer
        says = [f'{k}={config[k]!r}' for k in wrong] + [f'block_size={block_size}'] * longer
        fixes = [f'--{k}={getattr(pretrained, k)!r}' for k in wrong] + [f'--block_size={pretrained.block_size}'] * longer
        fail(f"{init_from} has {', '.join(has)} but the config says {', '.join(says)}: set {' '.join(fixes)} (the "
             f"config's shape must be the model's)"
             + (f", or start from a config written for {pretrained.arch} models, such as "
                f"{FINETUNE_CONFIGS[pretrained.arch]}"
                if 'arch' in wrong and pretrained.arch in FINETUNE_CONFIGS else ""))
    if longer:
        fail(f"block_size={block_size} exceeds {init_from}'s context of {pretrained.block_size}: lower it to "
             f"--block_size={pretrained.block_size} or less")
    try:  # a setting of the HF model that this repository's blocks do not have
        drop = json.load(open(os.path.join(init_from, 'config.json'))).get('attention_dropout') or 0
    except (OSError, ValueError, AttributeError):
        drop = 0
    if drop and rank == 0:
        print(f"note: {init_from} sets attention_dropout={drop}, which this fine-tune does not read: its dropout is "
              f"--dropout={dropout} (HF GPT-2's placement, attention included)")


if memory_plan:  # the plan needs the config alone: no data, no device, nothing allocated or written
    if init_from not in ('scratch', 'resume') and os.path.isdir(init_from):  # the plan of the run it would refuse: none
        try:
            model_shape(pretrained_config(init_from))
        except (OSError, ValueError) as e:
            fail(str(e))
    if init_from == 'resume' and run_config(dict(init_from=init_from, out_dir=out_dir, memory_plan=True)) is None:
        fail(f"cannot plan a resume: no readable checkpoint at {os.path.join(out_dir, 'ckpt.pt')}; pass the run's "
             f"--out_dir, or plan a new run without --init_from=resume")
    if rank == 0:
        print(describe_memory(config, world_size if fsdp else 1, ranks=world_size))  # device '': a GPU's plan
    raise SystemExit(0)
if not device:
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    if device == 'cpu' and rank == 0:
        print("no CUDA device here: training on the CPU in float32 (config/tinystories_cpu.py is a run sized for "
              "a CPU)")
elif dtype == 'bfloat16' and 'dtype' in flagged and device == 'cpu' and rank == 0:
    print("note: --dtype=bfloat16 autocasts on CUDA only, so on the CPU the run trains in float32")
ram = memory.device_bytes('cpu')
if 8 * eval_iters * batch_size > ram / 2:  # estimate_loss's window index, in host memory
    fail(f"eval_iters={eval_iters} x batch_size={batch_size} windows would not fit in this machine's "
         f"memory as one evaluation index: lower eval_iters")
if wandb_log and rank == 0:
    try:
        import wandb
    except ImportError:
        fail("wandb_log needs the wandb package: `pip install wandb`, or drop --wandb_log")
    wandb_mode = os.environ.get('WANDB_MODE', '').strip().lower()
    if wandb_mode == 'disabled' or os.environ.get('WANDB_DISABLED', '').strip().lower() in ('true', '1'):
        print("note: WANDB_MODE=disabled (or WANDB_DISABLED) is set, so --wandb_log logs nothing: unset it to log")
    elif wandb_mode not in ('offline', 'dryrun'):  # wandb.init waits minutes for a server it cannot reach
        wandb_host = urllib.parse.urlparse(os.environ.get('WANDB_BASE_URL') or wandb.Settings().base_url)
        try:
            socket.create_connection((wandb_host.hostname, wandb_host.port or 443), timeout=10).close()
        except (OSError, UnicodeError):
            fail(f"W&B's server ({wandb_host.hostname}) cannot be reached from here: set WANDB_MODE=offline to log "
                 f"into ./wandb (`wandb sync` uploads it later), or drop --wandb_log")
master = rank == 0
end_iter = stop_iter or max_iters
SCHEDULE = ('taper_start', 'taper_end', 'fakeln_start', 'fakeln_gap')  # a resume may not move them silently


def fakeln_steps(start, gap, layers):
    """{LayerNorm (and path): the step FakeLN removes it at} for a schedule (fakeln_start, fakeln_gap)."""
    names = ('ln_2', 'ln_1 (Q/K)', 'ln_1 (V)')
    return {**{f"h.{i}.{names[kind]}": start[kind] + i * gap[kind] for kind in range(3) for i in range(layers)},
            'ln_f': start[3]}
needs_start = taper != 'none' or aux_loss == 'fixed'  # c, gammatilde or s_tgt are set at taper_start
if fsdp and not ddp:
    fail("fsdp shards the model over ranks: launch with torchrun --nproc_per_node=N, or pass --fsdp=False to "
         "train in one process" + (" (a run checkpointed under FSDP resumes in either)" if init_from == 'resume' else ''))
if fsdp and eval_iters % world_size:
    fail(f"under FSDP every evaluation forward is collective: make eval_iters={eval_iters} a multiple "
         f"of the {world_size} ranks")
tokens_per_iter = world_batch * block_size
device_type = 'cuda' if device.startswith('cuda') else 'cpu'
ckpt_path = os.path.join(out_dir, 'ckpt.pt')
log_path = os.path.join(out_dir, 'log.jsonl')


def ours(path):
    """Whether out_dir's config.json is one train.py wrote (not, e.g., a save_pretrained folder's)."""
    try:
        with open(path, encoding='utf-8-sig') as f:  # a BOM from a Windows editor
            held = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(held, dict) and {'init_from', 'taper', 'out_dir'} <= held.keys()


if rank == 0 and not memory_plan:
    restore_replaced(out_dir)
    checked_state = folder_state()  # with the run it put back, if any
for name in ('ckpt.pt', 'config.json', 'log.jsonl', 'train_time.json'):  # the files a run writes, via name.tmp
    for path in (os.path.join(out_dir, name), os.path.join(out_dir, name + '.tmp')):
        if os.path.isdir(path) and not (memory_plan or eval_only):
            fail(f"{path} is a folder where the run writes its {name}{' first' if path.endswith('.tmp') else ''}: "
                 f"remove or rename it, or choose another out_dir")


def hand_edits(path, held):
    """{key: (value in config.json, the checkpoint's)} for each setting the run's config.json at path gives
    otherwise than its checkpoint's config held (an edit by hand, which a resume does not read)."""
    if not ours(path):
        return {}
    with open(path, encoding='utf-8-sig') as f:
        edited = json.load(f)
    held = json.loads(json.dumps(held))  # as JSON holds it: tuples are lists
    return {k: (edited[k], held[k]) for k in held
            if k in edited and edited[k] != held[k] and k not in PER_INVOCATION + ('out_dir',)}


def foreign_checkpoint(checkpoint, in_log):
    """Why out_dir's ckpt.pt, loaded as checkpoint, reads as another run's than the one this folder's config.json
    and log.jsonl record (None when it does not). in_log: log.jsonl holds the checkpoint's evaluation, or there is
    no log to ask. A link into another folder is another run's when config.json records another model, or the
    log lacks its evaluation; a copy, when both do (one alone is a hand edit, or a log of another run)."""
    models = {k: v for k, v in hand_edits(os.path.join(out_dir, 'config.json'), checkpoint['config']).items()
              if k in GPTConfig.__dataclass_fields__ and k not in RESUME_MAY_CHANGE}  # norm, taper, a shape
    differs = models and (f"{', '.join(f'{k}={then!r}' for k, (now, then) in models.items())}, where config.json "
                          f"here records {', '.join(f'{k}={now!r}' for k, (now, then) in models.items())}")
    unlogged = f"log.jsonl here lacks its evaluation at iter {checkpoint['iter_num']}" if not in_log else ''
    target = os.path.realpath(ckpt_path)
    if os.path.islink(ckpt_path) and os.path.dirname(target) != os.path.realpath(out_dir) and (models or unlogged):
        theirs = os.path.dirname(target)
        why = f"its model has {differs}" if differs else unlogged
        return (f"{ckpt_path} is a link to {target}, another run's checkpoint ({why}): put this run's own ckpt.pt "
                f"in the link's place" + (
                    f", or resume that run in its own folder with --out_dir={theirs}"
                    if ours(os.path.join(theirs, 'config.json')) else ""))
    if models and unlogged:
        where = checkpoint['config'].get('out_dir')
        return (f"{ckpt_path} is another run's checkpoint (its model has {differs}, and {unlogged}"
                + (f"; it was written in {where}" if isinstance(where, str) and where != out_dir else "")
                + "): put this run's own ckpt.pt back")
    return None


def unreadable_config(path):
    """Why a resume may not rewrite out_dir's config.json (None if it may): a hand edit left it invalid JSON,
    or it is not a run's config, and the keys a user added to it (kept by a resume) would be lost."""
    try:
        with open(path, encoding='utf-8-sig') as f:
            json.load(f)
    except json.JSONDecodeError as e:
        return f"{path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}; edited by hand?)"
    except UnicodeDecodeError:
        return f"{path} is not UTF-8 text (saved in another encoding?)"
    except OSError:  # absent: the resume writes it again from the checkpoint; a link to nothing is said
        return f"{path} is a broken symbolic link (to {os.readlink(path)})" if os.path.islink(path) else None
    return None if ours(path) else f"{path} is not a run's config (it lacks init_from, taper or out_dir)"


if init_from == 'resume' and not memory_plan and not eval_only and unreadable_config(os.path.join(out_dir, 'config.json')):
    fail(f"cannot resume: {unreadable_config(os.path.join(out_dir, 'config.json'))}, and the resume rewrites it from "
         f"the checkpoint, keeping any keys added to it: fix it, or move it aside (the resume then writes a new one)")
if init_from == 'resume' and not memory_plan and not eval_only:
    for name in ('ckpt.pt', 'log.jsonl', 'config.json', 'train_time.json'):  # written by renaming, never through a link
        link = os.path.join(out_dir, name)
        if os.path.islink(link) and not os.path.exists(link) and name == 'log.jsonl':
            fail(f"cannot resume: {link} is a broken symbolic link (to {os.readlink(link)}): point it at the run's "
                 f"log, or remove it to resume with a new log")
        if said := replaced_link(link, 'the resume'):
            note(said)
if init_from != 'resume' and not memory_plan:  # a plan writes nothing
    if any(os.path.isfile(os.path.join(out_dir, f)) for f in ('train.bin', 'meta.json')):
        fail(f"out_dir={out_dir} is a data folder (it holds train.bin or meta.json): write the run elsewhere, "
             f"e.g. --out_dir=out")
    if os.path.isdir(out_dir) and (folder_kind(out_dir) or '').startswith("a reproduction's"):
        fail(f"out_dir={out_dir} is {folder_kind(out_dir)}, and a run's files would lie among them: write the "
             f"run elsewhere, e.g. --out_dir=out")
    if os.path.isfile(os.path.join(out_dir, 'config.json')) and not ours(os.path.join(out_dir, 'config.json')):
        fail(f"{out_dir} holds a config.json that train.py did not write (a save_pretrained folder?), which a run "
             f"would replace: choose another out_dir")
    if not overwrite and os.path.isfile(ckpt_path):
        fail(f"{out_dir} already holds a run (ckpt.pt): continue it with --init_from=resume, "
             f"or pass --overwrite to start again over it")
    runs_in = sorted(e.name for e in os.scandir(out_dir) if e.is_dir(follow_symlinks=False) and any(
        os.path.isfile(os.path.join(e.path, f)) for f in ('ckpt.pt', 'meta.json', 'train.bin'))) \
        if os.path.isdir(out_dir) else []
    if runs_in and not os.path.isfile(ckpt_path):  # the folder of several runs, not a run's own
        fail(f"out_dir={out_dir} holds the folders of other runs or data ({', '.join(runs_in[:3])}), and a run's files "
             f"would lie among them: name a folder of this run's own, e.g. --out_dir={os.path.join(out_dir, 'new-run')}")
    left = [f for f in ('log.jsonl', 'ckpt_folded.pt', 'train_time.json') if os.path.isfile(os.path.join(out_dir, f))]
    if not overwrite and left:
        fail(f"{out_dir} holds {left[0]} of an earlier run that left no checkpoint: pass --overwrite to start "
             f"again over it, or choose another out_dir")
if not (memory_plan or eval_only) and folding():
    fail(folding())

# --- data: windows of one concatenated token stream, at random offsets or as shuffled blocks ----
prepare_cmd = prepare_command(data_dir, vocab_size)


def token_file(split):
    """The split's tokens, memory-mapped in the dtype meta.json names, after checking that the file
    can be a stream of them."""
    if os.path.isfile(data_dir):
        fail(f"data_dir={data_dir} is a file: name the folder that holds train.bin, val.bin and meta.json")
    if dead_link(data_dir, 'the folder that holds train.bin, val.bin and meta.json'):
        fail(f"data_dir={dead_link(data_dir, 'the folder that holds train.bin, val.bin and meta.json')}")
    try:
        return open_tokens(data_dir, split)
    except FileNotFoundError as e:
        held = RESUMED.get('config', {}).get('data_dir')  # a resume's data is the run's: never advise preparing new data
        if init_from == 'resume' and held is None and data_dir == TRAIN_FLAGS['data_dir'].default:
            fail(f"cannot resume: the checkpoint records no data_dir, and the default's {e}: pass "
                 f"--data_dir=<the folder the run was trained on>")
        if init_from == 'resume' and held == data_dir and not os.path.isabs(data_dir):
            fail(f"cannot resume: the run's data_dir={data_dir} is relative, and {e} from {os.getcwd()}: run from "
                 f"the folder the run was started in, or pass --data_dir=<the data folder's path>")
        if elsewhere_remedy(data_dir, 'data_dir'):  # a README command run from another folder
            fail(f"{'cannot resume: ' if init_from == 'resume' else ''}{e}: {elsewhere_remedy(data_dir, 'data_dir')}")
        if init_from == 'resume':
            fail(f"cannot resume: {e}: pass --data_dir=<the folder the run was trained on>"
                 + (f" (its checkpoint names {held})" if held and held != data_dir else ""))
        if inner_data(data_dir, split, vocab_size):  # data/ for data/tinystories512
            fail(f"{e}: {inner_data(data_dir, split, vocab_size)}")
        beside = [f for f in reversed(files) if not os.path.isabs(data_dir) and 'data_dir' not in flagged
                  and 'data_dir' in memory.assigned(f)
                  and os.path.isfile(os.path.join(os.path.dirname(f), data_dir, f'{split}.bin'))]
        if beside:  # a config file's relative data_dir, meant from the file's folder
            there = os.path.normpath(os.path.join(os.path.abspath(os.path.dirname(beside[0])), data_dir))
            fail(f"{e}: {beside[0]} sets data_dir={data_dir!r}, a path read from the folder you run in "
                 f"({os.getcwd()}), not from the config file's; the data it names from there is {there}: pass "
                 f"--data_dir={shlex.quote(there)}, or write that path in {beside[0]}")
        parent = os.path.dirname(os.path.normpath(data_dir))
        if all(os.path.isfile(os.path.join(parent, f)) for f in ('meta.json', f'{split}.bin')):  # its tokenizer/
            fail(f"{e}: {data_dir} lies inside the data folder {parent}, which holds the tokens: pass "
                 f"--data_dir={parent}")
        fail(f"{e}: prepare the data with `python {prepare_cmd}` (or set data_dir)")
    except ValueError as e:
        fail(f"{e}: {prepare_again(data_dir, e, vocab_size)}")


data = {split: token_file(split) for split in ('train', 'val')}
for split, tokens in data.items():
    if len(tokens) <= block_size:
        fail(f"{data_dir}/{split}.bin holds {len(tokens):,} tokens, too few for one window of "
             f"block_size={block_size} plus its target: lower block_size or prepare more data"
             + (" (a larger --val_fraction, or a --val_file, holds out more)" if split == 'val' else ""))
if rank == 0 and not memory_plan and len(data['train']) == len(data['val']) and all(  # a copy of train.bin
        np.array_equal(data['train'][i:i + 2**26], data['val'][i:i + 2**26]) for i in range(0, len(data['val']), 2**26)):
    print(f"note: {data_dir}/val.bin holds the same tokens as train.bin, so val_loss scores the training tokens, "
          f"not held-out ones (`python {prepare_cmd}` writes a held-out split)")
meta_path = os.path.join(data_dir, 'meta.json')
meta = read_meta(data_dir)  # token_file has already refused one that is not JSON


def check_tokens(vocab):
    """Every token id must index the embedding; ids from another tokenizer would silently train on
    the wrong rows (or crash on a GPU deep inside the embedding)."""
    if not isinstance(meta.get('vocab_size', vocab), int) or not isinstance(meta.get('eot_token', 0), int):
        fail(f"{meta_path} names vocab_size={meta.get('vocab_size')!r} and eot_token={meta.get('eot_token')!r}, "
             f"which must be whole numbers: {prepare_again(data_dir, meta_path, vocab_size)}")
    if meta.get('vocab_size', vocab) > vocab and init_from not in ('scratch', 'resume'):  # the model's is fixed
        fail(f"{data_dir} has a vocabulary of {meta['vocab_size']} tokens, but {init_from} has {vocab}: the data is "
             f"another tokenizer's; prepare it in the model's tokens with `python {script_path('prepare_owt.py')} "
             f"--tokenizer=<the model's tokenizer> --out_dir=<a new folder>`")
    if meta.get('vocab_size', vocab) > vocab:
        fail(f"{data_dir} has a vocabulary of {meta['vocab_size']} tokens but vocab_size={vocab}: "
             f"set --vocab_size={meta['vocab_size']}")
    if meta.get('vocab_size', vocab) < vocab and init_from == 'scratch' and master and not memory_plan:
        print(f"note: vocab_size={vocab} gives {vocab - meta['vocab_size']} more rows than {data_dir}'s "
              f"{meta['vocab_size']} tokens: they are never a target, and sample.py draws from the "
              f"tokenizer's {meta['vocab_size']} alone")
    for split, tokens in data.items():
        top = max(int(tokens[i:i + 2**26].max()) for i in range(0, len(tokens), 2**26))
        if top >= vocab:
            fail(f"{data_dir}/{split}.bin holds token id {top}, beyond the model's vocab_size={vocab}: set "
                 f"--vocab_size={top + 1} or more if the data is right (its meta.json names no vocab_size), or "
                 f"prepare it again if another tokenizer made it" if 'vocab_size' not in meta and init_from == 'scratch'
                 else f"{data_dir}/{split}.bin holds token id {top}, beyond the model's vocab_size={vocab}: "
                 f"the file was made with another tokenizer, so prepare it again")


try:
    tokenizer = data_tokenizer(data_dir, meta, arch)  # up front: a data folder without its tokenizer stops here
except (OSError, KeyError, ValueError) as e:
    fail(f"{data_dir} lacks its tokenizer ({e}): prepare the data again with `python {prepare_cmd}`"
         if isinstance(e, (OSError, KeyError)) else f"{data_dir}'s tokenizer is not the one meta.json describes "
         f"({e}), and its tokens cannot be read without it: remove {data_dir}, then prepare it again with "
         f"`python {prepare_cmd}`")
if tokenizer is None and master and not memory_plan:
    print(f"note: {data_dir} has no meta.json naming its tokenizer, so the checkpoints will name none and "
          f"sample.py will not decode them (the prepare scripts write one)")
if tokenizer is not None and meta and 'vocab_size' not in meta:  # a hand-edited meta.json: its tokenizer knows
    meta['vocab_size'] = tokenizer_size(tokenizer)
    if master and not memory_plan:
        print(f"note: {meta_path} names no vocab_size (the prepare scripts write one), so the data is checked "
              f"against its tokenizer's {meta['vocab_size']} ids")
if init_from not in ('scratch', 'resume'):  # an HF model reads the tokens of its own tokenizer only
    try:
        theirs = tokenizer_reference(init_from)
    except TokenizerMismatch as e:
        fail(f"cannot fine-tune: {e}")
    except (OSError, ValueError):
        theirs = None  # a folder without tokenizer files (or no network): the vocabulary checks below still hold
    if tokenizer is not None and not same_tokenizer(theirs, tokenizer):  # theirs None: the model load says why
        fail(f"{data_dir} holds tokens of another tokenizer than {init_from}'s: prepare the data in the model's "
             f"tokens (`python {script_path('prepare_owt.py')}` for GPT-2, `--tokenizer={init_from}` for another model)")
if mask_eot_targets and 'eot_token' not in meta:  # after the tokenizer: data in another one's tokens says so first
    if meta.get('tokenizer', 'sentencepiece') == 'sentencepiece':  # TinyStories: stories start with BOS, no separator
        fail(f"mask_eot_targets leaves out the end-of-text token that prepare_owt.py puts after each document, and "
             f"{data_dir} is prepare_tinystories.py's data, which has none (each story starts with BOS): drop "
             f"--mask_eot_targets")
    fail(f"mask_eot_targets needs the end-of-text id from {meta_path}, which names none: prepare the data with "
         f"prepare_owt.py (which records it), or drop --mask_eot_targets")


def windows(split, ix):
    """Inputs and targets of windows ix (block numbers in the 'blocks' layout). A block predicts its
    own tokens 2..T, as HF's shifted loss does: its last target is -1, ignored by the loss."""
    tokens = data[split]
    starts = [int(i) * block_size for i in ix] if data_layout == 'blocks' else [int(i) for i in ix]
    x = torch.stack([torch.from_numpy(tokens[i:i + block_size].astype(np.int64)) for i in starts])
    if data_layout == 'blocks':
        y = torch.cat([x[:, 1:], torch.full((len(starts), 1), -1)], dim=1)
    else:
        y = torch.stack([torch.from_numpy(tokens[i + 1:i + 1 + block_size].astype(np.int64)) for i in starts])
    if mask_eot_targets:
        y[y == meta['eot_token']] = -1
    if device_type == 'cuda':
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x, y


def num_windows(split):
    n = len(data[split])
    return n // block_size if data_layout == 'blocks' else n - block_size


@functools.lru_cache(maxsize=1)
def block_order(epoch):
    """The 'blocks' layout visits every training block once per epoch, in an order fixed by seed and
    epoch alone, so a resumed run recomputes it."""
    return torch.randperm(num_windows('train'), generator=torch.Generator().manual_seed(seed + epoch))


# Every rank draws the same global batch from the same generator and keeps its own slice.
sampler = torch.Generator().manual_seed(seed)
sampler_state = sampler.get_state()  # before the pending step's draw: where a resume starts reading


def get_step_batches(it):
    """The micro-batches of step it for this rank."""
    global sampler_state
    sampler_state = sampler.get_state()
    n = world_batch
    if data_layout == 'blocks':  # the step's n blocks continue the epoch-by-epoch order
        k = torch.arange(it * n, (it + 1) * n).tolist()
        blocks = num_windows('train')
        ix = torch.stack([block_order(i // blocks)[i % blocks] for i in k])
    else:
        ix = torch.randint(num_windows('train'), (n,), generator=sampler)
    mine = ix.view(world_size, accum_steps, micro_batch)[rank]
    return [windows('train', micro) for micro in mine]


# --- schedules ----------------------------------------------------------------------------------
def get_lr(it, run=None):
    """nanoGPT's linear warmup then cosine decay to min_lr; run: another config's schedule (a checkpoint's)."""
    c = globals() if run is None else run
    lr, warmup, decay, floor = (c[k] for k in ('learning_rate', 'warmup_iters', 'lr_decay_iters', 'min_lr'))
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return floor
    ratio = (it - warmup) / (decay - warmup)
    return floor + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - floor)


def get_gate(it):
    """g(k) = 1 before taper_start, a half cosine to 0 at taper_end, 0 after (Sec. 3.3)."""
    if it < taper_start:
        return 1.0
    if it >= taper_end:
        return 0.0
    return 0.5 * (1.0 + math.cos(math.pi * (it - taper_start) / (taper_end - taper_start)))


# --- model, optimizer, resume ---------------------------------------------------------------------
if init_from not in ('scratch', 'resume'):  # the HF model's own shape against the config's, from its config.json
    if (taper != 'none' or fakeln) and is_export(init_from):
        source = export_source(init_from)
        try:  # a config of the other family (GPT-2's FakeLN config on a Llama export) is named, with its own
            family = pretrained_config(init_from).arch
        except (OSError, ValueError, KeyError):
            family = arch
        fail(f"{init_from} is fold.py's norm-free export: its norms are identities already, so there is nothing "
             f"to {'taper' if taper != 'none' else 'replace with FakeLN'}: fine-tune it with "
             + (f"a config written for {family} models, such as {FINETUNE_CONFIGS[family]}, and --taper=none"
                if family != arch and family in FINETUNE_CONFIGS else
                f"--taper=none{' --fakeln=False' if fakeln else ''}")
             + ", or go on from the run it was exported from" + (f" ({source})" if source else ""))
    try:  # alone: before the plan (of the config's shape) and before the run's settings are applied to it
        model_shape(pretrained_config(init_from))
    except (OSError, ValueError, KeyError) as e:
        fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))  # a KeyError's str() is quoted
need = memory.plan(dict(config, device=device), world_size if fsdp else 1, ranks=world_size)['total']  # before allocating
have = memory.device_bytes(device)
if device_type == 'cuda' and rank == 0:
    print(f"memory plan: {need / 1e9:.1f} GB of {device}'s {have / 1e9:.1f} GB (--memory_plan itemizes it)")
if need > have:
    fail(f"this run's memory plan needs {need / 1e9:.1f} GB but {device} has {have / 1e9:.1f} GB: lower "
         f"batch_size (raising gradient_accumulation_steps), block_size or the model's size, or set "
         f"grad_checkpoint (`python {script_path('memory.py')}` with the same arguments shows the plan)")
if ddp:
    dist.init_process_group(backend='nccl' if device_type == 'cuda' else 'gloo')
    if device_type == 'cuda':
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
use_bf16 = device_type == 'cuda' and dtype == 'bfloat16'
ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16) if use_bf16 else nullcontext()
if device_type == 'cuda':
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
torch.manual_seed(seed)
model_args = dict(arch=arch, block_size=block_size, vocab_size=vocab_size, n_layer=n_layer,
                  n_head=n_head, n_embd=n_embd, n_kv_head=n_kv_head, mlp_hidden=mlp_hidden,
                  tied_head=tied_head, norm=norm, taper=taper, aux_loss=aux_loss,
                  aux_weight=aux_weight, ema_rate=ema_rate, dropout=dropout, fakeln=fakeln,
                  fakeln_momentum=fakeln_momentum, fakeln_sigma=fakeln_sigma)
iter_num = 0
checkpoint = None
last_saved = None  # the iteration of the checkpoint on disk that this run may fall back to
if init_from == 'scratch':  # its settings were checked up front; the end-of-text id, Baroni's loss leaves out, is the data's
    model = GPT(GPTConfig(**model_args, eot_token=meta['eot_token'] if isinstance(meta.get('eot_token'), int) else -1))
elif init_from == 'resume':
    try:
        checkpoint = load_checkpoint(ckpt_path, device)
        if 'folded_from' in checkpoint:
            raise ValueError(f"{ckpt_path} is a folded checkpoint (fold.py's), which has no optimizer state to "
                             f"resume: resume the run's own ckpt.pt")
        lacking = [k for k in ('config', 'optimizer', 'iter_num', 'sampler', 'rng') if checkpoint.get(k) is None]
        if lacking:
            raise ValueError(f"{ckpt_path} is not a whole training checkpoint (it has no {lacking[0]}: a file edited, "
                             f"or written by another tool): resume another copy of the run's checkpoint")
        if not (isinstance(checkpoint['iter_num'], int) and checkpoint['iter_num'] >= 0
                and isinstance(checkpoint['config'], dict)):
            raise ValueError(f"{ckpt_path} holds iter_num={checkpoint['iter_num']!r}, not a step number")
        # The model's context is its own (a fine-tune keeps its HF context); it must only hold the windows.
        # aux_weight (lambda) weights a loss, not a tensor of the model: a resume may change it, as it may the
        # learning rate, and says so below.
        # FakeLN's settings mean nothing to a run without it: changed, they are only noted (above).
        model = GPT.from_checkpoint(checkpoint, device, **{k: v for k, v in model_args.items()
                                                           if k not in RESUME_MAY_CHANGE})
        model.config.aux_weight = aux_weight
    except (FileNotFoundError, ValueError) as e:
        fail(f"cannot resume: {e}")
    cast = sorted({str(v.dtype).removeprefix('torch.') for v in checkpoint['model'].values()
                   if torch.is_tensor(v) and v.is_floating_point() and v.dtype != torch.float32})
    if cast and master:  # train.py keeps float32 weights (bf16 only autocasts): a copy cast by hand
        print(f"note: {ckpt_path} holds weights in {', '.join(cast)}, not the float32 train.py writes (cast by "
              f"hand?): the run goes on from them, rounded, in float32, so not bit for bit as it was")
    if block_size > model.config.block_size:
        fail(f"cannot resume: block_size={block_size} exceeds the checkpoint's context of {model.config.block_size}")
    if not same_tokenizer(checkpoint.get('tokenizer'), tokenizer):
        fail(f"cannot resume: {other_tokens(data_dir, checkpoint, f'the run in {out_dir}')}")
    mark = checkpoint.get('eval_row')  # the evaluation it was saved after; None in older checkpoints
    in_log = not (master and mark is not None and os.path.isfile(log_path)) or logged(json.loads(mark), log_path)
    if master and (why := foreign_checkpoint(checkpoint, in_log)):  # checked before the log is blamed
        fail(f"cannot resume: {why}")
    if not in_log:
        edited = changed_row(json.loads(mark), log_path)
        fail(f"cannot resume: {log_path} is not the whole log of {ckpt_path}: the checkpoint's evaluation at iter "
             f"{json.loads(mark)['iter']} is not among its rows " + (
                 f"(its row of iter {json.loads(mark)['iter']} gives {edited}: edited by hand, or another run's?)"
                 if edited else "(a log or checkpoint of another run, or a log that lost its last rows)")
             + ": put the run's own whole log.jsonl back, or move it aside to resume with a new log")
    grown = [(split, n, len(data[split])) for split, n in (checkpoint.get('data') or {}).items()
             if split in data and n != len(data[split])]
    if grown:
        split, then, now = grown[0]
        fail(f"cannot resume: {data_dir}/{split}.bin holds {now:,} tokens, but the run in {out_dir} was drawn from "
             f"{then:,}: the data changed since the run began, and with it every batch to come; resume on the data "
             f"the run began with, or start a new run on this data")
    iter_num = last_saved = checkpoint['iter_num']
    changed = {k: (v, config[k]) for k, v in checkpoint['config'].items()
               if k in config and v != config[k] and k not in PER_INVOCATION}

    def said(k):
        """'k old -> new', naming the config file that set new when no flag did."""
        by_file = f" (set by {', '.join(files)}, which a resume does not need)" if files and k not in flagged else ''
        return f"{k} {changed[k][0]!r} -> {changed[k][1]!r}{by_file}"
    fixed = [k for k in ('seed', 'data_layout', 'mask_eot_targets') if k in changed]
    if fixed:
        k = fixed[0]
        fail(f"cannot resume: {said(k)} would change the data (or weights) the run "
             f"in progress was drawn from: a resume keeps the run's {k}; start a new run for another one")
    then = checkpoint['config']
    then_batch = then.get('batch_size', batch_size) * then.get('gradient_accumulation_steps', gradient_accumulation_steps)
    if data_layout == 'blocks' and ('block_size' in changed or then_batch != world_batch):
        moved = said('block_size') if 'block_size' in changed else \
            f"the global batch {then_batch} -> {world_batch} sequences (batch_size x gradient_accumulation_steps)"
        fail(f"cannot resume: {moved} in data_layout='blocks', whose epoch order counts the run's "
             f"{then.get('block_size', block_size)}-token blocks, {then_batch} a step, would skip some blocks of "
             f"the epoch under way and read others twice: keep them, or start a new run")
    if 'taper_start' in changed and needs_start and (model.started or config['taper_start'] < iter_num):
        fail(f"cannot resume: {said('taper_start')} at iter "
             f"{iter_num}: " + ("the taper has started, and c, gammatilde and s_tgt are calibrated" if model.started
                                else "the new start lies before the checkpoint") + "; a reschedule may move "
             "taper_end, or a taper_start still ahead of the run")
    if ('taper_end' in changed and taper != 'none' and changed['taper_end'][0] <= iter_num < config['taper_end']):
        fail(f"cannot resume: {said('taper_end')} at iter {iter_num}, "
             f"after the taper ended, would bring the gate back up from 0 to {get_gate(iter_num):.2f}: keep "
             f"taper_end={changed['taper_end'][0]}, or start a new run for another schedule")
    if 'taper_end' in changed and taper != 'none' and max(changed['taper_end'][0], config['taper_end']) <= iter_num:
        fail(f"cannot resume: {said('taper_end')} at iter {iter_num} changes nothing: the taper ended at iter "
             f"{changed['taper_end'][0]}, and the gate stays 0 from here under either, so the run's record would "
             f"only name a schedule it never had: drop --taper_end")
    if ('taper_end' in changed and taper != 'none' and changed['taper_end'][0] > iter_num >= config['taper_end']):
        fail(f"cannot resume: {said('taper_end')} at iter {iter_num}, "
             f"mid-taper, would drop the gate to 0 at once: choose a taper_end after iter {iter_num}")
    if fakeln and ('fakeln_start' in changed or 'fakeln_gap' in changed):
        layers = model.config.n_layer
        then = fakeln_steps(checkpoint['config']['fakeln_start'], checkpoint['config']['fakeln_gap'], layers)
        now = fakeln_steps(fakeln_start, fakeln_gap, layers)
        past = [name for name in then if then[name] != now[name] and min(then[name], now[name]) <= iter_num]
        if past:  # removed (at iter_num too: before its checkpoint) stays removed; one ahead cannot move behind
            name = past[0]
            fail(f"cannot resume: {said('fakeln_start' if 'fakeln_start' in changed else 'fakeln_gap')} moves the "
                 f"removal of {name} from step {then[name]} to {now[name]}, and the run is at iter {iter_num}: a "
                 f"removal that has happened stays where it was, and one ahead of the run moves only to a step after "
                 f"{iter_num}; keep the steps up to iter {iter_num}, or start a new run for another schedule")
    if fakeln and list(fakeln_start) != sorted(fakeln_start):
        fail(f"cannot resume: {unordered_removals()}")
    moved = [k for k in SCHEDULE if k in changed and (fakeln if k.startswith('fakeln') else needs_start)]
    written = os.path.join(out_dir, 'config.json')
    edits = hand_edits(written, checkpoint['config'])
    if reschedule and not moved:  # the flag that accepts a new schedule, given none: the one meant was not read
        what = 'the FakeLN steps' if fakeln else 'taper_start or taper_end'
        # given, for a schedule the run lacks (taper_end in a Baseline)
        idle = [k for k in SCHEDULE if k in flagged and not (fakeln if k.startswith('fakeln') else needs_start)]
        by_hand = [k for k in edits if k in SCHEDULE] or [k for k in edits if k not in flagged]
        if idle:
            fail(f"--reschedule changes nothing: the run in progress has no schedule for {', '.join(idle)} to move "
                 f"(taper={taper!r}, aux_loss={aux_loss!r}, fakeln={fakeln}), so --{idle[0]} has no effect in it: drop "
                 f"--reschedule and {' '.join(f'--{k}' for k in idle)}")
        fail(f"--reschedule changes nothing: no flag moves {what} of the run in progress at iter {iter_num}"
             + (f" (config.json's {', '.join(f'{k}={edits[k][0]!r}' for k in by_hand)} is not read: a resume takes the "
                f"checkpoint's config): pass {' '.join(f'--{k}={edits[k][0]}' for k in by_hand)}"
                + (" --reschedule" if by_hand[0] in SCHEDULE else f" without --reschedule, which only {what} need")
                if by_hand else f": pass the new {what} with it, or drop it"))
    if moved and not reschedule:
        fail(f"cannot resume: {', '.join(said(k) for k in moved)} changes "
             f"the schedule of the run in progress at iter {iter_num}; keep the checkpoint's values, or pass "
             f"--reschedule to follow the new schedule from iter {iter_num} on")
    if not eval_only and iter_num >= end_iter:
        fail(nothing_to_train(iter_num, 'stop_iter' if stop_iter else 'max_iters', end_iter))
    if not eval_only and all(get_lr(it) == 0 for it in range(iter_num, end_iter)):
        fail(f"every step from iter {iter_num} to {end_iter} would run at learning rate 0 (min_lr={min_lr} past "
             f"lr_decay_iters={lr_decay_iters}), so nothing would train: raise --lr_decay_iters to {end_iter} (the "
             f"cosine is then taken over the longer schedule), or set --min_lr above 0")
    if master and edits:  # an edit of config.json changes nothing: a resume reads the checkpoint's
        gives = ', '.join(f"{k}={now!r} (the checkpoint {then!r})" for k, (now, then) in edits.items())
        print(f"note: {written} gives {gives}: a resume takes the checkpoint's config (config.json is its copy, "
              f"rewritten from it); change a setting with its flag")
    if master and changed:  # allowed (e.g. a lower learning rate after a spike), but never silently
        print("resuming with changed settings: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items()))
        held = checkpoint['config']  # an evaluation takes eval_iters batches of batch_size windows of block_size
        was_seen = held.get('eval_iters', eval_iters) * held.get('batch_size', batch_size)
        if was_seen != eval_iters * batch_size and not eval_only:  # the step's batch is kept; an evaluation's is not
            print(f"note: each evaluation averages eval_iters={eval_iters} batches of batch_size={batch_size}, so "
                  f"val_loss from here on is taken over {eval_iters * batch_size} sequences, not the run's {was_seen}"
                  + (f": --eval_iters={was_seen // batch_size} keeps that" if was_seen % batch_size == 0 else ""))
        if 'block_size' in changed and not eval_only:
            print(f"note: val_loss from here on is taken over windows of block_size={block_size} tokens, not the "
                  f"run's {changed['block_size'][0]}, so it does not compare with the log's earlier rows")
        was, now = get_lr(iter_num, checkpoint['config']), get_lr(iter_num)
        if was != now:  # e.g. a finished run extended: its learning rate climbs back up the new cosine
            print(f"note: the learning rate at iter {iter_num} goes from {was:.3g} (the checkpoint's schedule) to "
                  f"{now:.3g}")
else:
    settings = dict(taper=taper, aux_loss=aux_loss, aux_weight=aux_weight, ema_rate=ema_rate, dropout=dropout,
                    fakeln=fakeln, fakeln_momentum=fakeln_momentum, fakeln_sigma=fakeln_sigma)
    try:
        model_shape(pretrained_config(init_from, **settings))  # config.json alone: refusals come before the weights
        model = from_pretrained(init_from, **settings)
    except (OSError, ValueError, KeyError) as e:
        fail(str(e.args[0]) if isinstance(e, KeyError) else str(e))  # a KeyError's str() is quoted
check_tokens(model.config.vocab_size)
run_id = (checkpoint or {}).get('run_id') or uuid.uuid4().hex  # kept by resumes, copies and folds
# FakeLN, Baroni et al.'s protocol: (removal step, layer, path, name) for every LayerNorm, in their
# order; ln_1 is removed on its Q/K path (0) and its V path (1) apart.
removals = []
if fakeln:
    at = fakeln_steps(fakeln_start, fakeln_gap, len(model.transformer.h))
    for kind in range(3):
        for i, block in enumerate(model.transformer.h):
            norm_i, path, name = [(block.ln_2, 0, 'ln_2'), (block.ln_1, 0, 'ln_1 (Q/K)'),
                                  (block.ln_1, 1, 'ln_1 (V)')][kind]
            removals.append((at[f"h.{i}.{name}"], norm_i, path, f"h.{i}.{name}"))
    removals.append((at['ln_f'], model.transformer.ln_f, 0, 'ln_f'))
    steps = [step for step, *_ in removals]
    if not eval_only and not (0 <= min(steps) and max(steps) < max_iters):
        fail(f"the FakeLN removals run from step {min(steps)} to {max(steps)}, which must lie "
             f"inside the run's max_iters={max_iters}: move fakeln_start or raise max_iters")
model.to(device)
raw_model = model
raw_model.grad_checkpoint = grad_checkpoint
if fsdp:  # FSDP2: each block is one shard unit, the root holds the embeddings, ln_f and head
    for block in raw_model.transformer.h:
        fully_shard(block)
    fully_shard(raw_model)
optimizer = raw_model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type,
                                           decay_fakeln_weight)
full_state = StateDictOptions(full_state_dict=True, cpu_offload=True) if fsdp else None


def load_optimizer_state(state):
    """AdamW's state, keyed by parameter name, so any mode resumes any other. Each parameter keeps its
    moments, and the groups are this run's: which parameters decay and the hyper-parameters
    (weight_decay, betas) follow the config, which a resume may change (decay_fakeln_weight moves
    FakeLN's gamma between the groups; the learning rate is set every step). A parameter that had
    no gradient yet has no state in the checkpoint (gammatilde before taper start): torch's loader
    first gives every parameter a zero-step state, which is dropped again so that its first step is
    AdamW's first step, as in the run that was not interrupted."""
    names = {p: name for name, p in raw_model.named_parameters()}
    groups = [{k: v for k, v in group.items() if k != 'params'} | {'params': [names[p] for p in group['params']]}
              for group in optimizer.param_groups]
    set_optimizer_state_dict(raw_model, optimizer, {'state': state['state'], 'param_groups': groups},
                             options=StateDictOptions(full_state_dict=fsdp, strict=False))
    saved = set(state['state'])
    for name, p in raw_model.named_parameters():
        if name not in saved:
            optimizer.state.pop(p, None)


def read_log_rows(path, before):
    """The log's rows up to the checkpoint: a crash may leave rows past it, and a kill mid-write a
    torn last line, which is dropped with a warning."""
    lines = open(path, encoding='utf-8-sig').read().splitlines()  # a BOM from a Windows editor
    rows, last = [], {}
    for n, line in enumerate(lines, 1):
        if not line.strip():  # a blank line an editor left
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines) and line.lstrip().startswith('{'):  # a row cut short
                print(f"warning: dropped the torn last line of {path} (a run killed while writing it)")
                break
            fail(f"{path}, line {n}, is not JSON ({line.strip()[:30]!r}; the log holds JSON rows only): move that "
                 f"line out, or repair it, then resume again")
        step = row.get('iter') if isinstance(row, dict) else None  # 8.0 from a tool that wrote every number as a float
        if not (isinstance(step, int) and not isinstance(step, bool) or isinstance(step, float) and step.is_integer()):
            fail(f"{path}, line {n}, has no 'iter' step number: repair or remove that line, then resume again")
        if row['iter'] < before:
            kind = 'train' if 'lr' in row else 'eval' if 'val_loss' in row else None  # each kind's steps rise
            if kind and row['iter'] <= last.get(kind, -1):
                fail(f"{path}, line {n}, {'repeats' if row['iter'] == last[kind] else 'goes back to'} iter "
                     f"{row['iter']} after iter {last[kind]}: the rows are out of order (a log appended to itself, or "
                     f"sorted by hand?): keep the run's own rows, in the order train.py wrote them, then resume again")
            if kind:
                last[kind] = row['iter']
            rows.append(line + '\n')
    return rows


if checkpoint is not None:
    try:
        load_optimizer_state(checkpoint['optimizer'])
    except (KeyError, ValueError, RuntimeError, TypeError, AttributeError) as e:
        fail(f"cannot resume: the optimizer state in {ckpt_path} does not fit this model "
             f"({(str(e).splitlines() or [type(e).__name__])[0]})")
    try:
        sampler.set_state(checkpoint['sampler'])
        torch.set_rng_state(checkpoint['rng']['torch'])
        if device_type == 'cuda' and checkpoint['rng'].get('cuda') is not None:
            torch.cuda.set_rng_state(checkpoint['rng']['cuda'])
    except (KeyError, TypeError, RuntimeError, AttributeError) as e:
        fail(f"cannot resume: {ckpt_path} holds a damaged random-number state ({type(e).__name__}): resume an "
             f"earlier checkpoint of the run")
    checkpoint = None  # free it
log_rows = (read_log_rows(log_path, iter_num)
            if master and init_from == 'resume' and os.path.isfile(log_path) else [])
if master and init_from == 'resume' and not eval_only and not os.path.isfile(log_path):
    print(f"note: {out_dir} has no log.jsonl, so its log restarts at iter {iter_num}: the curves of plot.py "
          f"will start there")

# --- out_dir: nothing in it changes until the run has taken its first healthy step ---------------
# Then open_run() writes config.json and the log, and --overwrite moves the old run's files aside.
# Each checkpoint commits what the run wrote up to it; a run that fails rolls out_dir back to its last
# commit, so a refused or failed run leaves out_dir as it found it, and a failure mid-run leaves the
# last good checkpoint with the log that matches it.
replaced_dir = os.path.join(out_dir, '.replaced')  # the old run's files, until the new run's first checkpoint
created_dir = not os.path.isdir(out_dir)
original = {}      # file -> its bytes before this run (None: it did not exist); empty until open_run()
committed = None   # the log's length at the last checkpoint this run wrote


def read_bytes(path):
    if not os.path.isfile(path):
        return None
    with open(path, 'rb') as f:
        return f.read()


def write_bytes(path, data):
    with open(path + '.tmp', 'wb') as f:
        f.write(data)
    os.replace(path + '.tmp', path)


def cannot_write(path, error):
    """Stop on a write that failed (the roll-back then restores out_dir), with its half-written .tmp gone."""
    path = str(path).removesuffix('.tmp')
    if not os.path.isdir(out_dir):  # removed or renamed under the running run
        fail(f"{out_dir} is gone: it was removed or renamed while the run trained, so the run stops (if it was "
             f"moved, --init_from=resume --out_dir=<its new place> continues it from its last checkpoint)")
    for f in (path + '.tmp', ckpt_path + '.tmp', log_path + '.tmp'):
        try:
            if os.path.isfile(f):
                os.remove(f)
        except OSError:  # an append-only folder (chattr +a) keeps it
            pass
    kept = f"; {out_dir} is as of its last checkpoint (iter {last_saved})" if last_saved is not None else \
        f"; {out_dir} is as it was"
    reason = write_failure(error, path)
    todo = write_remedy(reason) or ("remove or rename that folder" if os.path.isdir(path) else
                                    "clear the append-only or immutable attribute of the file or its folder "
                                    "(lsattr shows it; chattr -a -i)" if getattr(error, 'errno', None) == errno.EPERM
                                    or 'Operation not permitted' in str(error) else
                                    f"make {os.path.basename(path)} writable" if os.path.exists(path)
                                    and not os.access(path, os.W_OK) else "make the folder writable")
    fail(f"cannot write {path} ({reason}){kept}: {todo} (or choose another --out_dir), then run again")


def open_run():
    """The first write to out_dir: config.json, the log continued from the checkpoint (a crash may
    have left rows past it), and, with --overwrite, the old run's files moved aside."""
    try:
        write_run()
    except OSError as e:
        cannot_write(e.filename or out_dir, e)


def write_run():
    os.makedirs(out_dir, exist_ok=True)
    hold_out_dir()  # held from the first write on
    if folding():
        fail(folding())
    now = folder_state()
    if now != checked_state:  # another program wrote the run's files since, and has ended
        changed = sorted(f for f in {*now, *checked_state} if now.get(f) != checked_state.get(f))
        fail(f"{', '.join(changed)} in {out_dir} changed after this run's checks (another train.py, a job submitted "
             f"twice? or a fold.py that has ended), so this run stops before writing: look at what the folder holds "
             f"now, then run this again")
    for name in ('log.jsonl', 'config.json'):
        original[name] = read_bytes(os.path.join(out_dir, name))
    if overwrite and init_from != 'resume':
        held = [f for f in RUN_FILES if os.path.isfile(os.path.join(out_dir, f))]
        if held:
            os.makedirs(replaced_dir, exist_ok=True)
            for f in held:
                os.replace(os.path.join(out_dir, f), os.path.join(replaced_dir, f))
    if os.path.isfile(ckpt_path + '.tmp'):  # a save killed mid-write; the checkpoint itself is whole
        os.remove(ckpt_path + '.tmp')
    write_bytes(log_path, ''.join(log_rows).encode())
    written = os.path.join(out_dir, 'config.json')
    added = {}  # a resume keeps what the user added to config.json (a "notes" key): train.py reads none of it
    if init_from == 'resume' and ours(written):
        with open(written, encoding='utf-8-sig') as f:
            added = {k: v for k, v in json.load(f).items() if k not in config and k not in TRAIN_FLAGS}
    write_bytes(written, json.dumps({**recorded(), **added}, indent=1).encode())  # read by plot.py


def commit():
    """A checkpoint is on disk: what the run wrote up to it is kept, whatever happens next."""
    global committed
    committed = os.path.getsize(log_path)
    original['config.json'] = read_bytes(os.path.join(out_dir, 'config.json'))
    if os.path.isdir(replaced_dir):
        for f in os.listdir(replaced_dir):
            os.remove(os.path.join(replaced_dir, f))
        os.rmdir(replaced_dir)


# The signals that stop a run (configurator.SIGNALS, and Ctrl-C), each with the words that say why.
STOPS = {signal.SIGINT: "interrupted", **{s: f"stopped: {why}" for s, why in configurator.SIGNALS.items()}}


def put_back(path, data):
    """path's bytes as they were: written aside and renamed, or, where the disk has no room for a copy (the
    failure that stops the run may be a full disk), over the file in place, which needs no new space when
    the file is as long as before or longer."""
    try:
        write_bytes(path, data)
    except OSError:
        discard(path + '.tmp')
        with open(path, 'r+b') as f:
            f.write(data)
            f.truncate(len(data))


def roll_back():
    """A run that fails: out_dir as it was at the last commit (before the run, if it made none), with no
    .tmp file of its own left (a save stopped mid-write); a file it cannot put back is said."""
    if not original or not os.path.isdir(out_dir):  # nothing written yet, or the folder is gone
        return
    for f in (ckpt_path + '.tmp', log_path + '.tmp', os.path.join(out_dir, 'config.json.tmp')):
        discard(f)
    if committed is not None and os.path.isfile(log_path) and os.path.getsize(log_path) > committed:
        with open(log_path, 'r+b') as f:
            f.truncate(committed)
    unrestored = []
    for name, data in original.items():
        path = os.path.join(out_dir, name)
        if name == 'log.jsonl' and committed is not None:
            continue
        try:
            if data is None:
                if os.path.isfile(path):
                    os.remove(path)
            elif read_bytes(path) != data:
                put_back(path, data)
        except OSError as e:
            if read_bytes(path) != data:  # else a file that may not be written was not changed either
                unrestored.append(f"{name} ({write_failure(e, path)})")
    if unrestored and rank == 0:
        print(f"note: {' and '.join(unrestored)} could not be put back as before this run, and holds what this "
              f"run wrote: --init_from=resume goes on from the checkpoint, not from it", file=sys.stderr)
    if os.path.isdir(replaced_dir):
        for f in os.listdir(replaced_dir):
            os.replace(os.path.join(replaced_dir, f), os.path.join(out_dir, f))
        os.rmdir(replaced_dir)
    if created_dir and committed is None and not os.listdir(out_dir):
        os.rmdir(out_dir)


if master:
    print(f"{world_size} rank(s) x {accum_steps} micro-batches x {micro_batch} x {block_size} "
          f"= {tokens_per_iter:,} tokens per step")
    setting = ('FakeLN' if fakeln else {'none': 'Baseline', 'internal': 'Internal-Taper', 'all': 'All-Taper'}[taper]) \
        + {'none': '', 'fixed': ' (+aux)', 'baroni': ' (+Baroni aux)'}[aux_loss]
    print(f"{setting}, {arch}/{norm}, {raw_model.get_num_params():,} parameters, on {device} in "
          f"{'bfloat16 autocast' if use_bf16 else 'float32'}; out_dir {out_dir} (the full config: config.json)")
if compile:
    if os.environ.get('TORCHDYNAMO_DISABLE') == '1' and master:  # torch.compile then returns the model as it is
        print("note: --compile=True has no effect: TORCHDYNAMO_DISABLE=1 in the environment turns torch.compile off "
              "(unset it to compile)")
    model = torch.compile(model)
if ddp and not fsdp:
    # Tapered runs leave gammatilde (before taper start) or gamma (at g = 0) out of the graph.
    # Buffers are not synced at each forward: each rank's pending EMA sums must stay its own until
    # step_emas(). (They are equal on every rank as DDP starts; torch 2.13 renamed the argument.)
    no_buffer_sync = dict(forward_sync_buffers=False) if 'forward_sync_buffers' in \
        inspect.signature(DDP.__init__).parameters else dict(broadcast_buffers=False)
    model = DDP(model, device_ids=[int(os.environ['LOCAL_RANK'])] if device_type == 'cuda' else None,
                find_unused_parameters=taper != 'none', **no_buffer_sync)


@torch.no_grad()
def estimate_loss():
    """Mean CE over eval_iters fixed batches per split; tapered models are evaluated at g = 0."""
    raw_model.eval()
    out = {}
    for split in ('train', 'val'):
        ix = torch.randint(num_windows(split), (eval_iters, batch_size),
                           generator=torch.Generator().manual_seed(1234))
        total = torch.zeros(2, device=device)
        for k in range(rank, eval_iters, world_size):
            X, Y = windows(split, ix[k])
            with ctx:
                _, _, stats = raw_model(X, Y, return_stats=True)
            total += torch.stack([stats['ce'], torch.ones((), device=device)])
        if ddp:
            dist.all_reduce(total)
        out[split] = (total[0] / total[1]).item()
    raw_model.train()
    return out


WEIGHT_TYPES = ('q', 'k', 'v', 'o', 'mlp_in', 'mlp_out', 'norms')


def whole(t):
    """A plain tensor: FSDP's gradients are sharded DTensors, gathered here for the log."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def grad_norm(*params):
    return torch.sqrt(sum(whole(p.grad).float().pow(2).sum() for p in params if p.grad is not None)
                      + torch.zeros((), device=device))


def grad_norms_by_type():
    """Gradient norm per weight type, averaged over blocks (the paper's Fig. 2)."""
    per_block = []
    for block in raw_model.transformer.h:
        qkv = whole(block.attn.c_attn.weight.grad).float()  # rows: q, then k and v (n_kv_head heads each)
        q, kv = block.attn.q_size, block.attn.kv_size
        mlp = block.mlp
        mlp_in = (mlp.w1.weight, mlp.w3.weight) if arch == 'llama' else (mlp.c_fc.weight,)
        mlp_out = mlp.w2.weight if arch == 'llama' else mlp.c_proj.weight
        per_block.append(torch.stack([
            qkv[:q].norm(), qkv[q:q + kv].norm(), qkv[q + kv:].norm(), grad_norm(block.attn.c_proj.weight),
            grad_norm(*mlp_in), grad_norm(mlp_out), grad_norm(*block.ln_1.parameters(), *block.ln_2.parameters())]))
    return dict(zip(['grad_' + t for t in WEIGHT_TYPES], torch.stack(per_block).mean(0).tolist()))


def all_ranks_finite(flag):
    """flag: this rank's boolean tensor; True when it holds on every rank. A device read, so it is
    called at log and save time only, not every step."""
    bad = (~flag).float()
    if ddp:
        dist.all_reduce(bad)
    return bad.item() == 0


def all_finite(tensors):
    """True when every floating tensor holds only finite values (a shard's local part under FSDP)."""
    local = [t.to_local() if isinstance(t, DTensor) else t for t in tensors]
    local = [t for t in local if torch.is_tensor(t) and t.is_floating_point()]
    return torch.stack([torch.isfinite(t).all() for t in local]).all()


def check_state():
    """The state as it would be saved, checked as it will train: its parameters, buffers (c, s_tgt,
    FakeLN's sigma) and AdamW moments finite, and its next step's forward and backward, on the very
    micro-batches it will train on, at the current gate, in eval mode (no dropout, no statistic moved,
    no RNG drawn), with a finite CE, scale loss, pre-logit scale and gradient norm. True when all of
    that holds on every rank."""
    raw_model.eval()
    values = []
    for X, Y in batches:
        with ctx:
            _, loss, stats = raw_model(X, Y, return_stats=True)
        (loss / accum_steps).backward()
        values += [stats['ce'], stats['aux'], stats['prelogit_scale']]
    raw_model.train()
    total_norm = whole(torch.nn.utils.clip_grad_norm_(raw_model.parameters(), math.inf))  # as a step sees it
    moments = [t for state in optimizer.state.values() for t in state.values()]
    ok = (all_finite(list(raw_model.parameters()) + list(raw_model.buffers()) + moments)
          & torch.isfinite(torch.stack(values + [total_norm])).all())
    raw_model.zero_grad(set_to_none=True)
    return all_ranks_finite(ok)


def diverged(what, training_broke=False):
    """Stop on a divergence, with advice that follows its cause. training_broke: the training loss itself
    went non-finite since the last check, so a g = 0 evaluation taken after that check is no evidence that
    the taper, not the learning rate, broke the model."""
    kept = (f"the last good checkpoint, {ckpt_path} (iter {last_saved}), is kept" if last_saved is not None
            else f"no checkpoint was written and {out_dir} is as it was")
    last = json.loads(eval_row) if eval_row else {}
    g = get_gate(iter_num) if taper != 'none' else 1.0
    advice = "try a lower learning_rate"
    before = not training_broke or last.get('iter', iter_num) <= last_checked  # g = 0 broke while training was finite
    if g < 1 and last.get('eval_gate') == 0 and not math.isfinite(last.get('val_loss', 0.0)) and before:  # not the rate
        advice = (f"the gate reached g = {g:.2f} while the model at g = 0 was still non-finite at iter {last['iter']}'s "
                  f"evaluation: a later taper_end gives it time to do without its norms, a lower learning_rate may not")
    fail(f"the model diverged ({what}) between iter {last_checked} and iter {iter_num}: stopping; "
         f"{kept} ({advice})")


def save_checkpoint():
    """Only a state known to be good replaces the checkpoint: the steps since the last save were
    finite, and so is the state's next step (check_state). Atomic: a crash while writing leaves the
    previous checkpoint intact. Under FSDP every rank takes part in gathering the full state; rank 0
    writes it, then commits the log up to it."""
    global last_saved
    if not all_ranks_finite(healthy):
        diverged("a non-finite training loss or pre-logit scale", training_broke=True)
    if not check_state():
        diverged(f"the state to be saved has non-finite values, or its next step a non-finite loss or "
                 f"gradient at g = {gate:.3g}")
    if not (master or fsdp):
        return
    model_state = get_model_state_dict(raw_model, options=full_state)
    optimizer_state = get_optimizer_state_dict(raw_model, optimizer, options=full_state)
    if not master:
        return
    ckpt = dict(model=model_state, optimizer=optimizer_state,
                model_args=asdict(raw_model.config), config=recorded(), iter_num=iter_num,
                sampler=sampler_state, tokenizer=tokenizer, eval_row=eval_row,
                data={split: len(tokens) for split, tokens in data.items()}, run_id=run_id,
                rng=dict(torch=torch.get_rng_state(),
                         cuda=torch.cuda.get_rng_state() if device_type == 'cuda' else None))
    try:
        torch.save(ckpt, ckpt_path + '.tmp')
        os.replace(ckpt_path + '.tmp', ckpt_path)
    except (OSError, RuntimeError) as e:  # a full disk, a file or folder that may not be written
        if write_failure(e, ckpt_path) is None:
            raise
        cannot_write(ckpt_path, e)
    last_saved = iter_num
    commit()


def log(row):
    """Print a row; it goes to log.jsonl once the run is open, and is held until then."""
    if master:
        print(' '.join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in row.items() if not isinstance(v, list)))
        if original:
            if os.path.isfile(log_path) and os.path.getsize(log_path) < (committed or 0):  # cut by another program
                fail(f"{log_path} was cut short while the run trained (rows up to iter {last_saved} are gone), so "
                     f"the run stops: {ckpt_path} (iter {last_saved}) is kept; move what is left of the log aside, "
                     f"and --init_from=resume continues the run with a new one")
            if not os.path.isfile(log_path) and os.path.isdir(out_dir):  # deleted by another program
                fail(f"{log_path} was removed while the run trained, so the run stops: {ckpt_path} (iter "
                     f"{last_saved}) is kept, and --init_from=resume continues it with a log from there"
                     if last_saved is not None else f"{log_path} was removed while the run trained, so the run "
                     f"stops before its first checkpoint: start it again")
            try:
                with open(log_path, 'a') as f:
                    f.write(json.dumps(row) + '\n')
            except OSError as e:
                cannot_write(log_path, e)
        else:
            log_rows.append(json.dumps(row) + '\n')
        if wandb_log:
            wandb.log(row, step=row['iter'])


if wandb_log and master:
    try:
        wandb.init(project=wandb_project, name=wandb_run_name, config=config)
    except Exception as e:  # not logged in, no network, ...
        fail(f"wandb could not start a run ({str(e).splitlines()[0] if str(e) else type(e).__name__}): "
             f"log in with `wandb login`, or drop --wandb_log")

# --- the loop ------------------------------------------------------------------------------------
# healthy: every training loss, pre-logit scale and gradient norm since the last check was finite. It
# lives on the device and is read only at log and save time. A model whose residual stream overflows
# can still give a finite, flat loss (its final norm outputs 0: uniform logits), so s(h) counts too.
healthy = torch.ones((), dtype=torch.bool, device=device)
last_checked = first_iter = iter_num
eval_row = None  # the last evaluation's log row, as its JSON line
first_eval = None
batches = get_step_batches(iter_num)
if fakeln and fakeln_sigma == 'pretrained' and init_from != 'resume' and not eval_only:
    with ctx:  # sigma_avg from the model as it starts, on the first step's batch (a resume has it)
        raw_model.measure_pretrained_sigma([X for X, _ in batches])
t0, last_log_iter = time.time(), iter_num
while True:
    if needs_start and iter_num >= taper_start and not raw_model.started:
        raw_model.start_taper()  # once: c, gammatilde and s_tgt from the statistics of g = 1
    gate = get_gate(iter_num) if taper != 'none' else 1.0
    raw_model.set_gate(gate)
    for step, norm, path, name in removals:
        if iter_num >= step and not norm.removed[path]:  # sigma_avg: the EMA's now, or the pretrained one
            norm.remove(iter_num, path)
            if master:
                print(f"iter {iter_num}: removed {name}, sigma_avg {norm.sigma_avg[path].item():.4g}")
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group['lr'] = lr

    if iter_num % eval_interval == 0 or iter_num == end_iter or eval_only:
        # Scored at g = 0 once the taper has started. Mid-taper, and for a norm-free model on an
        # unusual window, that score may be non-finite: it is recorded, and never stops the run or
        # its checkpoint, which depend on the model as it trains.
        eval_gate = 0.0 if raw_model.started else 1.0
        raw_model.set_gate(eval_gate)
        losses = estimate_loss()
        raw_model.set_gate(gate)
        eval_row = dict(iter=iter_num, gate=gate, eval_gate=eval_gate, loss=losses['train'], val_loss=losses['val'])
        first_eval = first_eval or eval_row  # this invocation's first: a run that ends far above it is said
        log(eval_row)
        eval_row = json.dumps(eval_row)  # the checkpoint's mark in the log: a resume finds it there
        if iter_num > last_checked and not eval_only:  # nothing new to save at the run's first step
            save_checkpoint()
            healthy.fill_(True)
            last_checked = iter_num
    if iter_num >= end_iter or eval_only:
        break

    # one optimizer step over accum_steps micro-batches per rank
    sums = torch.zeros(4, device=device)  # ce, aux, logit norm, pre-logit scale
    for micro_step, (X, Y) in enumerate(batches):
        if fsdp:  # gradients are reduced once, after the last micro-batch
            raw_model.set_requires_gradient_sync(micro_step == accum_steps - 1)
        elif ddp:
            model.require_backward_grad_sync = micro_step == accum_steps - 1
        with ctx:
            _, loss, stats = model(X, Y, return_stats=True)
        (loss / accum_steps).backward()
        values = torch.stack([stats['ce'], stats['aux'], stats['logit_norm'], stats['prelogit_scale']])
        healthy &= torch.isfinite(values).all()
        sums += values
    batches = get_step_batches(iter_num + 1)  # the next step's data, drawn while the device works
    logging = iter_num % log_interval == 0
    grads = grad_norms_by_type() if logging else {}
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else math.inf)
    healthy &= torch.isfinite(whole(total_norm))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    raw_model.step_emas()
    if iter_num == first_iter:  # the run is sure to start: out_dir is written from here on
        if not all_ranks_finite(healthy):
            diverged("a non-finite loss, pre-logit scale or gradient at its first step", training_broke=True)
        if master:
            atexit.register(roll_back)  # any exit before the run's end: out_dir as of its last checkpoint
            open_run()
        for stop, why in STOPS.items():  # Ctrl-C, a scheduler's kill or warning, a limit: the same roll-back
            if signal.getsignal(stop) in (signal.SIG_DFL, configurator.stopped, signal.default_int_handler) or \
                    stop in (signal.SIGINT, signal.SIGTERM):  # not a signal nohup ignores
                signal.signal(stop, lambda signum, frame: configurator.running_script(frame) and fail(
                    f"{STOPS[signum]} at iter {iter_num}: {out_dir} is as of its last checkpoint (iter "
                    f"{last_saved}); --init_from=resume continues from there" if last_saved is not None else
                    f"{STOPS[signum]} at iter {iter_num} before the first checkpoint: {out_dir} is as it was"))

    if logging:
        if ddp:
            dist.all_reduce(sums)
        ce, aux, logit_norm, prelogit_scale = (sums / (world_size * accum_steps)).tolist()
        cs = [m.c for m in raw_model.tapered_norms()]
        dt = (time.time() - t0) / max(1, iter_num + 1 - last_log_iter)
        t0, last_log_iter = time.time(), iter_num + 1
        row = dict(iter=iter_num, lr=lr, gate=gate, loss=ce, aux=aux, logit_norm=logit_norm,
                   prelogit_scale=prelogit_scale, grad_norm=whole(total_norm).item(), **grads,
                   c=torch.stack(cs).tolist() if cs else [],  # one device read for all layers
                   s_tgt=raw_model.s_tgt.item(),
                   removed=sum(sum(m.removed) for m in raw_model.fakelns()),
                   tok_per_s=tokens_per_iter / dt)
        if device_type == 'cuda':  # peak_flops is a GPU's; a CPU figure would mean nothing
            row['mfu'] = raw_model.estimate_mfu(accum_steps * micro_batch, dt, peak_flops)
        if not all_ranks_finite(healthy):
            diverged(f"training loss {ce:.4g}, pre-logit scale {prelogit_scale:.4g}", training_broke=True)
        log(row)
    iter_num += 1

if master:
    atexit.unregister(roll_back)
    last = json.loads(eval_row) if eval_row else {}
    if not eval_only and first_eval and math.isfinite(last.get('val_loss', math.nan)) and \
            last['val_loss'] > first_eval['val_loss'] + 1:  # finite, so never stopped, yet trained away from its start
        print(f"note: val_loss ended at {last['val_loss']:.4g}, more than a nat above the {first_eval['val_loss']:.4g} "
              f"of iter {first_eval['iter']}: the run diverged without a non-finite value to stop it (log.jsonl shows "
              f"where the loss rose)")
    if not eval_only and stop_iter and stop_iter < max_iters:
        print(f"stopped at iter {iter_num} of {max_iters} (--stop_iter), checkpointed in {ckpt_path}: continue "
              f"the run with {continue_command()}")
if ddp:
    dist.barrier()  # rank 0 may still be writing the checkpoint: tear the group down together
    dist.destroy_process_group()
