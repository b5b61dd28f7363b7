"""
One GPT with a swappable normalization layer, following "Gated Normalization Removal and Scale
Anchoring in Pre-Norm Transformers" (TaperNorm). Equation numbers refer to the paper.

  arch='llama': RoPE, SwiGLU, no biases, tied head (the TinyStories models); loaded HF Llama-family
               models add grouped-query attention, an untied head and optional biases (hf.py).
  arch='gpt2' : exactly HF GPT-2 (learned positions, tanh-GELU, biases, LayerNorm, tied head).
  norm        : 'rmsnorm' | 'layernorm' | 'dyt' (Dynamic Tanh, the comparison: no norm at all)
  taper       : 'none' (Baseline) | 'internal' (Internal-Taper) | 'all' (All-Taper)

Token vectors h are rows, as in the paper; nn.Linear stores W as (out, in), so x -> x W^T.
"""

import difflib
import json
import math
import os
import re
import shlex
import zipfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.distributed as dist
import torch.utils.checkpoint
import torch.nn.functional as F


@dataclass
class GPTConfig:
    arch: str = 'llama'          # 'llama' | 'gpt2'
    block_size: int = 512        # context length T
    vocab_size: int = 10000
    n_layer: int = 8
    n_head: int = 16
    n_embd: int = 512            # d
    mlp_hidden: int = 0          # SwiGLU hidden size; 0 = the LLaMA rule (about 8d/3)
    norm: str = 'rmsnorm'        # 'rmsnorm' | 'layernorm' | 'dyt'
    norm_eps: float = 1e-5       # epsilon inside r(h) and sigma_h
    taper: str = 'none'          # 'none' | 'internal' | 'all'
    ema_rate: float = 0.01       # mu, the new-sample weight of the calibration and s_tgt EMAs
    aux_loss: str = 'none'       # 'none' | 'fixed' (eq. 5) | 'baroni'
    aux_weight: float = 0.1      # lambda
    eot_token: int = -1          # end-of-text id, excluded from the Baroni target (-1: none)
    rope_theta: float = 10000.0
    rope_scaling: dict = None    # Llama-3's frequency rescaling (HF rope_type 'llama3'), or None
    n_kv_head: int = 0           # key/value heads of grouped-query attention; 0 = n_head
    tied_head: bool = True       # the output head is the token embedding
    attn_bias: bool = False      # llama: biases on q/k/v/o (HF attention_bias); GPT-2 always has them
    mlp_bias: bool = False       # llama: biases on the SwiGLU projections (HF mlp_bias)
    dropout: float = 0.0         # HF GPT-2's placement: embeddings, attention probabilities and
                                 # the residual outputs of attention and MLP; training mode only
    fakeln: bool = False         # Baroni et al.'s protocol: every LayerNorm is a FakeLN, removed on
                                 # a schedule; ln_1 is removed on its Q/K and V paths apart
    fakeln_momentum: float = 0.9  # weight on the old value of FakeLN's sigma EMA, per forward
    fakeln_sigma: str = 'live'   # where a removed FakeLN's sigma_avg comes from: 'live' | 'live_shared'
                                 # | 'pretrained' (FakeLN's docstring)
    folded: bool = False         # fold.py's output: removed norms are identities, their fixed maps
                                 # live in the next linear layers (and an untied head when ln_f was)

    @property
    def norm_bias(self):
        """beta exists: GPT-2's LayerNorm, or the DyT that replaces it."""
        return self.arch == 'gpt2' and self.norm in ('layernorm', 'dyt')

    def __post_init__(self):
        choices = dict(arch=('llama', 'gpt2'), norm=('rmsnorm', 'layernorm', 'dyt'),
                       taper=('none', 'internal', 'all'), aux_loss=('none', 'fixed', 'baroni'),
                       fakeln_sigma=('live', 'live_shared', 'pretrained'))
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key}={getattr(self, key)!r} is not one of {allowed}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.n_kv_head < 0 or self.n_head % (self.n_kv_head or self.n_head):
            raise ValueError(f"n_head={self.n_head} is not a multiple of n_kv_head={self.n_kv_head}: "
                             f"each key/value head serves a whole group of query heads")
        if self.arch == 'gpt2' and (self.n_kv_head not in (0, self.n_head) or not self.tied_head
                                    or self.rope_scaling or self.mlp_hidden not in (0, 4 * self.n_embd)):
            raise ValueError("arch='gpt2' is GPT-2 exactly: n_kv_head, tied_head, rope_scaling and mlp_hidden "
                             "(its MLP is 4 n_embd wide) stay at their defaults")
        if self.norm == 'dyt' and (self.taper != 'none' or self.fakeln):
            raise ValueError("norm='dyt' leaves no norm to taper or remove: use taper='none' and "
                             "fakeln=False with it")
        if self.fakeln and (self.norm != 'layernorm' or self.taper != 'none'):
            raise ValueError("fakeln replaces LayerNorms: it needs norm='layernorm' and taper='none'")
        scaling = ('factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings')
        r = self.rope_scaling
        if r is not None and not (isinstance(r, dict) and r.get('rope_type', 'llama3') == 'llama3' and all(
                isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool) and r[k] > 0 for k in scaling)
                and r['low_freq_factor'] < r['high_freq_factor']):
            raise ValueError(f"rope_scaling={r!r} is not Llama-3's frequency rescaling: positive numbers "
                             f"{', '.join(scaling)}, low_freq_factor below high_freq_factor")
        for key in ('dropout', 'fakeln_momentum'):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"{key}={getattr(self, key)} must lie in [0, 1)")
        d = self.n_embd  # about the model's size: its blocks' matrices, the embedding and head, the positions
        parts = {'n_layer': self.n_layer * (4 * d * d + 3 * d * self.resolved('mlp_hidden')),
                 'vocab_size': 2 * self.vocab_size * d, 'block_size': self.block_size * d}
        size = sum(parts.values())
        if size * 4 > 2 ** 50:  # float32 weights past a petabyte, before gradients and AdamW's state
            most = max(parts, key=parts.get)  # the flag whose term makes the size, beside n_embd in each
            both = [most, 'mlp_hidden'] if most == 'n_layer' and self.mlp_hidden else [most]
            raise ValueError(f"{', '.join(f'{k}={getattr(self, k)}' for k in both)} with n_embd={d} make a model of "
                             f"about {size:.3g} parameters, whose float32 weights alone would take {size * 4 / 1e12:.3g} "
                             f"TB, far past any machine's memory")

    def resolved(self, key):
        """The value a shape field takes in the model: n_kv_head 0 is n_head, mlp_hidden 0 the LLaMA
        rule (GPT-2's MLP is always 4d)."""
        if key == 'n_kv_head':
            return self.n_kv_head or self.n_head
        if key == 'mlp_hidden':
            return 4 * self.n_embd if self.arch == 'gpt2' else self.mlp_hidden or 32 * math.ceil(8 * self.n_embd / 3 / 32)
        return getattr(self, key)

    @property
    def final_norm_removed(self):
        """ln_f leaves the model too (All-Taper, FakeLN): a folded model then needs its own head."""
        return self.taper == 'all' or self.fakeln


# -----------------------------------------------------------------------------
# Norms. Each exposes the pieces the paper's formulas are built from:
#   center(h)   h (RMSNorm) or h - mu_h (LayerNorm)
#   scale(h)    r(h) = sqrt(|h|^2/d + eps) or sigma_h = sqrt(|h - mu_h|^2/d + eps): s(h) of Sec. 3.5
#   affine(x, w) x D_w (+ beta for LayerNorm)

class RMSNorm(nn.Module):
    """RMSNorm(h) = h / r(h) D_gamma."""

    def __init__(self, ndim, eps=1e-5, bias=False):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(ndim))  # gamma

    def center(self, h):
        return h

    def scale(self, h):
        return torch.sqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)

    def affine(self, x, w):
        return x * w

    def forward(self, h):
        return F.rms_norm(h, (h.size(-1),), self.weight, self.eps)


