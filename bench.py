"""
KV-cached decoding throughput, the paper's Table 2 (Sec. 4.2): Baseline (RMSNorm), Internal-Taper
unfused (the g = 0 scalings as explicit elementwise ops) and Internal-Taper fused (folded into the
weights, norms gone), and beside them DyT (Zhu et al. 2025), the norm-free model no fold can simplify.
With --train, the cost of one training step instead, which the paper does not report.

    python bench.py                          # the paper's table (B = 1, 4; T = 128, 256), eager
    python bench.py --fused                  # fused vs Baseline only
    python bench.py --compile --cuda_graph   # also torch.compile, a captured decode step, and both
    python bench.py --batch_size=1 --prompt_len=128 --device=cpu --hf   # + transformers' Llama
    python bench.py --train --compile        # one optimizer step in each phase of a taper, and DyT
    python bench.py --init_from=HuggingFaceTB/SmolLM2-135M --fused   # an HF Llama's shape and weights

The model is the 30M d = 512 TinyStories config with random weights (speed does not depend on their
values), --ckpt=path for a tapered checkpoint, or --init_from an HF Llama-family name or folder (its
weights are the Baseline; the tapered variants are it, calibrated on random tokens and at g = 0). bf16 + TF32 on CUDA, float32 on the CPU. Each row:
a warm-up, then `repeats` timed generations of max_new_tokens greedy tokens after a prompt of
prompt_len; prefill and decode are timed apart, the device synchronized before each clock read, and
the median reported. tok/s = generated tokens x batch / decode time. How much folding buys depends
on launch overhead, so every mode gets its own table. The last line is JSON for scripts.

--train times one optimizer step of train.py's loop (forward with the logged statistics, backward,
grad clip, AdamW, step_emas) on a random batch of batch_size x block_size tokens (16 x 512 by
default, App. C) for Baseline, DyT, and Internal-Taper and All-Taper (+aux) in each phase: calibrating
(g = 1 before taper start, eq. 4's statistics gathered), mid-taper (g = 0.5, both branches) and g = 0.
All variants take turns within every repeat; x is the median over repeats of each repeat's step-time
ratio to Baseline, so drift of a shared machine cancels. On a CPU that others use too, --cpu_time
(with OMP_NUM_THREADS=1) counts the process's own CPU time instead of wall time, in every table.
"""

import json
import os
import statistics
import sys
import time
from contextlib import nullcontext
from dataclasses import replace

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import torch

from fold import fold_model
from hf import from_pretrained, llama_hf_config, load_hf, pretrained_config
from configurator import FlagError, configure_globals, dead_link, flag
from model import GPT, GPTConfig, greedy_step, load_checkpoint, missing_hint, pick_device

# -----------------------------------------------------------------------------
ckpt = flag('', "a tapered checkpoint to time ('': the config below with random weights)")
init_from = flag('', "or an HF GPT-2 or Llama-family name or save_pretrained folder (hf.py) ('': none)")
n_layer = flag(8, "blocks of the random-weight model", min=1)
n_head = flag(16, "attention heads of the random-weight model", min=1)
n_embd = flag(512, "width d of the random-weight model", min=1)
vocab_size = flag(10000, "vocabulary of the random-weight model", min=1)
block_size = flag(512, "context of the random-weight model; --train's sequence length", min=1)
batch_size = flag(0, "sequences per batch (0: the paper's 1 and 4 when decoding, 16 with --train)", min=0)
prompt_len = flag(0, "prompt tokens (0: the paper's 128 and 256)", min=0)
max_new_tokens = flag(128, "greedy tokens generated per timed run", min=1)
repeats = flag(5, "timed runs per row, after one warm-up; the median is reported", min=1)
fused = flag(False, "the shortcut: Baseline and fused only")
compile = flag(False, "add a torch.compile table")
cuda_graph = flag(False, "add a table with the whole decode step captured as one CUDA graph")
hf = flag(False, "also time transformers' LlamaForCausalLM.generate on the Baseline config")
train = flag(False, "time one training step per variant instead of decoding")
cpu_time = flag(False, "on one CPU thread (OMP_NUM_THREADS=1): count the process's CPU time, not wall time")
device = flag('', "'cuda', 'cuda:N' or 'cpu' ('': cuda when available)")
dtype = flag('', "'': bfloat16 on CUDA, float32 on the CPU", choices=('', 'bfloat16', 'float32'))
seed = flag(0, "seeds the random weights and tokens", min=0, max=2**63 - 1)
# -----------------------------------------------------------------------------


