"""
One training loop for every run of the paper: TinyStories pre-training (Baseline, Internal-Taper,
All-Taper, with or without the fixed-target scale loss) and GPT-2 fine-tuning from HF weights.

    python train.py config/taper_internal_512.py                           # one GPU
    torchrun --standalone --nproc_per_node=8 train.py config/taper_internal_512.py
    python train.py config/taper_internal_64.py --device=cpu --max_iters=200 --aux_loss=none

nanoGPT's loop with the taper schedule added: start_taper() once at taper_start, the gate g(k) set
every step, and tapered models evaluated at g = 0.
"""

import json
import math
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_optimizer_state_dict, set_optimizer_state_dict)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GPT, GPTConfig, load_checkpoint

# -----------------------------------------------------------------------------
# Defaults: the paper's default run, Internal-Taper (+aux) at d = 512 (App. C). Override them with a
# config file and --key=value (configurator.py).
# I/O
out_dir = 'out'
init_from = 'scratch'     # 'scratch' | 'resume' | an HF GPT-2 name ('gpt2', ...) or directory
eval_interval = 5000
log_interval = 100
eval_iters = 50           # batches per split; the same fixed-seed batches at every evaluation
eval_only = False
wandb_log = False
wandb_project = 'tapernorm'
wandb_run_name = 'run'
# data
data_dir = 'data/tinystories10000'
gradient_accumulation_steps = 1   # over all ranks: each of N ranks runs 1/N of them
batch_size = 16                   # sequences per micro-batch
block_size = 512
# model
arch = 'llama'
vocab_size = 10000
n_layer = 8
n_head = 16
n_embd = 512
norm = 'rmsnorm'
taper = 'internal'        # 'none' (Baseline) | 'internal' | 'all'
taper_start = 50_000      # g = 1 before; c and s_tgt are calibrated here
taper_end = 1_000_000     # g = 0 from here on
aux_loss = 'fixed'        # 'none' | 'fixed' (eq. 5) | 'baroni'
aux_weight = 0.1          # lambda
ema_rate = 0.01           # mu
# FakeLN, Baroni et al.'s protocol (GPT-2): layer i's ln_2 is removed at step start[0] + i gap[0],
# then ln_1 on the Q/K path (start[1], gap[1]), on the V path (start[2], gap[2]), then ln_f at
# start[3]; end-of-text positions keep their own sigma until fakeln_eot_end
fakeln = False
fakeln_start = (20, 44, 68, 104)
fakeln_gap = (2, 2, 3)
fakeln_eot_end = 106
# AdamW, linear warmup then cosine decay
learning_rate = 3e-4
max_iters = 1_000_000
weight_decay = 0.0
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0           # 0 disables
warmup_iters = 50_000
lr_decay_iters = 1_000_000
min_lr = 0.0
# system
grad_checkpoint = False   # recompute blocks in backward (activation checkpointing), for GPT-2 XL
fsdp = False              # under torchrun: shard parameters, gradients and AdamW state (FSDP2)
                          # instead of replicating them (DDP), for GPT-2 XL on smaller GPUs
device = 'cuda'
dtype = 'bfloat16'        # 'bfloat16' (autocast) | 'float32'; the CPU always runs float32
compile = False
seed = 1337
peak_flops = 989e12       # per device, for MFU (H100 SXM dense bf16)
# -----------------------------------------------------------------------------
from configurator import configure_globals  # noqa: E402

config = configure_globals(globals(), sys.argv[1:])
# -----------------------------------------------------------------------------

ddp = int(os.environ.get('RANK', -1)) != -1
if device.startswith('cuda') and not torch.cuda.is_available():
    raise SystemExit("CUDA is not available on this machine: run with --device=cpu")
if ddp:
    dist.init_process_group(backend='nccl' if device.startswith('cuda') else 'gloo')
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if device.startswith('cuda'):
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
else:
    rank, world_size = 0, 1
master = rank == 0
if fsdp and not ddp:
    raise SystemExit("fsdp shards the model over ranks: launch with torchrun --nproc_per_node=N")
if fsdp and eval_iters % world_size:
    raise SystemExit(f"under FSDP every evaluation forward is collective: make eval_iters a multiple "
                     f"of the {world_size} ranks")
if gradient_accumulation_steps % world_size:
    raise SystemExit(f"gradient_accumulation_steps={gradient_accumulation_steps} must be a multiple "
                     f"of the {world_size} ranks")