class LayerNorm(nn.Module):
    """LayerNorm(h) = (h - mu_h) / sigma_h D_gamma + beta."""

    def __init__(self, ndim, eps=1e-5, bias=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(ndim))                     # gamma
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None   # beta

    def center(self, h):
        return h - h.mean(-1, keepdim=True)

    def scale(self, h):
        return torch.sqrt(self.center(h).pow(2).mean(-1, keepdim=True) + self.eps)

    def affine(self, x, w):
        return x * w if self.bias is None else x * w + self.bias

    def forward(self, h):
        return F.layer_norm(h, (h.size(-1),), self.weight, self.bias, self.eps)


class EMA(nn.Module):
    """
    s <- (1 - mu) s + mu x, s(0) = 0, read with bias correction s / (1 - (1 - mu)^n) (App. A.5).
    For calibration and s_tgt, x is the batch mean of one optimizer step: forwards observe() their
    micro-batch mean, and GPT.step_emas() averages those (over ranks too) and moves the EMA once, so
    mu means the same under any gradient accumulation or number of GPUs. FakeLN instead steps its
    sigma EMA on every forward, as Baroni et al.'s runs did.
    """

    def __init__(self, rate):
        super().__init__()
        self.rate = rate
        self.register_buffer('value', torch.zeros(()))
        self.register_buffer('n', torch.zeros(()))
        self.register_buffer('pending_sum', torch.zeros(()), persistent=False)
        self.register_buffer('pending_count', torch.zeros(()), persistent=False)

    @torch.no_grad()
    def observe(self, x):
        self.pending_sum += x.detach().to(self.pending_sum.dtype)
        self.pending_count += 1

    def pending_mean(self):
        return self.pending_sum / self.pending_count

    @torch.no_grad()
    def step(self, x=None):
        """One EMA update with x, by default the mean of this step's observations."""
        self.value.lerp_(self.pending_mean() if x is None else x, self.rate)
        self.n += 1
        self.pending_sum.zero_()
        self.pending_count.zero_()

    def corrected(self, check=True):
        """check=False skips the read of n (a device sync) for a caller that has just stepped it."""
        if check and self.n.item() == 0:
            raise RuntimeError("an EMA was read before any update: run training steps at g = 1 "
                               "before start_taper()")
        return self.value / (1 - (1 - self.rate) ** self.n)


class Taper:
    """
    The gated norm, mixed into RMSNorm (TaperNorm, eq. 3) or LayerNorm (TaperLN, App. B):
        Taper(h; g) = g Norm(h) + (1 - g) (c center(h) D_gammatilde (+ beta)).
    Three phases, held as Python flags so that no step reads the gate from the device:
      calibrating  g = 1 before taper start: a plain norm; in training mode it updates the EMAs of
                   eq. 4's numerator and denominator.
      normalizing  0 < g <= 1 after taper start: both branches, mixed by the shared gate tensor.
      neither      g = 0: only the scaling branch; no per-token statistic is computed.
    """

    def __init__(self, ndim, gate, ema_rate=0.01, **norm_kwargs):
        super().__init__(ndim, **norm_kwargs)
        self.taper_weight = nn.Parameter(torch.ones(ndim))  # gammatilde
        self.register_buffer('c', torch.zeros(()))          # frozen at taper start
        self.ema_num = EMA(ema_rate)   # E[|center(h) D_gamma|^2 / s(h)]
        self.ema_den = EMA(ema_rate)   # E[|center(h) D_gamma|^2]
        self.gate = gate               # g: one tensor shared by every tapered layer (not a buffer here)
        self.calibrating = True
        self.normalizing = True

    def forward(self, h):
        if self.calibrating:
            if self.training:
                self.update_calibration(h)
            return super().forward(h)
        y = self.affine(self.center(h), self.fixed_scale())  # the g = 0 map, one scaling
        if self.normalizing:
            y = torch.lerp(y, super().forward(h), self.gate)         # g Norm(h) + (1 - g) y
        return y

    def fixed_scale(self):
        """The per-feature scaling of the g = 0 map, c gammatilde; fold.py folds it away."""
        return self.c * self.taper_weight

    @torch.no_grad()
    def update_calibration(self, h):
        energy = (self.center(h) * self.weight).pow(2).sum(-1)  # |h D_gamma|^2 per token
        self.ema_num.observe((energy / self.scale(h).squeeze(-1)).mean())
        self.ema_den.observe(energy.mean())

    @torch.no_grad()
    def start_taper(self, delta=1e-8):
        """c = a_hat / (b_hat + delta) (eq. 4 with App. A.5's bias correction), frozen; gamma -> gammatilde."""
        if not self.calibrating:
            raise RuntimeError("start_taper() was already called on this layer")
        self.c.copy_(self.ema_num.corrected() / (self.ema_den.corrected() + delta))
        self.taper_weight.copy_(self.weight)
        self.calibrating = False


class TaperNorm(Taper, RMSNorm):
    """TaperNorm(h; g) = g h/r(h) D_gamma + (1 - g) c h D_gammatilde   (eq. 3)."""


class TaperLN(Taper, LayerNorm):
    """TaperLN(h; g) = beta + g (h - mu)/sigma D_gamma + (1 - g) c (h - mu) D_gammatilde   (App. B)."""


class FakeLN(LayerNorm):
    """
    Baroni et al.'s LayerNorm removal, run here as the comparison protocol. A real LayerNorm until
    removed; from then on FakeLN(h) = (h - mu_h) / sigma_avg D_gamma + beta, with sigma_avg a scalar.
    paths: how many consumers remove this layer at different steps. ln_1 has two, the Q/K path (0)
    and the V path (1): one gamma and beta, one sigma EMA, a sigma_avg per path; forward then returns
    one output per path. Where sigma_avg comes from (`sigma`; Baroni's EXP_RECOMPUTE_STD_ON_REAL):
      'live'         our choice: until removal every training forward moves an EMA of the batch-mean
                     sigma_h over all positions, with weight `momentum` on the old value (bias-corrected
                     here); each path freezes its own sigma_avg from it at its own removal.
      'live_shared'  his "1": the same EMA, but ln_1's paths share one sigma: a removed Q/K path follows
                     the EMA until the V path is removed, and both end with the same sigma_avg.
      'pretrained'   his default "0": one sigma per layer, measured on the model as it starts
                     (GPT.measure_pretrained_sigma) and used by every path at its removal; no EMA.
    """

    def __init__(self, ndim, eps=1e-5, bias=True, momentum=0.9, paths=1, sigma='live'):
        super().__init__(ndim, eps=eps, bias=bias)
        self.sigma = sigma
        self.sigma_ema = EMA(1.0 - momentum)
        self.register_buffer('sigma_avg', torch.zeros(paths))
        self.register_buffer('removed_at', torch.full((paths,), -1))  # the training step of removal
        self.removed = [False] * paths  # Python copy of removed_at >= 0, read without a device sync
        self.tracking = True  # False while activation checkpointing recomputes a forward

    def forward(self, h):
        if self.training and self.tracking and self.sigma != 'pretrained' and not all(self.removed):
            self.track(h)
        real = None if all(self.removed) else super().forward(h)
        ys = [self.affine(self.center(h), self.fixed_scale(p)) if removed else real
              for p, removed in enumerate(self.removed)]
        return ys[0] if len(ys) == 1 else tuple(ys)

    @torch.no_grad()
    def track(self, h):
        self.sigma_ema.step(self.scale(h).mean())
        if self.sigma == 'live_shared' and any(self.removed):  # the removed path reads the live sigma
            self.sigma_avg.fill_(self.sigma_ema.corrected(check=False))

    def fixed_scale(self, path=0):
        """The per-feature scaling of a removed path, gamma / sigma_avg; fold.py folds it away."""
        return self.weight / self.sigma_avg[path]

    @torch.no_grad()
    def remove(self, step, path=0):
        """Remove one path. A live sigma_avg is taken from the EMA now (under DDP the ranks' EMAs are
        averaged, so all agree); a pretrained one was measured before the first step."""
        if self.sigma == 'pretrained':
            if not self.sigma_avg.all():
                raise RuntimeError("fakeln_sigma='pretrained' needs GPT.measure_pretrained_sigma() before "
                                   "the first removal")
        else:
            sigma = self.sigma_ema.corrected()
            if dist.is_available() and dist.is_initialized():
                dist.all_reduce(sigma)  # gloo has no AVG
                sigma /= dist.get_world_size()
            if self.sigma == 'live_shared':
                self.sigma_avg.fill_(sigma)
            else:
                self.sigma_avg[path] = sigma
        self.removed_at[path] = step
        self.removed[path] = True