def fail(message):
    """Stop with one sentence that says what to do."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def gpt2_run(what, origin):
    """The sentence for a run of GPT-2's layout, which bench.py times only as an HF model: the one a
    fine-tune started from (origin, its init_from), or none for a run trained from scratch."""
    return (f"{what} holds a GPT-2-layout model: bench.py times runs of the Llama layout (TinyStories runs), and a "
            f"GPT-2 only as an HF model, " + (f"e.g. --init_from={origin}, the model this run was fine-tuned from"
                                             if origin not in ('scratch', 'resume') else
                                             "which a run trained from scratch is not (train with --arch=llama to "
                                             "time one)"))


SHAPE = {key: globals()[key].default for key in ('n_layer', 'n_head', 'n_embd', 'vocab_size', 'block_size')}
try:
    configure_globals(globals(), sys.argv[1:])
    device = pick_device(device)
except (FlagError, ValueError) as e:
    fail(str(e))
if cuda_graph and not device.startswith('cuda'):
    fail("--cuda_graph captures CUDA graphs: run on a CUDA device, or drop --cuda_graph")
if train and (cuda_graph or hf or ckpt or fused or init_from):
    fail("--train times random-weight models in eager mode and with --compile: drop "
         "--cuda_graph, --hf, --ckpt, --init_from and --fused")
if train and (prompt_len or max_new_tokens != 128):
    fail("--train times a training step on batch_size x block_size tokens, with no prompt and nothing "
         "generated: drop --prompt_len and --max_new_tokens (--block_size sets the sequence length)")
if ckpt and init_from:
    fail("--ckpt and --init_from both name the model: pass one")
if hf and ckpt:
    fail("--hf times transformers' Llama on the random-weight or --init_from model's shape: drop --ckpt or --hf")
if cpu_time and (device != 'cpu' or torch.get_num_threads() != 1):
    fail("--cpu_time counts one CPU thread: run with OMP_NUM_THREADS=1 and --device=cpu")
moved = [key for key, default in SHAPE.items() if globals()[key] != default]
if (ckpt or init_from) and moved:
    fail(f"the model's shape comes from --{'ckpt' if ckpt else 'init_from'}: drop --{', --'.join(moved)}")
if ckpt and dead_link(ckpt, 'the checkpoint'):
    fail(f"cannot time it: {dead_link(ckpt, 'the checkpoint')}")
if ckpt and not os.path.isfile(ckpt):
    fail(f"no checkpoint at {ckpt}: " + missing_hint(os.path.dirname(ckpt) or '.', os.path.basename(ckpt),
                                                     "--ckpt names the checkpoint file of a tapered run, e.g. out/ckpt.pt",
                                                     run_flag='ckpt'))
if init_from.strip().lower() in ('resume', 'scratch'):
    fail(f"bench.py has no --init_from={init_from}: it times a run's checkpoint (--ckpt=<run>/ckpt.pt), an HF "
         f"model (--init_from=<name or folder>) or random weights (neither)")
if init_from and os.path.isfile(os.path.join(init_from, 'ckpt.pt')):
    try:  # a GPT-2-layout run is timed only as an HF model: the one it was fine-tuned from
        held = torch.load(os.path.join(init_from, 'ckpt.pt'), map_location='cpu', weights_only=True, mmap=True)
        run_arch, origin = held['model_args'].get('arch'), (held.get('config') or {}).get('init_from', 'scratch')
        run_config = held.get('config') or {}
        untapered = run_config.get('taper') == 'none' or held.get('iter_num', 0) < run_config.get('taper_start', 0)
    except Exception:  # an unreadable checkpoint: --ckpt names it, and loading it there says what is wrong
        run_arch, origin, untapered = None, 'scratch', False
    if run_arch == 'gpt2':
        fail(gpt2_run(f"{init_from} is a run of this repository, not an HF model, and", origin))
    if untapered:  # its --ckpt would be refused next: bench.py times a tapered model, folded, beside a Baseline
        fail(f"{init_from} is a run of this repository, not an HF model, and not a tapered one past its taper start, "
             f"which is what bench.py times (unfused and folded, beside a Baseline of its shape): pass --ckpt=<an "
             f"Internal-Taper or All-Taper run>/ckpt.pt, or neither flag for random weights")
    fail(f"{init_from} is a run of this repository, not an HF model: time its checkpoint with "
         f"--ckpt={os.path.join(init_from, 'ckpt.pt')}")
if init_from and os.path.isfile(init_from) and init_from.endswith('.pt'):
    training = os.path.join(os.path.dirname(init_from), 'ckpt.pt')  # a folded one's run: bench.py folds it itself
    fail(f"--init_from={init_from} names a checkpoint file, and bench.py times a run's checkpoint with "
         f"--ckpt={training if os.path.isfile(training) else init_from}")
if init_from:
    try:
        hf_arch = pretrained_config(init_from).arch
    except (OSError, ValueError, KeyError) as e:
        fail(f"cannot benchmark: {e}")
    if hf and hf_arch != 'llama':
        fail(f"--hf times transformers' LlamaForCausalLM, and {init_from} is a GPT-2: drop --hf")
if not (ckpt or init_from):
    try:
        GPTConfig(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=vocab_size, block_size=block_size)
    except ValueError as e:
        fail(f"{e}: pick another --n_embd or --n_head" if 'parameters' not in str(e) else f"{e}: pick a smaller model")
    if (n_embd // n_head) % 2:
        fail(f"the head size n_embd/n_head={n_embd // n_head} is odd: RoPE rotates pairs of features, so "
             f"pick an even head size")
if hf:
    try:
        import transformers  # noqa: F401
    except ImportError:
        fail("--hf needs the transformers package: `pip install transformers`, or drop --hf")
on_cuda = device.startswith('cuda')
dtype = getattr(torch, dtype or ('bfloat16' if on_cuda else 'float32'))
if on_cuda:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
torch._dynamo.config.recompile_limit = 64  # decode compiles once per variant and batch shape
torch.manual_seed(seed)
# On a CPU shared with other work, wall time also counts the time the OS gives to others; the CPU
# time of a one-thread process counts only this step's own work.
clock = time.process_time if cpu_time else time.perf_counter


def sync():
    if on_cuda:
        torch.cuda.synchronize()


@torch.no_grad()
def build_variants():
    """{'baseline', 'dyt', 'unfused', 'fused'} -> GPT, on the device in the benchmark dtype."""
    if ckpt:
        try:
            held = load_checkpoint(ckpt)
            tapered = GPT.from_checkpoint(held)
        except (FileNotFoundError, ValueError) as e:
            fail(f"cannot benchmark: {e}")
        if tapered.config.arch != 'llama':
            fail(gpt2_run(ckpt, (held.get('config') or {}).get('init_from', 'scratch')))
        if tapered.config.folded:
            fail(f"{ckpt} is a folded checkpoint (fold.py's): bench.py folds the run's own model itself, to time it "
                 f"unfused and fused; pass --ckpt=<the run>/ckpt.pt")
        if not tapered.started or not tapered.tapered_norms():
            fail(f"{ckpt} is not a tapered model past its taper start: pass the ckpt.pt of an Internal-Taper "
                 f"or All-Taper run from taper_start on")
    else:
        if init_from:
            try:
                tapered = from_pretrained(init_from, taper='internal')
            except (OSError, ValueError, KeyError) as e:
                fail(f"cannot benchmark: {e}")
        else:
            tapered = GPT(GPTConfig(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=vocab_size,
                                    block_size=block_size, taper='internal'))
        tapered.train()(torch.randint(0, tapered.config.vocab_size, (2, min(64, tapered.config.block_size))))  # calibration at g = 1, then c
        tapered.step_emas()
        tapered.start_taper()
    tapered.set_gate(0.0)
    baseline = replace(tapered.config, taper='none', aux_loss='none')
    variants = dict(baseline=from_pretrained(init_from) if init_from else GPT(baseline),
                    dyt=GPT(replace(baseline, norm='dyt')), unfused=tapered, fused=fold_model(tapered))
    if fused:
        variants = {name: variants[name] for name in ('baseline', 'fused')}
    return {name: m.to(device=device, dtype=dtype).eval() for name, m in variants.items()}


def make_step(model, mode):
    """The decode step: (token (B, 1), position (1,)) -> logits (B, V), writing the cache in place."""
    if mode == 'eager':
        return model.decode
    return torch.compile(model.decode, fullgraph=True)


class GreedyDecode:
    """Greedy tokens by model.py's greedy_step on static token and position buffers. With cuda_graph the
    step (forward, argmax, position + 1) is captured once as a CUDA graph over the static KV cache,
    and each token is a single replay; otherwise each token is a plain call of the same step."""

    def __init__(self, step, batch, cuda_graph):
        self.step = step
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(1, dtype=torch.long, device=device)
        self.graph = None
        if cuda_graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up outside the graph (allocations, autotuning)
                for _ in range(3):
                    greedy_step(step, self.token, self.pos)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                greedy_step(step, self.token, self.pos)

    def run(self, first_token, start_pos, n):
        self.token.copy_(first_token)
        self.pos.fill_(start_pos)
        for _ in range(n):
            if self.graph is None:
                greedy_step(self.step, self.token, self.pos)
            else:
                self.graph.replay()


class Generation:
    """One model's prompt of T tokens and K greedy new tokens, set up once, timed per call."""

    def __init__(self, model, mode, prompt, K):
        B, T = prompt.shape
        model.setup_cache(B, T + K)
        self.model, self.prompt, self.K = model, prompt, K
        self.prompt_pos = torch.arange(T, device=device)
        self.decoder = GreedyDecode(make_step(model, mode.removesuffix('+cuda_graph')), B,
                                    cuda_graph=mode.endswith('cuda_graph'))

    @torch.no_grad()
    def __call__(self):
        """(prefill seconds, decode seconds)."""
        sync()
        t0 = clock()
        token = self.model.decode(self.prompt, self.prompt_pos).argmax(dim=-1, keepdim=True)
        sync()
        t1 = clock()
        self.decoder.run(token, self.prompt.size(1), self.K)
        sync()
        return t1 - t0, clock() - t1