accum_steps = gradient_accumulation_steps // world_size  # micro-batches per rank per step
tokens_per_iter = gradient_accumulation_steps * batch_size * block_size
device_type = 'cuda' if device.startswith('cuda') else 'cpu'
if dtype not in ('bfloat16', 'float32'):
    raise SystemExit(f"dtype={dtype!r} is not supported: use 'bfloat16' or 'float32'")
use_bf16 = device_type == 'cuda' and dtype == 'bfloat16'
ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16) if use_bf16 else nullcontext()
if device_type == 'cuda':
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
torch.manual_seed(seed)
if master:
    os.makedirs(out_dir, exist_ok=True)
    print(json.dumps(config, indent=1))
    with open(os.path.join(out_dir, 'config.json'), 'w') as f:  # read by plot.py
        json.dump(config, f, indent=1)
    print(f"{world_size} rank(s) x {accum_steps} micro-batches x {batch_size} x {block_size} "
          f"= {tokens_per_iter:,} tokens per step")

# --- data: random contiguous windows of one concatenated token stream -------------------------
prepare_cmd = 'prepare_owt.py' if 'owt' in data_dir or 'openwebtext' in data_dir else 'prepare_tinystories.py'
for split in ('train', 'val'):
    if not os.path.isfile(os.path.join(data_dir, f'{split}.bin')):
        raise SystemExit(f"{os.path.join(data_dir, split + '.bin')} not found: prepare the data "
                         f"with `python {prepare_cmd}` (or set data_dir)")
meta_path = os.path.join(data_dir, 'meta.json')
meta = json.load(open(meta_path)) if os.path.isfile(meta_path) else {}
if meta.get('vocab_size', vocab_size) > vocab_size:
    raise SystemExit(f"{data_dir} has a vocabulary of {meta['vocab_size']} tokens but "
                     f"vocab_size={vocab_size}: set --vocab_size={meta['vocab_size']}")


def tokenizer_reference():
    """What sample.py needs to decode this run's tokens, stored in every checkpoint."""
    if arch == 'gpt2' or meta.get('tokenizer') == 'tiktoken':
        return dict(kind='tiktoken', name='gpt2')
    if meta.get('tokenizer') == 'sentencepiece':
        with open(os.path.join(data_dir, meta['tokenizer_model']), 'rb') as f:
            model_bytes = f.read()
        return dict(kind='sentencepiece', model=torch.frombuffer(bytearray(model_bytes), dtype=torch.uint8))
    return None


def windows(split, ix):
    data = np.memmap(os.path.join(data_dir, f'{split}.bin'), dtype=np.uint16, mode='r')
    x = torch.stack([torch.from_numpy(data[i:i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + block_size].astype(np.int64)) for i in ix])
    if device_type == 'cuda':
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x, y


def num_windows(split):
    return len(np.memmap(os.path.join(data_dir, f'{split}.bin'), dtype=np.uint16, mode='r')) - block_size


# Every rank draws the same global batch from the same generator and keeps its own slice, so ranks
# see different data and N ranks see exactly what one process with N times the accumulation sees.
sampler = torch.Generator().manual_seed(seed)
sampler_state = sampler.get_state()  # before the pending step's draw: where a resume starts reading


def get_step_batches():
    global sampler_state
    sampler_state = sampler.get_state()
    ix = torch.randint(num_windows('train'), (gradient_accumulation_steps * batch_size,), generator=sampler)
    mine = ix.view(world_size, accum_steps, batch_size)[rank]
    return [windows('train', micro) for micro in mine]


# --- schedules ----------------------------------------------------------------------------------
def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def get_gate(it):
    """g(k) = 1 before taper_start, a half cosine to 0 at taper_end, 0 after (Sec. 3.3)."""
    if it < taper_start:
        return 1.0
    if it >= taper_end:
        return 0.0
    return 0.5 * (1.0 + math.cos(math.pi * (it - taper_start) / (taper_end - taper_start)))


# --- model, optimizer, resume ---------------------------------------------------------------------
model_args = dict(arch=arch, block_size=block_size, vocab_size=vocab_size, n_layer=n_layer,
                  n_head=n_head, n_embd=n_embd, norm=norm, taper=taper, aux_loss=aux_loss,
                  aux_weight=aux_weight, ema_rate=ema_rate, fakeln=fakeln)
ckpt_path = os.path.join(out_dir, 'ckpt.pt')
log_path = os.path.join(out_dir, 'log.jsonl')
iter_num = 0
checkpoint = None
if init_from == 'scratch':
    try:
        model = GPT(GPTConfig(**model_args))
    except ValueError as e:  # settings that do not go together, e.g. norm='dyt' with a taper
        raise SystemExit(f"cannot build the model: {e}") from None