def fixed_target_loss(s, s_tgt, weight):
    """L_aux = lambda E_{b,t} (s(h) - s_tgt)^2   (eq. 5)."""
    return weight * (s - s_tgt).pow(2).mean()


def baroni_loss(sigma, idx, eot_token, weight):
    """lambda E_{b,t} (sigma - sigma_hat)^2, sigma_hat the detached mean over positions that are
    neither position 0 nor end-of-text (App. D): a moving target with no absolute scale."""
    keep = idx != eot_token
    keep[:, 0] = False
    sigma_hat = sigma[keep].mean().detach()
    return weight * (sigma - sigma_hat).pow(2).mean()


# DyT's alpha at init, from the DyT authors' LLaMA recipes (github jiachenzhu/DyT,
# other_tasks/LLaMA/README.md: attn_alpha_init_value / ffn_alpha_init_value / dec_alpha_init_value).
# Norms before attention start higher than those before the MLP and the final one, and all fall with
# width: d = 4096 (7B) 0.8 / 0.2 / 0.2, d = 5120 (13B) 0.6 / 0.15 / 0.15, d = 6656 and 8192 (34B, 70B)
# 0.2 / 0.05 / 0.05. Our widths (64-512; GPT-2 up to 1600) lie below every listed one, so we take the
# narrowest row, 7B's, rather than extrapolate a trend the source does not give.
# Their LLaMA also multiplies the token embedding by a learned scalar started at sqrt(d); we keep
# Baseline's embedding, so a DyT model differs from Baseline in its norms alone.
DYT_ALPHA = dict(attn=0.8, mlp=0.2, final=0.2)


class DyT:
    """
    Dynamic Tanh (Zhu et al. 2025), the other way to drop normalization, run here for comparison:
        DyT(h) = tanh(alpha h) D_gamma (+ beta),  alpha one learned scalar per layer.
    Elementwise, so no per-token statistic, but nonlinear: unlike a tapered norm at g = 0 it is no
    fixed linear map, and no fold takes it out of the graph. It stands in the place of the arch's norm
    and keeps that norm's gamma, beta and scale(h), so the logs report the same s(h).
    """

    def __init__(self, ndim, alpha, **norm_kwargs):
        super().__init__(ndim, **norm_kwargs)
        self.alpha = nn.Parameter(torch.full((1,), float(alpha)))

    def forward(self, h):
        return self.affine(torch.tanh(self.alpha * h), self.weight)


class DyTRMS(DyT, RMSNorm):
    """DyT in place of RMSNorm (arch='llama'): tanh(alpha h) D_gamma."""


class DyTLN(DyT, LayerNorm):
    """DyT in place of LayerNorm (arch='gpt2'): tanh(alpha h) D_gamma + beta."""


def device_mistake(device):
    """The sentence for a --device this repository does not take, naming the spelling it does take
    where there is one (the CPU is one device: 'cpu:0' is 'cpu')."""
    near = device.strip().lower()
    near = 'cpu' if re.fullmatch(r'cpu(:\d+)?', near) else near if re.fullmatch(r'cuda(:\d+)?', near) else None
    return (f"device={device!r} is not supported: " + (f"use device={near!r}" if near else
            "use 'cuda', 'cuda:N', 'cpu', or '' for CUDA when available"))


def pick_device(device):
    """The device a script runs on: '' is CUDA when this machine has it, else the CPU; 'cpu', 'cuda'
    and 'cuda:N' are checked to exist. A ValueError of one sentence says what to pass instead."""
    if not device:
        return 'cuda' if torch.cuda.is_available() else 'cpu'
    if not re.fullmatch(r'cpu|cuda(:\d+)?', device):
        raise ValueError(device_mistake(device))
    if device.startswith('cuda'):
        if not torch.cuda.is_available():
            raise ValueError("CUDA is not available on this machine: run with --device=cpu")
        index, count = int(device.partition(':')[2] or 0), torch.cuda.device_count()
        if index >= count:
            raise ValueError(f"device={device!r} names GPU {index}, but this machine has {count}: use "
                             f"cuda:0 to cuda:{count - 1}")
    return device


def replaced_hint(folder):
    """When folder holds no checkpoint because an --overwrite run was killed before its first one, the
    words that say so: the run it replaced waits in folder/.replaced, and a resume puts it back. Else None."""
    from configurator import script_path
    if os.path.isdir(os.path.join(folder, '.replaced')) and not os.path.isfile(os.path.join(folder, 'ckpt.pt')):
        return (f"an --overwrite run in {folder} was killed before its first checkpoint, and the run it replaced "
                f"waits in {folder}/.replaced: `python {script_path('train.py')} --init_from=resume --out_dir={shlex.quote(folder)}` puts it back")
    return None


def replaced_run(folder, script):
    """Stop with one sentence when folder is a run folder left by a killed --overwrite (replaced_hint)."""
    if replaced_hint(folder):
        raise SystemExit(f"cannot {script}: {replaced_hint(folder)}")


def broken_link(path, script):
    """Stop with one sentence when path, a checkpoint a script was told to read, is a symbolic link to
    nothing (else "no checkpoint at" would blame the folder)."""
    from configurator import dead_link
    if dead_link(path, 'the checkpoint'):
        raise SystemExit(f"cannot {script}: {dead_link(path, 'the checkpoint')}")


def load_checkpoint(path, device='cpu', mmap=False):
    """A checkpoint dict written by train.py or fold.py, or one clear sentence why not (mmap: the
    weights stay on disk until used, for a look at the rest)."""
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not a checkpoint file: name the ckpt.pt that train.py or fold.py wrote")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path}" + (f": {replaced_hint(os.path.dirname(path) or '.')}"
                                                              if replaced_hint(os.path.dirname(path) or '.') else ""))
    try:  # torch.load does not check the checksums its zip format stores: a flipped bit would load as a weight
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError):
        damaged = None  # not a zip at all: torch.load says so below
    if damaged:
        raise ValueError(f"{path} is damaged: {damaged} in it does not match the checksum stored with it (a disk "
                         f"error, or a copy gone wrong): use another copy, or an earlier checkpoint of the run")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=True, mmap=mmap)
    except Exception as e:
        from configurator import compression
        packed = compression(path)
        if packed and packed[0] != 'zip':  # torch's own format is a zip archive
            name, unpack, ending = packed
            if path.endswith(ending):
                raise ValueError(f"{path} is {name}-compressed: unpack it first (`{unpack} {shlex.quote(path)} > "
                                 f"{shlex.quote(path.removesuffix(ending))}`), and name {path.removesuffix(ending)}") from None
            raise ValueError(f"{path} is {name}-compressed: unpack it in place first (`{unpack} {shlex.quote(path)} > "
                             f"{shlex.quote(path + '.unpacked')} && mv {shlex.quote(path + '.unpacked')} "
                             f"{shlex.quote(path)}`)") from None
        raise ValueError(f"{path} could not be read as a checkpoint ({type(e).__name__}; a copy cut short, or a "
                         f"file of another program): use a ckpt.pt that train.py or fold.py wrote in full") from None
    if not isinstance(ckpt, dict) or not {'model', 'model_args'} <= ckpt.keys():
        raise ValueError(f"{path} is not a checkpoint of this repository (it has no model/model_args): name "
                         f"the ckpt.pt that train.py or fold.py wrote")
    foreign = unknown_fields(ckpt['model_args'])
    ours = isinstance(ckpt.get('config'), dict) and 'taper' in ckpt['config'] or 'run_id' in ckpt
    if foreign and ours:  # train.py's own fields beside them: another version of this repository wrote it
        raise ValueError(f"{path} was written by another version of this repository: its model_args hold "
                         f"{', '.join(foreign)}, which this model.py does not know: use the version of the repository "
                         f"that wrote it (a newer one: git pull), or train the run again with this one")
    if foreign:
        raise ValueError(f"{path} is not a checkpoint of this repository's model: its model_args hold "
                         f"{', '.join(foreign)}, which this model.py does not know (nanoGPT's checkpoints hold "
                         f"'bias'): use a ckpt.pt that this repository's train.py or fold.py wrote")
    return unwrapped(ckpt)