@torch.no_grad()
def time_setting(variants, mode, B, T, K):
    """{variant: (median prefill s, median decode s)}. The variants take turns within every repeat,
    so the machine's drift lands on all of them alike and their ratios stay honest."""
    prompt = torch.randint(0, variants['baseline'].config.vocab_size, (B, T), device=device)
    runs = {name: Generation(model, mode, prompt, K) for name, model in variants.items()}
    times = {name: [] for name in variants}
    for r in range(repeats + 1):  # the first round warms up (and compiles)
        for name, generation in runs.items():
            measured = generation()
            if r > 0:
                times[name].append(measured)
    return {name: tuple(statistics.median(t[i] for t in ts) for i in (0, 1)) for name, ts in times.items()}


@torch.no_grad()
def time_against_hf(baseline, B, T, K):
    """Median end-to-end seconds (prefill + K greedy tokens) of our eager Baseline and of
    transformers' LlamaForCausalLM.generate on the same architecture (RoPE, SwiGLU of the same width,
    RMSNorm, the same heads; random weights, or --init_from's own), the two taking turns within
    every repeat."""
    from transformers import LlamaForCausalLM
    cfg = baseline.config
    hf_model = load_hf(LlamaForCausalLM, init_from) if init_from else LlamaForCausalLM(llama_hf_config(baseline))
    hf_model = hf_model.to(device=device, dtype=dtype).eval()
    prompt = torch.randint(0, cfg.vocab_size, (B, T), device=device)
    ours = Generation(baseline, 'eager', prompt, K)

    def hf_generate():
        sync()
        t0 = clock()
        hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=K,
                          min_new_tokens=K, do_sample=False, pad_token_id=0)
        sync()
        return clock() - t0

    times = []
    for r in range(repeats + 1):
        measured = (sum(ours()), hf_generate())
        if r > 0:
            times.append(measured)
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


