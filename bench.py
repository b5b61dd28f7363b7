"""
KV-cached decoding throughput, the paper's Table 2 (Sec. 4.2): Baseline (RMSNorm), Internal-Taper
unfused (the g = 0 scalings as explicit elementwise ops) and Internal-Taper fused (folded into the
weights, norms gone).

    python bench.py                          # the paper's table (B = 1, 4; T = 128, 256), eager
    python bench.py --fused                  # fused vs Baseline only
    python bench.py --compile --cuda_graph   # also torch.compile, a captured decode step, and both
    python bench.py --batch_size=1 --prompt_len=128 --device=cpu --hf   # + transformers' Llama

The model is the 30M d = 512 TinyStories config with random weights (speed does not depend on their
values), or --ckpt=path for a tapered checkpoint. bf16 + TF32 on CUDA, float32 on the CPU. Each row:
a warm-up, then `repeats` timed generations of max_new_tokens greedy tokens after a prompt of
prompt_len; prefill and decode are timed apart, the device synchronized before each clock read, and
the median reported. tok/s = generated tokens x batch / decode time. How much folding buys depends
on launch overhead, so every mode gets its own table. The last line is JSON for scripts.
"""

import json
import statistics
import sys
import time
from dataclasses import replace

import torch

from fold import fold_model
from model import GPT, GPTConfig, greedy_step

# -----------------------------------------------------------------------------
ckpt = ''                 # a tapered checkpoint; default: the config below with random weights
n_layer = 8
n_head = 16
n_embd = 512
vocab_size = 10000
block_size = 512
batch_size = 0            # 0: the paper's 1 and 4
prompt_len = 0            # 0: the paper's 128 and 256
max_new_tokens = 128
repeats = 5
fused = False             # the shortcut: Baseline and fused only
compile = False           # add a torch.compile table
cuda_graph = False        # add a table with the whole decode step captured as one CUDA graph
hf = False                # also time transformers' LlamaForCausalLM.generate on the Baseline config
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = ''                # '' = bfloat16 on CUDA, float32 on the CPU; or 'bfloat16' / 'float32'
seed = 0
# -----------------------------------------------------------------------------
from configurator import configure_globals  # noqa: E402

configure_globals(globals(), sys.argv[1:])
# -----------------------------------------------------------------------------
if device.startswith('cuda') and not torch.cuda.is_available():
    raise SystemExit("CUDA is not available on this machine: run with --device=cpu")
if cuda_graph and not device.startswith('cuda'):
    raise SystemExit("--cuda_graph needs a CUDA device")
on_cuda = device.startswith('cuda')
if dtype not in ('', 'bfloat16', 'float32'):
    raise SystemExit(f"dtype={dtype!r} is not supported: use 'bfloat16' or 'float32'")
dtype = getattr(torch, dtype or ('bfloat16' if on_cuda else 'float32'))
if on_cuda:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
torch._dynamo.config.recompile_limit = 64  # decode compiles once per variant and batch shape
torch.manual_seed(seed)


def sync():
    if on_cuda:
        torch.cuda.synchronize()


@torch.no_grad()
def build_variants():
    """{'baseline', 'unfused', 'fused'} -> GPT, on the device in the benchmark dtype."""
    if ckpt:
        try:
            tapered = GPT.from_checkpoint(ckpt, arch='llama')
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(f"cannot benchmark: {e}") from None
        if not tapered.started or not tapered.tapered_norms():
            raise SystemExit(f"{ckpt} is not a tapered model past its taper start")
    else:
        cfg = GPTConfig(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=vocab_size,
                        block_size=block_size, taper='internal')
        tapered = GPT(cfg).train()
        tapered(torch.randint(0, vocab_size, (2, 64)))  # calibration statistics at g = 1, then c
        tapered.step_emas()
        tapered.start_taper()
    tapered.set_gate(0.0)
    variants = dict(baseline=GPT(replace(tapered.config, taper='none', aux_loss='none')),
                    unfused=tapered, fused=fold_model(tapered))
    if fused:
        del variants['unfused']
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
        t0 = time.perf_counter()
        token = self.model.decode(self.prompt, self.prompt_pos).argmax(dim=-1, keepdim=True)
        sync()
        t1 = time.perf_counter()
        self.decoder.run(token, self.prompt.size(1), self.K)
        sync()
        return t1 - t0, time.perf_counter() - t1


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
    RMSNorm, tied head, random weights), the two taking turns within every repeat."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = baseline.config
    hf_model = LlamaForCausalLM(LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.n_embd, num_hidden_layers=cfg.n_layer,
        num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_head,
        intermediate_size=baseline.transformer.h[0].mlp.w1.out_features,
        max_position_embeddings=cfg.block_size, rms_norm_eps=cfg.norm_eps, rope_theta=cfg.rope_theta,
        tie_word_embeddings=True)).to(device=device, dtype=dtype).eval()
    prompt = torch.randint(0, cfg.vocab_size, (B, T), device=device)
    ours = Generation(baseline, 'eager', prompt, K)

    def hf_generate():
        sync()
        t0 = time.perf_counter()
        hf_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=K,
                          min_new_tokens=K, do_sample=False, pad_token_id=0)
        sync()
        return time.perf_counter() - t0

    times = []
    for r in range(repeats + 1):
        measured = (sum(ours()), hf_generate())
        if r > 0:
            times.append(measured)
    return statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


variants = build_variants()
settings = [(B, T) for B in ([batch_size] if batch_size else [1, 4])
            for T in ([prompt_len] if prompt_len else [128, 256])]
modes = ['eager'] + ['compile'] * compile + ['eager+cuda_graph'] * cuda_graph + \
        ['compile+cuda_graph'] * (compile and cuda_graph)
weight_bytes = {name: sum(p.numel() * p.element_size() for p in m.parameters()) for name, m in variants.items()}
n_params = variants['baseline'].get_num_params()
print(f"{n_params / 1e6:.1f}M parameters, {device}, {str(dtype).removeprefix('torch.')}, "
      f"{max_new_tokens} new tokens, median of {repeats}; x = speedup over Baseline")
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