# What wrappers put before every weight's name: torch.compile's module, and (Distributed)DataParallel's.
WRAPPER_PREFIXES = ('_orig_mod.', 'module.')


def unwrapped(ckpt):
    """ckpt with the weights (and the optimizer state keyed by them) of a model saved from inside a
    wrapper under their own names, as nanoGPT's train.py strips torch.compile's '_orig_mod.'."""
    weights = ckpt['model']
    for prefix in WRAPPER_PREFIXES:
        if isinstance(weights, dict) and weights and all(isinstance(k, str) and k.startswith(prefix) for k in weights):
            ckpt['model'] = {k[len(prefix):]: v for k, v in weights.items()}
            optimizer = ckpt.get('optimizer')
            if isinstance(optimizer, dict) and isinstance(optimizer.get('state'), dict):
                optimizer['state'] = {k.removeprefix(prefix) if isinstance(k, str) else k: v
                                      for k, v in optimizer['state'].items()}
                for group in optimizer.get('param_groups', []):
                    group['params'] = [p.removeprefix(prefix) if isinstance(p, str) else p for p in group['params']]
            return unwrapped(ckpt)
    return ckpt


def unknown_fields(model_args):
    """The model_args keys that are no field of GPTConfig (a checkpoint of another program)."""
    return sorted(set(model_args) - set(GPTConfig.__dataclass_fields__)) if isinstance(model_args, dict) else []


def folded_note(ckpt, path=None):
    """For a folded checkpoint read from path that another run's model was folded into (a file copied
    between runs), or whose run has trained on since it was folded, the line to print before using it;
    None otherwise."""
    source = ckpt.get('folded_from')
    beside = os.path.join(os.path.dirname(path), 'ckpt.pt') if path else None
    if source and beside and os.path.isfile(beside) and os.path.realpath(beside) != os.path.realpath(path):
        try:
            run = torch.load(beside, map_location='cpu', weights_only=True, mmap=True)
            ours = {k: v for k, v in run['model_args'].items() if k != 'folded'}, run['config'].get('seed')
        except Exception:  # a run checkpoint that cannot be read says nothing about this file
            run, ours = {}, None
        theirs = {k: v for k, v in ckpt['model_args'].items() if k != 'folded'}, (ckpt.get('config') or {}).get('seed')
        if ours is not None and ours != theirs:
            return (f"note: {path} was not folded from the run beside it ({beside}: another model or seed) but "
                    f"from {source}: this is that model (fold.py --out_dir={os.path.dirname(path)} folds this run)")
        now = run.get('iter_num')
        if ours is not None and isinstance(now, int) and isinstance(ckpt.get('iter_num'), int) and now > ckpt['iter_num']:
            return (f"note: this model was folded from iter {ckpt['iter_num']} of this run (copied from {source}), "
                    f"and {beside} has since trained to iter {now}: fold it again (python fold.py --out_dir="
                    f"{os.path.dirname(path)} --out=<a new file>) to use the latest")
    if not (isinstance(source, str) and os.path.isfile(source)) or not isinstance(ckpt.get('iter_num'), int):
        return None
    try:
        now = torch.load(source, map_location='cpu', weights_only=True, mmap=True).get('iter_num')
    except Exception:  # the source is unreadable: the folded checkpoint stands on its own
        return None
    if not (isinstance(now, int) and now > ckpt['iter_num']):
        return None
    return (f"note: this model was folded from iter {ckpt['iter_num']} of {source}, which has since trained to iter "
            f"{now}: fold it again (python fold.py --out_dir={os.path.dirname(source)}) to use the latest")


def fold_hint(out_dir):
    """What to do when out_dir has no ckpt_folded.pt: fold the run, unless its model has no norm that
    folds (a Baseline, or DyT), whose own ckpt.pt is the model to use."""
    from configurator import script_path
    try:
        ckpt = torch.load(os.path.join(out_dir, 'ckpt.pt'), map_location='cpu', weights_only=True, mmap=True)
        args = ckpt['model_args']
    except Exception:  # no readable run beside it: folding it is still the way to a folded checkpoint
        ckpt, args = None, None
    if isinstance(args, dict) and (args.get('norm') == 'dyt' or args.get('taper', 'none') == 'none'
                                   and not args.get('fakeln')):
        kind = 'a DyT run' if args.get('norm') == 'dyt' else 'a Baseline run (its norms stay)'
        return f"{out_dir} is {kind}, which has no norm that folds, so no folded checkpoint: use its ckpt.pt (drop --ckpt)"
    if isinstance(ckpt, dict) and taper_note(ckpt):  # mid-taper, or FakeLN removals left: fold.py refuses it yet
        return (f"{out_dir}'s run has not reached its norm-free end (iter {ckpt.get('iter_num')}), which is what folds: "
                f"train it on with `python {script_path('train.py')} --init_from=resume --out_dir={shlex.quote(out_dir)}`, then fold it; or "
                f"sample its ckpt.pt as it is (drop --ckpt)")
    return f"fold the run first with `python {script_path('fold.py')} --out_dir={shlex.quote(out_dir)}`"


CKPT_ENDINGS = ('.pt', '.pth', '.ckpt', '.tar')  # what a checkpoint copied or renamed by hand may end in
FOLDED_WORDS = ('folded', 'reset')  # in the names of fold.py's files (ckpt_folded.pt; reproduce.py's ckpt_reset.pt)


IDENTITY = ('arch', 'norm', 'taper', 'fakeln', 'n_layer', 'n_head', 'n_embd', 'vocab_size', 'seed', 'init_from')


def mixed_run_note(path, ckpt):
    """A note when the checkpoint at path is not the run that its folder's config.json describes (a
    checkpoint copied in from another run): the folder's log and config are then another run's."""
    written = os.path.join(os.path.dirname(os.path.abspath(path)), 'config.json')
    try:
        with open(written, encoding='utf-8-sig') as f:
            folder = json.load(f)
    except (OSError, ValueError):
        return None
    held = ckpt.get('config') or {}
    if not isinstance(folder, dict) or 'taper' not in folder:  # not train.py's (an HF config.json)
        return None
    differ = [k for k in IDENTITY if k in folder and k in held and folder[k] != held[k]
              and not (k == 'init_from' and 'resume' in (folder[k], held[k]))]  # a resume's, before it kept the origin
    if not differ:
        return None
    k = differ[0]
    return (f"note: {path} is not the run its folder's config.json and log describe ({k} {held[k]!r} in the "
            f"checkpoint, {folder[k]!r} in config.json): a checkpoint copied in from another run? What follows "
            f"is the checkpoint's")


def run_checkpoint(out_dir, ckpt, script, folded_ok=True):
    """The checkpoint file --ckpt names in the run folder --out_dir, and a note, or None, when --ckpt is a
    path to a file in another folder: that file is read, and --out_dir is not. A --ckpt that names a run's
    folder stops the script (named by its verb, script) with the --out_dir that reads that run; folded_ok: the
    script reads a folded checkpoint too (all but fold.py)."""
    path = os.path.join(out_dir, ckpt)
    inside = [name for name in ('ckpt.pt', 'ckpt_folded.pt')[:1 + folded_ok]
              if os.path.isfile(os.path.join(path, name))]
    if os.path.isdir(path) and inside:  # --ckpt=<a run's folder>: the folder is --out_dir's to name
        raise SystemExit(f"cannot {script}: --ckpt={ckpt} names a run's folder, and --ckpt takes a checkpoint file "
                         f"in --out_dir: pass --out_dir={path} "
                         + ("and drop --ckpt (its ckpt.pt is read)" if inside[0] == 'ckpt.pt' else f"--ckpt={inside[0]}"))
    if os.path.dirname(ckpt) and os.path.realpath(os.path.dirname(path)) != os.path.realpath(out_dir) \
            and os.path.exists(path):  # a path to nothing: missing_hint says how --ckpt is read
        return path, (f"--ckpt={ckpt} is a path of its own, so that file is read, not a checkpoint in "
                      f"--out_dir={out_dir} (--ckpt names a file in --out_dir: --out_dir={os.path.dirname(path)} "
                      f"--ckpt={os.path.basename(path)})")
    return path, None