# --- the training step (--train) -----------------------------------------------------------------

def train_variants(tokens):
    """{name: GPT in training mode, float32}: Baseline, then each phase of both tapers, then DyT."""
    cfg = GPTConfig(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=vocab_size,
                    block_size=block_size)
    variants = dict(baseline=GPT(cfg))
    for taper in ('internal', 'all'):
        for gate in (1.0, 0.5, 0.0):
            model = GPT(replace(cfg, taper=taper, aux_loss='fixed')).to(device).train()
            if gate < 1.0:  # past taper start: statistics from one step at g = 1, then c and s_tgt
                model(tokens, tokens)
                model.step_emas()
                model.start_taper()
                model.set_gate(gate)
            variants[f"{taper}+aux " + ('calibrating' if gate == 1.0 else f"g={gate:g}")] = model
    variants['dyt'] = GPT(replace(cfg, norm='dyt'))
    return {name: m.to(device).train() for name, m in variants.items()}


class TrainStep:
    """One optimizer step of train.py's loop on a fixed batch, timed: forward (with the logged
    statistics), backward, grad clip, AdamW, and the EMA step."""

    def __init__(self, model, mode, X, Y):
        self.model, self.X, self.Y = model, X, Y
        self.forward = torch.compile(model) if mode == 'compile' else model
        self.optimizer = model.configure_optimizers(0.0, 3e-4, (0.9, 0.95), 'cuda' if on_cuda else 'cpu')
        # as train.py: float32 weights, bf16 autocast on CUDA
        self.ctx = torch.autocast('cuda', dtype=dtype) if on_cuda and dtype != torch.float32 else nullcontext()

    def __call__(self):
        sync()
        t0 = clock()
        with self.ctx:
            loss = self.forward(self.X, self.Y, return_stats=True)[1]  # the stats train.py logs
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.model.step_emas()
        sync()
        return clock() - t0