elif init_from == 'resume':
    try:
        checkpoint = load_checkpoint(ckpt_path, device)
        model = GPT.from_checkpoint(checkpoint, device, **model_args)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"cannot resume: {e}") from None
    iter_num = checkpoint['iter_num']
else:
    model = GPT.from_pretrained(init_from, taper=taper, aux_loss=aux_loss, aux_weight=aux_weight,
                                ema_rate=ema_rate, fakeln=fakeln)
    if block_size > model.config.block_size:
        raise SystemExit(f"block_size={block_size} exceeds {init_from}'s context of "
                         f"{model.config.block_size}")
    for key in ('vocab_size', 'n_layer', 'n_head', 'n_embd', 'arch', 'norm'):
        config[key] = getattr(model.config, key)
model.to(device)
raw_model = model
raw_model.grad_checkpoint = grad_checkpoint
if fsdp:  # FSDP2: each block is one shard unit, the root holds the embeddings, ln_f and head
    for block in raw_model.transformer.h:
        fully_shard(block)
    fully_shard(raw_model)
optimizer = raw_model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
full_state = StateDictOptions(full_state_dict=True, cpu_offload=True) if fsdp else None
if checkpoint is not None:  # optimizer state is keyed by parameter name, so any mode resumes any other
    set_optimizer_state_dict(raw_model, optimizer, checkpoint['optimizer'],
                             options=StateDictOptions(full_state_dict=True) if fsdp else None)
    sampler.set_state(checkpoint['sampler'])
    torch.set_rng_state(checkpoint['rng']['torch'])
    if device_type == 'cuda' and checkpoint['rng'].get('cuda') is not None:
        torch.cuda.set_rng_state(checkpoint['rng']['cuda'])
    if master and os.path.isfile(log_path):  # the log continues from the checkpoint, not the crash
        rows = [line for line in open(log_path) if json.loads(line)['iter'] < iter_num]
        with open(log_path, 'w') as f:
            f.writelines(rows)
    checkpoint = None  # free it
elif master and os.path.isfile(log_path):
    os.remove(log_path)
needs_start = taper != 'none' or aux_loss == 'fixed'
if master:
    print(f"parameters: {raw_model.get_num_params():,}")
if compile:
    model = torch.compile(model)
if ddp and not fsdp:
    # Tapered runs leave gammatilde (before taper start) or gamma (at g = 0) out of the graph.
    # Buffers are not broadcast: each rank's pending EMA sums must stay its own until step_emas().
    model = DDP(model, device_ids=[int(os.environ['LOCAL_RANK'])] if device_type == 'cuda' else None,
                find_unused_parameters=taper != 'none', broadcast_buffers=False)


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
    d = raw_model.config.n_embd
    per_block = []
    for block in raw_model.transformer.h:
        qkv = whole(block.attn.c_attn.weight.grad).float()  # rows: q, k, v
        mlp = block.mlp
        mlp_in = (mlp.w1.weight, mlp.w3.weight) if arch == 'llama' else (mlp.c_fc.weight,)
        mlp_out = mlp.w2.weight if arch == 'llama' else mlp.c_proj.weight
        per_block.append(torch.stack([
            qkv[:d].norm(), qkv[d:2 * d].norm(), qkv[2 * d:].norm(), grad_norm(block.attn.c_proj.weight),
            grad_norm(*mlp_in), grad_norm(mlp_out), grad_norm(*block.ln_1.parameters(), *block.ln_2.parameters())]))
    return dict(zip(['grad_' + t for t in WEIGHT_TYPES], torch.stack(per_block).mean(0).tolist()))


last_saved = None


def save_checkpoint():
    """Atomic: a crash while writing leaves the previous checkpoint intact. Under FSDP every rank
    takes part in gathering the full state; rank 0 writes it."""
    global last_saved
    if not (master or fsdp):
        return
    model_state = get_model_state_dict(raw_model, options=full_state)
    optimizer_state = get_optimizer_state_dict(raw_model, optimizer, options=full_state)
    if not master:
        return
    ckpt = dict(model=model_state, optimizer=optimizer_state,
                model_args=asdict(raw_model.config), config=config, iter_num=iter_num,
                sampler=sampler_state, tokenizer=tokenizer_reference(),
                rng=dict(torch=torch.get_rng_state(),
                         cuda=torch.cuda.get_rng_state() if device_type == 'cuda' else None))
    torch.save(ckpt, ckpt_path + '.tmp')
    os.replace(ckpt_path + '.tmp', ckpt_path)
    last_saved = iter_num