def hf_hint(folder, init_from, run_flag='out_dir'):
    """For a folder that holds an HF model (its config.json names a model_type) rather than a run, how
    to read it: with --init_from where the script takes one (init_from), or its run's folder for an
    export fold.py wrote; None for any other folder."""
    try:
        with open(os.path.join(folder, 'config.json'), encoding='utf-8-sig') as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or 'model_type' not in config:
        return None
    record = config.get('tapernorm_export')
    source = record.get('source') if isinstance(record, dict) and isinstance(record.get('source'), str) else None
    what = f"an HF export that fold.py --export_hf wrote from {source}" if source else "an HF model, not a run's folder"
    if source and not os.path.isfile(source):
        what, source = what + " (no longer there)", None
    run = (f"--ckpt={source}" if run_flag == 'ckpt' else f"--out_dir={os.path.dirname(source)}") if source else None
    if init_from:
        return f"{folder} is {what}: read it with --init_from={folder}" + (f", or its run with {run}" if run else "")
    return f"{folder} is {what}: " + (f"read its run with {run}" if run else "pass a run's folder (train one with train.py)")


def missing_hint(out_dir, ckpt, otherwise, init_from=False, run_flag='out_dir', folded_ok=True):
    """What to do when out_dir holds no checkpoint file ckpt: the checkpoint beside it that was likely
    meant (ckpt_folded for ckpt_folded.pt), else, for a folded one, fold_hint, else otherwise. init_from:
    the script reads an HF model with --init_from too; run_flag: the flag that names a run ('out_dir', or
    bench.py's 'ckpt'); folded_ok: the script reads a folded checkpoint too (all but fold.py)."""
    from configurator import elsewhere_remedy, split_paths
    path = os.path.join(out_dir, ckpt)
    several = split_paths(ckpt, base=out_dir)  # ckpt.pt,ckpt_folded.pt: several checkpoints of out_dir in one value
    if several:
        return (f"--ckpt={ckpt} names {len(several[0])} checkpoints in one: name one, --ckpt={several[0][0]}, and "
                f"run the script again for each of the others")
    if replaced_hint(os.path.dirname(path)):
        return replaced_hint(os.path.dirname(path))
    named, key = (path, 'ckpt') if run_flag == 'ckpt' else (out_dir, 'out_dir')
    if elsewhere_remedy(named, key):  # a README command run from another folder
        return elsewhere_remedy(named, key)
    if hf_hint(os.path.dirname(path), init_from, run_flag):  # an HF folder, or an export, given as a run
        return hf_hint(os.path.dirname(path), init_from, run_flag)
    folder = os.path.dirname(path)
    if os.path.isfile(os.path.join(folder, 'meta.json')) and any(
            os.path.isfile(os.path.join(folder, f'{split}.bin')) for split in ('train', 'val')):  # prepare's output
        flag = f"--ckpt=<a run's folder>/{os.path.basename(ckpt)}" if run_flag == 'ckpt' else "--out_dir=<a run's folder>"
        return (f"{folder} is a data folder (prepare's tokens and meta.json), not a run's: pass {flag}, a run "
                f"trained by train.py")
    if os.path.isdir(path):  # bench.py's --ckpt=<a run's folder>
        inside = os.path.join(path, 'ckpt.pt')
        return f"{path} is a folder: name the checkpoint file in it" + (f", --ckpt={inside}" if os.path.isfile(inside) else "")
    if os.path.exists(path):  # there, but no file: a named pipe, a device, a socket
        return f"{path} is not a regular file (a pipe or a device?): put the checkpoint file itself there"
    if os.path.dirname(ckpt) and run_flag == 'out_dir':
        name = os.path.basename(ckpt)
        if os.path.isfile(ckpt) and os.path.realpath(ckpt) != os.path.realpath(path):  # from the current folder
            return (f"--ckpt is read inside --out_dir, not from the current folder: for {ckpt}, pass "
                    f"--out_dir={os.path.dirname(ckpt)} --ckpt={name}")
        if os.path.isfile(os.path.join(out_dir, name)) and \
                os.path.basename(os.path.normpath(os.path.dirname(ckpt))) == os.path.basename(os.path.normpath(out_dir)):
            return f"--ckpt is read inside --out_dir, so name it alone: --ckpt={name}"  # the run's folder written again
        return (f"--ckpt is read inside --out_dir, so {path} was looked for: name a file in --out_dir, or pass the "
                f"folder of the run that holds the checkpoint as --out_dir")
    near = renamed_checkpoint(folder, os.path.basename(ckpt))
    if near:  # --ckpt is a name inside --out_dir, or (bench.py's) a path of its own
        meant = os.path.join(folder, near) if run_flag == 'ckpt' else os.path.relpath(os.path.join(folder, near), out_dir)
        return f"{folder} holds {near}: pass --ckpt={meant}"
    if os.path.basename(ckpt) == 'ckpt.pt' and os.path.isfile(os.path.join(folder, 'ckpt_folded.pt')):
        if not folded_ok:
            return (f"{folder} holds ckpt_folded.pt, a model already folded, and no ckpt.pt to fold: sample or "
                    f"evaluate the folded one as it is (sample.py --out_dir={folder} --ckpt=ckpt_folded.pt); folding "
                    f"or exporting needs the run's ckpt.pt, which is gone")
        meant = os.path.join(folder, 'ckpt_folded.pt') if run_flag == 'ckpt' else 'ckpt_folded.pt'
        return f"{folder} holds the folded model, ckpt_folded.pt, but no ckpt.pt: pass --ckpt={meant}"
    return fold_hint(out_dir) if 'folded' in ckpt else otherwise


def renamed_checkpoint(folder, name):
    """The file in folder that is most likely the checkpoint name, copied or renamed by hand (ckpt.pth,
    'ckpt (1).pt', name without its .pt), or None."""
    there = sorted(f for f in os.listdir(folder) if f != name and (f.endswith(CKPT_ENDINGS) or 'ckpt' in f)
                   and not f.endswith('.tmp') and os.path.isfile(os.path.join(folder, f))) if os.path.isdir(folder) else []
    if not any(word in name for word in FOLDED_WORDS):  # a training checkpoint: not a folded model in its place
        there = [f for f in there if not any(word in f for word in FOLDED_WORDS)]
    near = [f for f in there if f == name + '.pt'] or difflib.get_close_matches(name, there, n=1, cutoff=0.75)
    if not near and len(there) == 1 and 'ckpt' in there[0] and not any(word in name for word in FOLDED_WORDS):
        # the one checkpoint there, under a name of its own (a folded one missing: fold_hint says what to do)
        near = there  # (ckpt_backup.pt)
    return near[0] if near else None


def taper_note(ckpt):
    """For a checkpoint saved while its taper was under way, the line to print before using it at
    g = 0, where training has not been yet; for a FakeLN run whose removals are not all done, the
    line that it still normalizes; None otherwise."""
    cfg, it = ckpt.get('config') or {}, ckpt.get('iter_num')
    removed_at = [v for k, v in (ckpt.get('model') or {}).items() if k.endswith('removed_at') and torch.is_tensor(v)]
    left = sum(int((v < 0).sum()) for v in removed_at)
    if left:
        total = sum(v.numel() for v in removed_at)
        return (f"note: this FakeLN checkpoint (iter {it}) still has {left} of its {total} LayerNorm paths in place: "
                f"it is not the LayerNorm-free model yet, which only the run's end is (fakeln_start "
                f"{cfg.get('fakeln_start')})")
    if cfg.get('taper', 'none') == 'none' or it is None or it >= cfg.get('taper_end', 0):
        return None
    return (f"note: this checkpoint is from iter {it}, before its taper ends at iter {cfg['taper_end']}; used at "
            f"g = 0 it is a model training has not reached yet, so expect it to be worse than the run's end")