def train_benchmark():
    """Print the training-step table for each mode; return its rows."""
    B = batch_size or 16
    tokens = B * block_size
    X, Y = torch.randint(0, vocab_size, (2, B, block_size), device=device)
    print(f"one training step, d = {n_embd}, {n_layer} layers, B = {B}, T = {block_size}, {device}, "
          f"{str(dtype).removeprefix('torch.')}, {'CPU' if cpu_time else 'wall'} time, median of {repeats}; "
          f"x = step time / Baseline's")
    rows = []
    for mode in ['eager'] + ['compile'] * compile:
        steps = {name: TrainStep(m, mode, X, Y) for name, m in train_variants(X).items()}
        times = {name: [] for name in steps}
        for r in range(repeats + 1):  # the first round warms up (compiles, allocates AdamW state)
            for name, step in steps.items():
                measured = step()
                if r > 0:
                    times[name].append(measured)
        print(f"\n{mode}\n{'variant':<24} {'ms/step':>9} {'tok/s':>9} {'x':>6}")
        for name, ts in times.items():
            seconds = statistics.median(ts)
            ratio = statistics.median(t / b for t, b in zip(ts, times['baseline']))
            print(f"{name:<24} {1e3 * seconds:9.1f} {tokens / seconds:9,.0f} {ratio:6.3f}", flush=True)
            rows.append(dict(mode=mode, variant=name, batch_size=B, block_size=block_size,
                             step_ms=round(1e3 * seconds, 2), tok_per_s=round(tokens / seconds, 1),
                             ratio=round(ratio, 4)))
    return rows