def stop_if_not_finite(value, what):
    if not math.isfinite(value):
        kept = (f"the last good checkpoint, {ckpt_path} (iter {last_saved}), is kept"
                if last_saved is not None else "no checkpoint was written")
        raise SystemExit(f"{what} is {value} at iter {iter_num}: stopping; {kept} "
                         f"(try a lower learning_rate)")


def log(row):
    if master:
        print(' '.join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in row.items() if not isinstance(v, list)))
        with open(log_path, 'a') as f:
            f.write(json.dumps(row) + '\n')
        if wandb_log:
            wandb.log(row, step=row['iter'])


if wandb_log and master:
    import wandb
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)

def fakeln_schedule():
    """(removal step, FakeLN layer, name) for every LayerNorm, in Baroni et al.'s order."""
    schedule = []
    for kind, (start, gap) in enumerate(zip(fakeln_start[:3], fakeln_gap)):
        for i, block in enumerate(raw_model.transformer.h):
            norm, name = [(block.ln_2, 'ln_2'), (block.ln_1, 'ln_1 (Q/K)'), (block.ln_1v, 'ln_1 (V)')][kind]
            schedule.append((start + i * gap, norm, f"h.{i}.{name}"))
    return schedule + [(fakeln_start[3], raw_model.transformer.ln_f, 'ln_f')]


removals = fakeln_schedule() if fakeln else []

# --- the loop ------------------------------------------------------------------------------------
batches = get_step_batches()
t0, last_log_iter = time.time(), iter_num
while True:
    if needs_start and iter_num >= taper_start and not raw_model.started:
        raw_model.start_taper()  # once: c, gammatilde and s_tgt from the statistics of g = 1
    gate = get_gate(iter_num) if taper != 'none' else 1.0
    raw_model.set_gate(gate)
    for step, norm, name in removals:
        if iter_num >= step and not norm.removed:  # sigma_avg frozen from the EMA of its real sigma
            norm.remove(iter_num)
            if master:
                print(f"iter {iter_num}: removed {name}, sigma_avg {norm.sigma_avg.item():.4g}")
    raw_model.eot_keeps_sigma = fakeln and iter_num < fakeln_eot_end
    lr = get_lr(iter_num)
    for group in optimizer.param_groups:
        group['lr'] = lr

    if iter_num % eval_interval == 0 or iter_num == max_iters or eval_only:
        eval_gate = 0.0 if raw_model.started else 1.0
        raw_model.set_gate(eval_gate)
        losses = estimate_loss()
        raw_model.set_gate(gate)
        if eval_gate == gate:  # the model as it trains; mid-taper, g = 0 is a diagnostic only
            stop_if_not_finite(losses['val'], 'the validation loss')
        log(dict(iter=iter_num, gate=gate, eval_gate=eval_gate, loss=losses['train'], val_loss=losses['val']))
        if iter_num > 0 and not eval_only:  # nothing is trained at 0 (and AdamW has no state to save)
            save_checkpoint()
    if iter_num >= max_iters or eval_only:
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
        sums += torch.stack([stats['ce'], stats['aux'], stats['logit_norm'], stats['prelogit_scale']])
    batches = get_step_batches()  # the next step's data, drawn while the device works
    logging = iter_num % log_interval == 0
    grads = grad_norms_by_type() if logging else {}
    total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip if grad_clip > 0 else math.inf)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    raw_model.step_emas()

    if logging:
        if ddp:
            dist.all_reduce(sums)
        ce, aux, logit_norm, prelogit_scale = (sums / gradient_accumulation_steps).tolist()
        stop_if_not_finite(ce, 'the training loss')
        cs = [m.c for m in raw_model.tapered_norms()]
        dt = (time.time() - t0) / max(1, iter_num + 1 - last_log_iter)
        t0, last_log_iter = time.time(), iter_num + 1
        log(dict(iter=iter_num, lr=lr, gate=gate, loss=ce, aux=aux, logit_norm=logit_norm,
                 prelogit_scale=prelogit_scale, grad_norm=whole(total_norm).item(), **grads,
                 c=torch.stack(cs).tolist() if cs else [],  # one device read for all layers
                 s_tgt=raw_model.s_tgt.item(),
                 removed=sum(m.removed for m in raw_model.fakelns()),
                 tok_per_s=tokens_per_iter / dt,
                 mfu=raw_model.estimate_mfu(accum_steps * batch_size, dt, peak_flops)))
    iter_num += 1

if ddp:
    dist.destroy_process_group()