# -----------------------------------------------------------------------------
# Attention, MLP, block

class KVCache(nn.Module):
    """A static cache written in place at input_pos, so that a decode step has fixed shapes. It holds
    the key/value heads only: under grouped-query attention, n_kv_head of them."""

    def __init__(self, batch_size, max_seq_len, n_kv_head, head_size, dtype, device):
        super().__init__()
        shape = (batch_size, n_kv_head, max_seq_len, head_size)
        self.register_buffer('k', torch.zeros(shape, dtype=dtype, device=device), persistent=False)
        self.register_buffer('v', torch.zeros(shape, dtype=dtype, device=device), persistent=False)

    def update(self, input_pos, k, v):
        self.k.index_copy_(2, input_pos, k.to(self.k.dtype))
        self.v.index_copy_(2, input_pos, v.to(self.v.dtype))
        return self.k, self.v


def rope_frequencies(config):
    """RoPE's inverse frequencies theta^(-2i/hs), i < hs/2; with rope_scaling, Llama-3's rescaling:
    wavelengths longer than original_max_position_embeddings / low_freq_factor are stretched by
    factor, those shorter than .../high_freq_factor are kept, and the band between interpolates."""
    hs = config.n_embd // config.n_head
    inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, hs, 2).float() / hs)  # float32, as HF computes it
    if not config.rope_scaling:
        return inv_freq
    r = config.rope_scaling
    old, low, high = r['original_max_position_embeddings'], r['low_freq_factor'], r['high_freq_factor']
    wavelen = 2 * math.pi / inv_freq
    smooth = ((old / wavelen - low) / (high - low)).clamp(0, 1)  # 0: long waves, 1: short waves
    return (1 - smooth) * inv_freq / r['factor'] + smooth * inv_freq


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        bias = config.arch == 'gpt2' or config.attn_bias
        self.n_head = config.n_head
        self.n_kv_head = config.resolved('n_kv_head')  # grouped-query attention below n_head
        self.head_size = config.n_embd // config.n_head
        self.q_size, self.kv_size = config.n_embd, self.n_kv_head * self.head_size
        # the QKV projection, one matrix: rows [q | k | v] of q_size, kv_size and kv_size
        self.c_attn = nn.Linear(config.n_embd, self.q_size + 2 * self.kv_size, bias=bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=bias)
        self.dropout = config.dropout
        self.kv_cache = None

    def forward(self, x, rope=None, input_pos=None, mask=None, x_v=None):
        """x_v, when given, is the V path's own input (FakeLN removes ln_1 there separately)."""
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split([self.q_size, self.kv_size, self.kv_size], dim=2)
        if x_v is not None:
            v_rows = slice(self.q_size + self.kv_size, None)
            v = F.linear(x_v, self.c_attn.weight[v_rows], None if self.c_attn.bias is None else self.c_attn.bias[v_rows])
        q = q.view(B, T, self.n_head, self.head_size).transpose(1, 2)     # (B, nh, T, hs)
        k = k.view(B, T, self.n_kv_head, self.head_size).transpose(1, 2)  # (B, nkv, T, hs)
        v = v.view(B, T, self.n_kv_head, self.head_size).transpose(1, 2)
        gqa = self.n_kv_head != self.n_head  # each k/v head serves n_head / n_kv_head query heads
        if rope is not None:
            cos, sin = rope  # (T, hs)
            q = (q * cos + rotate_half(q) * sin).to(v.dtype)
            k = (k * cos + rotate_half(k) * sin).to(v.dtype)
        if input_pos is None:
            p = self.dropout if self.training else 0.0  # on the attention probabilities, as HF GPT-2
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True, enable_gqa=gqa)
        else:
            k, v = self.kv_cache.update(input_pos, k, v)                                   # (B, nkv, S, hs)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)  # mask: (T, S)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return F.dropout(self.c_proj(y), self.dropout, self.training)