if train:
    print(json.dumps(dict(rows=train_benchmark())))
    sys.exit()
settings = [(B, T) for B in ([batch_size] if batch_size else [1, 4])
            for T in ([prompt_len] if prompt_len else [128, 256])]
variants = build_variants()
context = variants['baseline'].config.block_size
longest = max(T for _, T in settings)
if context < 2:  # a prompt of one token and one new token already need two
    fail(f"the model's context is {context} token: it holds no prompt and a new token beside it, so decoding "
         f"cannot be timed; bench.py times a model whose block_size is at least 2")
if longest + max_new_tokens > context:
    fail(f"prompt_len={longest} + max_new_tokens={max_new_tokens} exceed the model's context of {context} "
         f"tokens: pass a --prompt_len and --max_new_tokens that sum to at most {context}")
modes = ['eager'] + ['compile'] * compile + ['eager+cuda_graph'] * cuda_graph + \
        ['compile+cuda_graph'] * (compile and cuda_graph)
weight_bytes = {name: sum(p.numel() * p.element_size() for p in m.parameters()) for name, m in variants.items()}
n_params = variants['baseline'].get_num_params()
print(f"{n_params / 1e6:.1f}M parameters, {device}, {str(dtype).removeprefix('torch.')}, "
      f"{max_new_tokens} new tokens, {'CPU' if cpu_time else 'wall'} time, median of {repeats}; "
      f"x = speedup over Baseline")
rows = []
for mode in modes:
    print(f"\n{mode}")
    print(f"{'B':>3} {'T':>5}  " + '  '.join(f"{name + ' tok/s':>20}" for name in variants) +
          f"  {'prefill ms (base)':>18}  {'GB/s (base)':>11}")
    for B, T in settings:
        timed = time_setting(variants, mode, B, T, max_new_tokens)
        base = B * max_new_tokens / timed['baseline'][1]
        cells = []
        for name, (prefill, decode) in timed.items():
            tok_per_s = B * max_new_tokens / decode
            cells.append(f"{tok_per_s:20,.0f}" if name == 'baseline' else
                         f"{tok_per_s:11,.0f} ({tok_per_s / base:.2f}x)".rjust(20))
            rows.append(dict(mode=mode, variant=name, batch_size=B, prompt_len=T,
                             tok_per_s=round(tok_per_s, 1), prefill_ms=round(1e3 * prefill, 3),
                             e2e_tok_per_s=round(B * max_new_tokens / (prefill + decode), 1)))
        bandwidth = weight_bytes['baseline'] * max_new_tokens / timed['baseline'][1] / 1e9
        print(f"{B:>3} {T:>5}  " + '  '.join(cells) +
              f"  {1e3 * timed['baseline'][0]:18.2f}  {bandwidth:11.1f}", flush=True)
if hf:
    print("\nour eager Baseline vs transformers' LlamaForCausalLM.generate, prefill + decode, interleaved")
    for B, T in settings:
        ours, theirs = time_against_hf(variants['baseline'], B, T, max_new_tokens)
        print(f"B={B} T={T}: ours {B * max_new_tokens / ours:,.0f} tok/s, transformers "
              f"{B * max_new_tokens / theirs:,.0f} tok/s ({theirs / ours:.2f}x)", flush=True)
        rows.append(dict(mode='hf_generate', variant='baseline', batch_size=B, prompt_len=T,
                         tok_per_s=round(B * max_new_tokens / theirs, 1),
                         ours_e2e_tok_per_s=round(B * max_new_tokens / ours, 1)))
print(json.dumps(dict(rows=rows)))