class MLP(nn.Module):
    """GPT-2: c_proj(gelu_tanh(c_fc x))."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = config.dropout

    def forward(self, x):
        return F.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate='tanh')), self.dropout, self.training)


class SwiGLU(nn.Module):
    """LLaMA: w2(silu(w1 x) * w3 x)."""

    def __init__(self, config):
        super().__init__()
        hidden = config.resolved('mlp_hidden')
        self.w1 = nn.Linear(config.n_embd, hidden, bias=config.mlp_bias)  # gate
        self.w3 = nn.Linear(config.n_embd, hidden, bias=config.mlp_bias)  # up
        self.w2 = nn.Linear(hidden, config.n_embd, bias=config.mlp_bias)  # down
        self.dropout = config.dropout

    def forward(self, x):
        return F.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)), self.dropout, self.training)


def make_norm(config, tapered, gate, role=None, paths=1):
    """The norm at one place of the model; role ('attn', 'mlp', 'final') picks DyT's alpha, paths
    is FakeLN's number of outputs (ln_1's Q/K and V paths)."""
    plain = RMSNorm if config.norm == 'rmsnorm' else LayerNorm
    kwargs = dict(eps=config.norm_eps, bias=config.norm_bias)
    if config.norm == 'dyt':
        return (DyTRMS if config.arch == 'llama' else DyTLN)(config.n_embd, DYT_ALPHA[role], **kwargs)
    if (tapered or config.fakeln) and config.folded:
        return nn.Identity()
    if config.fakeln:
        return FakeLN(config.n_embd, momentum=config.fakeln_momentum, paths=paths, sigma=config.fakeln_sigma,
                      **kwargs)
    if not tapered:
        return plain(config.n_embd, **kwargs)
    taper = TaperNorm if config.norm == 'rmsnorm' else TaperLN
    return taper(config.n_embd, gate, ema_rate=config.ema_rate, **kwargs)


class Block(nn.Module):
    """Pre-norm: H += Attn(Norm_A(H)); H += MLP(Norm_M(H))."""

    def __init__(self, config, gate):
        super().__init__()
        internal = config.taper in ('internal', 'all')
        self.split_v = config.fakeln and not config.folded  # ln_1 gives the Q/K and V paths apart
        self.ln_1 = make_norm(config, internal, gate, 'attn', paths=2 if self.split_v else 1)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = make_norm(config, internal, gate, 'mlp')
        self.mlp = SwiGLU(config) if config.arch == 'llama' else MLP(config)

    def forward(self, x, rope=None, input_pos=None, mask=None):
        x_qk, x_v = self.ln_1(x) if self.split_v else (self.ln_1(x), None)
        x = x + self.attn(x_qk, rope, input_pos, mask, x_v)
        x = x + self.mlp(self.ln_2(x))
        return x


# -----------------------------------------------------------------------------

class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        # The gate g (eq. 3): one tensor read by every tapered layer, so a compiled graph sees a new
        # value without recompiling. It is owned here; _apply below keeps the layers pointing at it.
        self.register_buffer('gate', torch.ones(()))
        self.register_buffer('taper_started', torch.zeros((), dtype=torch.bool))
        self.register_buffer('s_tgt', torch.zeros(()))   # the fixed target of eq. 5
        self.s_ema = EMA(config.ema_rate)                 # EMA of the batch-mean s(h) while g = 1
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            h=nn.ModuleList([Block(config, self.gate) for _ in range(config.n_layer)]),
            ln_f=make_norm(config, config.taper == 'all', self.gate, 'final'),
        ))
        if config.arch == 'gpt2':
            self.transformer.wpe = nn.Embedding(config.block_size, config.n_embd)
        else:
            inv_freq = rope_frequencies(config)
            angles = torch.outer(torch.arange(config.block_size).float(), inv_freq).repeat(1, 2)
            self.register_buffer('rope_cos', angles.cos(), persistent=False)  # (block_size, hs)
            self.register_buffer('rope_sin', angles.sin(), persistent=False)
        # A folded All-Taper model carries the final g = 0 map in its head, so the head is its own
        # matrix (with beta folded into a bias for GPT-2).
        folded_head = config.folded and config.final_norm_removed
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=folded_head and config.norm_bias)
        if config.tied_head and not folded_head:
            self.transformer.wte.weight = self.lm_head.weight  # tied head
        self.causal_mask = None
        self.started = False  # Python copy of taper_started, read every step without a device sync
        self.grad_checkpoint = False  # recompute each block in backward: less memory for GPT-2 XL
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith(('c_proj.weight', 'w2.weight')):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        self.register_load_state_dict_post_hook(lambda module, keys: module._sync_flags())

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def _apply(self, fn, recurse=True):
        # .to()/.cuda()/.double() replace buffers module by module; re-share the moved gate.
        super()._apply(fn, recurse)
        for m in self.tapered_norms():
            m.gate = self.gate
        return self

    def tapered_norms(self):
        return [m for m in self.modules() if isinstance(m, Taper)]

    def fakelns(self):
        return [m for m in self.modules() if isinstance(m, FakeLN)]

    def get_num_params(self, non_embedding=True):
        """Parameters counted once (a tied head is the embedding); non_embedding drops the position table."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding and self.config.arch == 'gpt2':
            n -= self.transformer.wpe.weight.numel()
        return n

    # --- the taper schedule ----------------------------------------------------------------

    def set_gate(self, g):
        """Set the shared gate g in [0, 1]; at g = 0 the normalized branches are skipped."""
        g = float(g)
        if not 0.0 <= g <= 1.0:
            raise ValueError(f"the gate must lie in [0, 1], got {g}")
        if g < 1.0 and not self.started and self.tapered_norms():
            raise RuntimeError("call start_taper() before lowering the gate: c is not calibrated yet")
        self.gate.fill_(g)
        for m in self.tapered_norms():
            m.normalizing = g > 0.0

    @torch.no_grad()
    def start_taper(self):
        """At taper start: every tapered layer sets and freezes c and copies gamma -> gammatilde;
        s_tgt is frozen to the bias-corrected EMA of the pre-logit scale (Sec. 3.4-3.5)."""
        if self.started:
            raise RuntimeError("start_taper() was already called on this model")
        for m in self.tapered_norms():
            m.start_taper()
        if self.config.aux_loss == 'fixed':
            self.s_tgt.copy_(self.s_ema.corrected())
        self.taper_started.fill_(True)
        self.started = True

    @torch.no_grad()
    def step_emas(self):
        """Call once per optimizer step: moves every calibration EMA and s_tgt's while g = 1 by the
        mean of the step's micro-batches, averaged over DDP ranks. A mean, so activation
        checkpointing's recomputed forwards, which observe the same values again, change nothing.
        (FakeLN's sigma EMA moves in every forward instead.)"""
        if self.started:
            return
        emas = [e for m in self.tapered_norms() for e in (m.ema_num, m.ema_den)]
        if self.config.aux_loss == 'fixed':
            emas.append(self.s_ema)
        if not emas:
            return
        x = torch.stack([e.pending_mean() for e in emas])
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(x)  # gloo has no AVG
            x /= dist.get_world_size()
        for e, v in zip(emas, x):
            e.step(v)

    def _sync_flags(self):
        """After loading a state dict: the Python copies of the taper and FakeLN phases."""
        self.started, g = bool(self.taper_started.item()), self.gate.item()
        for m in self.tapered_norms():
            m.calibrating = not self.started
            m.normalizing = g > 0.0
        for m in self.fakelns():
            m.removed = (m.removed_at >= 0).tolist()

    @torch.no_grad()
    def measure_pretrained_sigma(self, batches):
        """
        fakeln_sigma='pretrained': before the first step, every FakeLN's sigma_avg (all its paths) is
        the spread of its own input in the model as it starts, in eval mode, over the token batches
        given (B, T), positions 1..T-1:
            sigma = sqrt( sum_{b, t>=1, i} (h_bti - mu_bt)^2 / (N - 1) ),   N = B (T - 1) d.
        This is Baroni et al.'s statistic (generate_std_dict.py: torch's std over every element of
        positions 1.. of TransformerLens's residual stream, whose centered writing weights make each
        token's vector zero-mean): the root of the mean per-token variance, not the mean of sigma_h,
        and no eps. Theirs comes from one random training block; ours from the step's batch. Under
        DDP the ranks' sums are added, so every rank holds the same sigma_avg.
        """
        norms = self.fakelns()
        sums = torch.zeros(len(norms), 2, dtype=torch.float64, device=self.gate.device)  # sum of squares, N

        def observe(i):
            def hook(module, args):
                h = args[0][:, 1:].double()
                sums[i, 0] += (h - h.mean(-1, keepdim=True)).pow(2).sum()
                sums[i, 1] += h.numel()
            return hook

        hooks = [m.register_forward_pre_hook(observe(i)) for i, m in enumerate(norms)]
        was_training = self.training
        self.eval()
        try:
            for idx in batches:
                self(idx)  # the model's own forward: FSDP gathers its weights there
        finally:
            self.train(was_training)
            for hook in hooks:
                hook.remove()
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sums)
        for m, (squares, n) in zip(norms, sums):
            m.sigma_avg.fill_(torch.sqrt(squares / (n - 1)))

    # --- forward ---------------------------------------------------------------------------

    def trunk(self, idx, input_pos=None):
        """The residual stream H^(L,0) before the final norm, (B, T, d)."""
        B, T = idx.size()
        if T > self.config.block_size:
            raise ValueError(f"sequence of length {T} exceeds block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device) if input_pos is None else input_pos
        mask = None if input_pos is None else self.causal_mask[input_pos]  # (T, S)
        x = self.transformer.wte(idx)
        rope = None
        if self.config.arch == 'gpt2':
            x = x + self.transformer.wpe(pos)
        else:
            rope = (self.rope_cos[pos], self.rope_sin[pos])
        x = F.dropout(x, self.config.dropout, self.training)
        for block in self.transformer.h:
            if self.grad_checkpoint and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, rope, input_pos, mask, use_reentrant=False,
                                                      context_fn=lambda: (nullcontext(), self.recomputing()))
            else:
                x = block(x, rope, input_pos, mask)
        return x

    def prelogit_scale(self, h):
        """s(h) of the pre-logit stream h, (B, T): ln_f's r(h) or sigma_h (Sec. 3.5). A folded All-Taper
        or FakeLN model has no ln_f left; a plain norm of its kind gives the same statistic."""
        norm = self.transformer.ln_f
        if isinstance(norm, nn.Identity):
            norm = (RMSNorm if self.config.norm == 'rmsnorm' else LayerNorm)(1, eps=self.config.norm_eps)
        return norm.scale(h).squeeze(-1)

    @contextmanager
    def recomputing(self):
        """Activation checkpointing runs a block's forward again in backward: FakeLN's sigma EMA, which
        moves once per forward, must not count it twice. (The recompute replays the forward's RNG, so
        dropout masks match.)"""
        for m in self.fakelns():
            m.tracking = False
        try:
            yield
        finally:
            for m in self.fakelns():
                m.tracking = True

    def forward(self, idx, targets=None, return_stats=False):
        """
        logits, loss = model(idx, targets). loss = CE + L_aux is what training minimizes; with
        return_stats=True a third value holds detached tensors for the logs: ce, aux, the mean
        logit L2 norm and the mean pre-logit scale s(h). Without targets, loss is None.
        """
        h = self.trunk(idx)
        logits = self.lm_head(self.transformer.ln_f(h))
        if targets is None:
            return (logits, None, {}) if return_stats else (logits, None)
        ce = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        aux = torch.zeros((), device=idx.device)
        s = None
        if self.config.aux_loss != 'none' or return_stats:
            s = self.prelogit_scale(h)
        if self.config.aux_loss == 'fixed':
            if self.started:
                aux = fixed_target_loss(s, self.s_tgt, self.config.aux_weight)
            elif self.training:
                self.s_ema.observe(s.mean())  # s_tgt is tracked while g = 1 and applied after
        elif self.config.aux_loss == 'baroni':
            aux = baroni_loss(s, idx, self.config.eot_token, self.config.aux_weight)
        loss = ce + aux
        if not return_stats:
            return logits, loss
        # One stacked tensor, detached once: under torch.compile, returning ce.detach() beside
        # loss = ce + aux drops the loss's autograd graph.
        values = torch.stack([ce, aux, s.mean(), logits.float().norm(dim=-1).mean()]).detach()
        return logits, loss, dict(zip(('ce', 'aux', 'prelogit_scale', 'logit_norm'), values.unbind()))

    # --- decoding with a static KV cache (gpt-fast style) --------------------------------------

    def setup_cache(self, batch_size, max_seq_len, dtype=None):
        """Allocate each layer's cache once; a decode step then writes at input_pos in place."""
        if max_seq_len > self.config.block_size:
            raise ValueError(f"prompt + new tokens = {max_seq_len} exceeds block_size "
                             f"{self.config.block_size}")
        weight = self.lm_head.weight
        dtype = dtype or weight.dtype
        for block in self.transformer.h:
            attn = block.attn
            attn.kv_cache = KVCache(batch_size, max_seq_len, attn.n_kv_head, attn.head_size, dtype, weight.device)
        self.causal_mask = torch.ones(max_seq_len, max_seq_len, dtype=torch.bool,
                                      device=weight.device).tril()

    def decode(self, idx, input_pos):
        """Logits of the last position of idx, whose tokens sit at input_pos; fills the cache."""
        h = self.trunk(idx, input_pos)[:, -1:, :]
        return self.lm_head(self.transformer.ln_f(h))[:, -1, :]  # (B, V)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, vocab=None):
        """Continue idx (B, T) by max_new_tokens tokens; temperature 0 is greedy decoding. vocab: draw
        only ids below it (the tokenizer's, when the embedding has more rows). Runs in eval mode (no
        dropout, no statistics moved) and leaves the model's mode as it was."""
        was_training = self.training
        self.eval()
        try:
            return self._generate(idx, max_new_tokens, temperature, top_k, vocab)
        finally:
            self.train(was_training)

    def _generate(self, idx, max_new_tokens, temperature, top_k, vocab):
        B, T = idx.size()
        L = self.config.block_size
        if T + max_new_tokens > L:  # past the context: each token from the last L, as nanoGPT does (no cache)
            for _ in range(max_new_tokens):
                logits = self(idx[:, -L:])[0][:, -1, :]
                idx = torch.cat([idx, self._pick(logits, temperature, top_k, vocab)], dim=1)
            return idx
        self.setup_cache(B, T + max_new_tokens)
        logits = self.decode(idx, torch.arange(T, device=idx.device))
        out = [idx]
        for i in range(max_new_tokens):
            next_id = self._pick(logits, temperature, top_k, vocab)
            out.append(next_id)
            if i + 1 < max_new_tokens:
                logits = self.decode(next_id, torch.tensor([T + i], device=idx.device))
        return torch.cat(out, dim=1)

    @staticmethod
    def _pick(logits, temperature, top_k, vocab=None):
        """The next token of each row from its last logits: argmax at temperature 0, else sampled."""
        logits = logits[:, :vocab]  # ids past the tokenizer's are never drawn
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)
        scaled = logits / temperature
        if not torch.isfinite(scaled).all():  # a temperature so small that the logits overflow: shifted by their
            scaled = (logits - logits.max(dim=-1, keepdim=True).values) / temperature  # maximum, the same softmax
        logits = scaled
        if top_k is not None:
            v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
            logits[logits < v[:, [-1]]] = -float('inf')
        return torch.multinomial(F.softmax(logits.float(), dim=-1), num_samples=1)

    # --- checkpoints ---------------------------------------------------------------------------

    @classmethod
    def from_checkpoint(cls, path, device='cpu', **expected):
        """
        Rebuild the model a checkpoint of train.py (or fold.py) holds, from its own config. path may
        also be a checkpoint dict already loaded with load_checkpoint. expected names config fields
        the caller relies on (e.g. arch='llama'); a checkpoint that differs, or is no checkpoint of
        this repository, raises a ValueError of one sentence.
        """
        ckpt = path if isinstance(path, dict) else load_checkpoint(path, device)
        path = 'the checkpoint' if isinstance(path, dict) else path
        args = ckpt['model_args']
        if not isinstance(args, dict) or not isinstance(ckpt['model'], dict):
            raise ValueError(f"{path} holds a damaged checkpoint (model_args or model is not a dict)")
        fields = GPTConfig.__dataclass_fields__
        for key, value in expected.items():
            held = args.get(key, fields[key].default if key in fields else None)  # older checkpoints lack newer fields
            if held != value:
                raise ValueError(f"{path} holds a model with {key}={held!r}, not {key}={value!r}")
        if unknown_fields(args):
            raise ValueError(f"{path} is not a checkpoint of this repository's model: its model_args hold "
                             f"{', '.join(unknown_fields(args))}, which this model.py does not know")
        if any('.ln_1v.' in k for k in ckpt['model']):
            raise ValueError(f"{path} is a FakeLN model of an older layout (a separate ln_1v with its "
                             f"own gamma and beta) that this model.py no longer builds: rerun its fine-tune")
        try:
            model = cls(GPTConfig(**args))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path} holds a damaged model config (its model_args: {e})") from None
        try:
            model.load_state_dict(ckpt['model'])
        except RuntimeError as e:
            detail = str(e).splitlines()[1].strip()
            raise ValueError(f"{path}: its weights do not fit its own config "
                             f"({detail if len(detail) < 300 else detail[:300] + ' ...'}): the file was changed "
                             f"after it was written; use another copy, or an earlier checkpoint") from None
        broken = [k for k, v in model.state_dict().items() if v.is_floating_point() and not v.isfinite().all()]
        if broken:  # train.py never saves such a state (check_state); a file from elsewhere may hold one
            raise ValueError(f"{path} holds non-finite weights ({broken[0]}): use an earlier checkpoint of "
                             f"the run, or train it again")
        return model.to(device)

    # --- training helpers --------------------------------------------------------------------

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type, decay_fakeln_weight=False):
        """AdamW; matrices and embeddings decay, gains and biases (gamma, gammatilde, beta) do not, but
        with decay_fakeln_weight FakeLN's gamma does, as under Baroni et al.'s HF Trainer (transformers
        4.48 exempts only nn.LayerNorm members and names holding "bias"; their FakeLN is no nn.LayerNorm)."""
        params = [p for p in self.parameters() if p.requires_grad]
        gains = {id(m.weight) for m in self.fakelns()} if decay_fakeln_weight else set()
        decays = [p.dim() >= 2 or id(p) in gains for p in params]
        groups = [dict(params=[p for p, d in zip(params, decays) if d], weight_decay=weight_decay),
                  dict(params=[p for p, d in zip(params, decays) if not d], weight_decay=0.0)]
        fused = device_type == 'cuda'
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, fused=fused)

    def estimate_mfu(self, fwdbwd_per_iter, dt, peak_flops):
        """Model FLOPs utilization: achieved FLOP/s over peak_flops (e.g. 989e12 for an H100 in bf16)."""
        cfg = self.config
        L, H, Q, T = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head, cfg.block_size
        flops_per_token = 6 * self.get_num_params() + 12 * L * H * Q * T
        return flops_per_token * T * fwdbwd_per_iter / dt / peak_flops


def greedy_step(decode, token, input_pos):
    """
    One greedy decoding step on static buffers, in place: token (B, 1) becomes the argmax of the
    logits that decode(token, input_pos) returns, and input_pos (1,) moves on by one. decode is
    GPT.decode (or a compiled copy of it). Every input and output stays where it is, so bench.py
    captures this whole step once as a CUDA graph and replays it per token; elsewhere it is a plain
    call.
    """
    logits = decode(token, input_pos)
    token.copy_(logits.argmax(dim=-1, keepdim=True))
    input_pos.add_(1)
    return logits


if __name__ == '__main__':
    from configurator import run_as_module
    run_as_module(__doc__, "model.py is a module the scripts import, not a command: train a model with `python train.py`, "
          "or sample one with `python sample.py --out_dir=<run>`")
