"""
The memory plan of a training run: what one GPU holds while train.py trains a config, computed
before anything is allocated.

    python memory.py config/finetune_gpt2_xl_alltaper.py                 # one GPU
    python memory.py config/finetune_gpt2_xl_alltaper.py --nproc=8       # per rank, FSDP2 over 8 GPUs
    python memory.py config/finetune_gpt2_l_vanilla.py --grad_checkpoint=False
    python memory.py --summary config/finetune_gpt2_*.py                 # one row per config file
    python memory.py --init_from=path/to/hf_folder                       # that HF model's shape

Arguments are train.py's (config files, then --key=value), plus --nproc, --gpu_gb and --summary
(`python memory.py --help` lists them all).
train.py prints the same plan at startup; `--memory_plan` prints it and exits.

The real model is built on the meta device (shapes, no storage), and so is its AdamW state, by one
optimizer step on meta tensors. In the dtypes train.py uses:
  weights, gradients       fp32 master copies, 4 + 4 bytes a parameter
  AdamW                    exp_avg and exp_avg_sq in fp32, 8 bytes a parameter
  autocast weight copies   bf16 casts of every matmul weight, 2 bytes each: autocast caches them for
                           the forward and the linear layers save them for backward
  activations              what autograd saves for backward, per micro-batch, from the formula in
                           block_activations() and head_activations(); test_memory.py checks it
                           against the tensors autograd actually saves
  logits' transient        at the loss, the bf16 logits the caller holds plus two fp32 (B, T, V)
                           buffers of log_softmax's backward; an estimate, not counted from autograd
The total adds each part at its own peak, so it is an upper bound; the CUDA context (about 0.5 GB)
and the allocator's fragmentation come on top, which is why a plan fits a GPU when its total stays
under 90% of the GPU's memory.
"""

import ast
import os
import shlex
import sys

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import torch

from configurator import Flag, configure, flag, joined, note
from model import GPT, GPTConfig, SwiGLU

GB = 1e9
FIT_FRACTION = 0.9  # of the GPU's memory: the rest is the CUDA context and allocator slack


def train_flags():
    """train.py's declared flags: the block between its first two rulers, run on its own."""
    ruler = '# ' + '-' * 77
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'train.py')) as f:
        namespace = {}
        exec(f.read().split(ruler)[1], namespace)
    flags = {k: v for k, v in namespace.items() if isinstance(v, Flag)}
    flags['init_from'].help = ("'scratch', or an HF GPT-2 or Llama-family name or save_pretrained folder (hf.py); "
                               "a resume is planned by train.py --init_from=resume --out_dir=<run> --memory_plan")
    return flags


def model_config(config):
    """The GPTConfig train.py builds from a resolved config (the shape keys of the config files)."""
    return GPTConfig(**{k: config[k] for k in GPTConfig.__dataclass_fields__ if k in config})


STATE_BYTES = {}  # state_bytes per model and optimizer settings: to_fit plans one model many times


def state_bytes(config):
    """The real model and its optimizer, built on the meta device: parameters, and bytes of the
    weights, of the AdamW state and of the weights outside the blocks (FSDP2's root unit); and the
    elements of the matmul weights, which autocast copies to bf16."""
    key = repr((model_config(config), *(config[k] for k in ('weight_decay', 'learning_rate', 'beta1', 'beta2'))))
    if key not in STATE_BYTES:
        STATE_BYTES[key] = built_state_bytes(config)
    return dict(STATE_BYTES[key])


def built_state_bytes(config):
    if config['n_layer'] > 2:  # every block is the same: one and two blocks built, the rest by their difference
        one, two = (built_state_bytes(config | dict(n_layer=n)) for n in (1, 2))
        return {k: one[k] + (config['n_layer'] - 1) * (two[k] - one[k]) for k in one}
    with torch.device('meta'):
        model = GPT(model_config(config))
    optimizer = model.configure_optimizers(config['weight_decay'], config['learning_rate'],
                                           (config['beta1'], config['beta2']), 'cpu')
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()  # allocates exp_avg, exp_avg_sq (and a step count) per parameter
    params = sum(p.numel() for p in model.parameters())
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    adam = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values())
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    root = sum(p.numel() * p.element_size() for name, p in model.named_parameters()
               if not name.startswith('transformer.h.'))
    return dict(params=params, weights=weights, adam=adam, root=root, matmul=matmul)


def norm_activations(cfg, n):
    """Bytes one norm saves besides its input h (fp32, counted with the residual stream), in the
    phase that saves the most: the mixing phase of a taper (both branches), FakeLN's ln_1 between its
    two removals. n = B T tokens, d = n_embd."""
    d = cfg.n_embd
    if cfg.norm == 'layernorm':
        saved = 2 * 4 * n                    # mean and 1/sigma per token
        if cfg.fakeln or cfg.taper != 'none':
            saved += 4 * n * d               # h - mu_h, saved by the (h - mu_h) * c gammatilde product
    else:
        saved = 4 * n * d + 4 * n            # torch's composite rms_norm: h / r(h) and 1 / r(h);
                                             # h * c gammatilde saves h itself
    return saved


def removed_fakeln_saves_less(n, d):
    """FakeLN's largest phase has ln_1 between its Q/K and V removals (the real LayerNorm and the
    fixed map both computed) and ln_2 and ln_f removed: a removed FakeLN keeps only h - mu_h, not its
    input h nor mean and 1/sigma, the fp32 bytes counted for it as a real norm."""
    return 4 * n * d + 2 * 4 * n


def block_activations(cfg, n, a, autocast):
    """
    Bytes one block saves for backward, a = bytes of the compute dtype (2 under bf16 autocast).
    Under autocast every linear layer saves its own bf16 copy of an fp32 input; without it, the
    layers reading one tensor share it.
        residual stream  h before ln_1 and before ln_2, fp32                  2 * 4 n d
        norms            norm_activations() for ln_1 and ln_2 (FakeLN's ln_1 saves no more
                         with two paths: its Q/K and V outputs share h - mu_h)
        attention        QKV input, QKV output (q, k, v are views of it), the SDPA output (also
                         c_proj's input) in a; its log-sum-exp, fp32 per head  (1 + 1) a n d + a n q
                                                                              + 4 n nh
                         with q = d + 2 kv, kv = n_kv_head hs the width of k and of v (d without
                         grouped-query attention)
                         llama: q and k again after RoPE                      + a n (d + kv)
                         FakeLN: the V path's input and its own v (QKV's output is still
                         held whole by q and k), and the bf16 copy of the V weight rows
                                                                              + 2 a n d + a d^2
        MLP   gpt2       c_fc input, c_fc output, gelu output                 (1 + 4 + 4) a n d
              llama      w1 and w3 inputs, w1 out, silu out, w3 out, product  (1 or 2) a n d + 4 a n hidden
    """
    d, nh = cfg.n_embd, cfg.n_head
    kv = (cfg.n_kv_head or nh) * (d // nh)
    saved = 2 * 4 * n * d + 2 * norm_activations(cfg, n)
    saved += 2 * a * n * d + a * n * (d + 2 * kv) + 4 * n * nh
    if cfg.arch == 'llama':
        saved += a * n * (d + kv)
    if cfg.fakeln:
        saved += 2 * a * n * d + (a * d * d if autocast else 0)  # without autocast the rows are a view
        saved -= removed_fakeln_saves_less(n, d)  # ln_2
    if cfg.arch == 'gpt2':
        saved += 9 * a * n * d
    else:
        with torch.device('meta'):
            hidden = SwiGLU(cfg).w1.out_features
        saved += (2 if autocast else 1) * a * n * d + 4 * a * n * hidden
    return saved


def head_activations(cfg, n, T, a, grad_checkpoint):
    """
    Bytes saved outside the blocks: the final norm and its fp32 input, s(h) for the scale loss
    (eq. 5) or Baroni's, the head's input, log_softmax's fp32 output (B, T, V), and the token ids
    (int64) read by the embedding and the loss. GPT-2's positions (int64) and RoPE's cos/sin (fp32,
    T x hs each) are per T; checkpointed blocks hold cos/sin as arguments of their recomputation
    instead, which autograd does not count as saved (a few hundred kB).
    """
    d, V = cfg.n_embd, cfg.vocab_size
    saved = 4 * n * d + norm_activations(cfg, n) + a * n * d + 4 * n * V + 2 * 8 * n
    if cfg.fakeln:
        saved -= removed_fakeln_saves_less(n, d)  # ln_f
    if cfg.aux_loss != 'none':  # s(h) = sqrt(mean(center(h)^2) + eps), then (s - target)^2
        saved += (4 * n * d if cfg.norm == 'layernorm' else 0) + 2 * 4 * n
    if cfg.arch == 'gpt2':
        saved += 8 * T
    elif not grad_checkpoint:
        saved += 2 * 4 * T * (d // cfg.n_head)
    return saved


def saved_activations(cfg, B, T, autocast, grad_checkpoint=False):
    """(blocks, head, one block): bytes autograd holds after the forward of one micro-batch, the
    autocast weight copies apart. With activation checkpointing a block keeps only its fp32 input,
    and one block's activations come back at a time in the backward pass."""
    a = 2 if autocast else 4
    n = B * T
    block = block_activations(cfg, n, a, autocast)
    blocks = cfg.n_layer * (4 * n * cfg.n_embd if grad_checkpoint else block)
    return blocks, head_activations(cfg, n, T, a, grad_checkpoint), block


def split_batch(config, ranks):
    """(micro-batches per rank per step, sequences per micro-batch): how train.py splits a step's
    batch_size x gradient_accumulation_steps sequences over ranks. Each rank takes an equal share and
    runs it in the fewest equal micro-batches, at least ceil(accumulation / ranks), so that no
    micro-batch is larger than batch_size; a ValueError when the ranks cannot share it evenly."""
    world_batch = config['gradient_accumulation_steps'] * config['batch_size']
    if world_batch % ranks:
        raise ValueError(f"{ranks} ranks cannot split the global batch of {config['gradient_accumulation_steps']} x "
                         f"{config['batch_size']} = {world_batch} sequences evenly: make batch_size x "
                         f"gradient_accumulation_steps a multiple of {ranks}")
    share = world_batch // ranks
    accum = next(a for a in range(-(-config['gradient_accumulation_steps'] // ranks), share + 1) if share % a == 0)
    return accum, share // accum


def plan(config, nproc=1, ranks=None):
    """{part: bytes} per GPU for a resolved train.py config; nproc > 1 (or fsdp) shards the weights,
    gradients and AdamW state over the ranks as FSDP2 does. The micro-batch is the one each of ranks
    (default nproc) processes runs (split_batch)."""
    cfg = model_config(config)
    autocast = not config['device'].startswith('cpu') and config['dtype'] == 'bfloat16'  # '': a GPU when present
    B, T, L = split_batch(config, ranks or nproc)[1], config['block_size'], cfg.n_layer
    state = state_bytes(config)
    blocks, head, block = saved_activations(cfg, B, T, autocast, config['grad_checkpoint'])
    a = 2 if autocast else 4
    parts = dict(params=state['params'])
    shard = nproc if (nproc > 1 or config['fsdp']) else 1
    parts['weights'] = state['weights'] / shard
    parts['gradients'] = state['weights'] / shard
    parts['adamw'] = state['adam'] / shard
    if shard > 1 or config['fsdp']:
        # FSDP2 without a mixed-precision policy gathers fp32 weights: the root unit (embeddings,
        # ln_f, head) stays gathered, and two blocks are gathered at a time (one computing, one
        # prefetched), with their unsharded fp32 gradients before the reduce-scatter.
        per_block = (state['weights'] - state['root']) / L
        parts['fsdp_gathered'] = state['root'] + 2 * 2 * per_block
    # not sharded: autocast casts the gathered weights
    parts['weight_copies'] = 2 * state['matmul'] if autocast else 0
    parts['activations'] = blocks + head + (block if config['grad_checkpoint'] else 0)
    parts['block'] = block
    parts['logits_transient'] = (a + 2 * 4) * B * T * cfg.vocab_size
    parts['total'] = sum(parts[k] for k in ('weights', 'gradients', 'adamw', 'fsdp_gathered',
                                            'weight_copies', 'activations', 'logits_transient')
                         if k in parts)
    return parts


def describe(config, nproc=1, gpu_gb=80, ranks=None):
    """The plan as a table, ending with whether it fits a GPU of gpu_gb (a CPU run: this machine's RAM)."""
    parts = plan(config, nproc, ranks)
    cpu = config['device'].startswith('cpu')
    where = "this machine's RAM" if cpu else f"a {gpu_gb} GB GPU"
    memory = device_bytes('cpu') / GB if cpu else gpu_gb
    autocast = not config['device'].startswith('cpu') and config['dtype'] == 'bfloat16'  # '': a GPU when present
    sharded = nproc > 1 or config['fsdp']
    L = config['n_layer']
    B, T = split_batch(config, ranks or nproc)[1], config['block_size']
    checkpointing = 'activation checkpointing' if config['grad_checkpoint'] else 'no activation checkpointing'
    lines = [f"memory plan: {parts['params']:,} parameters, micro-batch {B} x {T}, "
             f"{'bf16 autocast' if autocast else 'float32'}, {checkpointing}, "
             + (f"per rank of {nproc} under FSDP2" if sharded else "one process on the CPU" if cpu else "one GPU")]
    rows = [('weights (fp32)', parts['weights']), ('gradients (fp32)', parts['gradients']),
            ('AdamW exp_avg + exp_avg_sq (fp32)', parts['adamw'])]
    if 'fsdp_gathered' in parts:
        rows.append(('FSDP2 gathered units (fp32)', parts['fsdp_gathered']))
    if autocast:
        rows.append(('bf16 weight copies (autocast)', parts['weight_copies']))
    how = (f"{L} block inputs + 1 block recomputed" if config['grad_checkpoint']
           else f"{L} blocks x {parts['block'] / GB:.3f} GB")
    rows += [(f"activations ({how}) + head", parts['activations']),
             ('logits and their gradient (transient)', parts['logits_transient']),
             ('total', parts['total'])]
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name:<{width}}  {value / GB:8.2f} GB" for name, value in rows]
    needed = parts['total'] * (nproc if cpu else 1)  # ranks on the CPU share one machine's RAM
    fits = needed <= FIT_FRACTION * memory * GB
    verdict = 'fits' if fits else 'does NOT fit'
    shared = f"{nproc} ranks x {parts['total'] / GB:.2f} GB " if cpu and nproc > 1 else ""
    lines.append(f"  {shared}{verdict} {where}{f' of {memory:.0f} GB' if cpu else ''} ({needed / (memory * GB):.0%} of "
                 f"it; the limit is {FIT_FRACTION:.0%})")
    if not fits and to_fit(config, nproc, memory, ranks):
        lines.append(f"  to fit: {to_fit(config, nproc, memory, ranks)}")
    return '\n'.join(lines)


def to_fit(config, nproc, gpu_gb, ranks=None):
    """The first change whose plan fits a GPU of gpu_gb, the cheapest first: activation checkpointing,
    then smaller micro-batches that keep the global batch, then FSDP2 over the fewest more GPUs that
    share the batch evenly; None if none does."""
    cpu = config['device'].startswith('cpu')  # its ranks share one machine's RAM, and no more GPUs help it

    def fits(changed, n=nproc):
        try:
            return plan(changed, n, ranks if n == nproc else None)['total'] * (n if cpu else 1) <= \
                FIT_FRACTION * gpu_gb * GB
        except ValueError:  # ranks that cannot share the batch
            return False
    said = [] if config['grad_checkpoint'] else ['--grad_checkpoint=True']
    config = config | dict(grad_checkpoint=True)
    if said and fits(config):
        return said[0]
    B, G = config['batch_size'], config['gradient_accumulation_steps']
    for n in (nproc, *(n for n in (2, 4, 8, 16, 32, 64) if n > nproc and not cpu)):  # the fewest GPUs, then the largest micro-batch
        for b in (b for b in range(B, 0, -1) if B % b == 0 and (n, b) != (nproc, B)):  # the same sequences per step
            if fits(config | dict(batch_size=b, gradient_accumulation_steps=G * (B // b)), n):
                smaller = [f"--batch_size={b} --gradient_accumulation_steps={G * (B // b)} (the same global batch)"]
                more = [f"FSDP2 over {n} GPUs (memory.py --nproc={n}; torchrun --nproc_per_node={n} train.py ... "
                        f"--fsdp=True)"] if n != nproc else []
                return ', and '.join(said + (smaller if b != B else []) + more)
    return None


def resolve(argv):
    """train.py's resolved config for argv (config files, --key=value)."""
    return configure(train_flags(), argv, 'train.py', None, configs=True, layered_note=False)  # main's note says it


def device_bytes(device):
    """The memory a run on device can use: the GPU's, or the machine's RAM for the CPU."""
    if device.startswith('cuda'):
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')


FLAGS = dict(
    nproc=flag(1, "ranks: FSDP2 shards the weights, gradients and AdamW state over them", min=1),
    gpu_gb=flag(80, "the GPU's memory, in GB, that the plan is judged against", above=0),
    summary=flag(False, "one table row per config file instead of one plan"),
)


def model_remedy(argv):
    """What to change when train.py's settings for argv (config files, --key=value) make no model: the
    flags that turn the config files' own model into none (--arch=gpt2 over a Llama's config), else the
    last config file, or with none the flags."""
    flags = train_flags()
    argv = [a for a in joined(argv, flags) if not a.startswith('--') or a[2:].partition('=')[0] in flags]
    files = [a for a in argv if not a.startswith('--')]
    if not files:
        return "change the flags that set them"

    def valid(values):
        try:
            return bool(model_config(values))
        except ValueError:
            return False
    as_filed = resolve(files)
    given, config = {a[2:].partition('=')[0] for a in argv if a.startswith('--')}, resolve(argv)
    moved = [k for k in GPTConfig.__dataclass_fields__ if k in given and config[k] != as_filed[k]]
    if not valid(as_filed) and len(files) > 1:  # stacked files: one that is no model alone, or the stack
        alone = [f for f in files if not valid(resolve([f]))]
        shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'config')
        if alone or os.path.dirname(os.path.realpath(files[-1])) != os.path.realpath(shipped):
            return f"fix {(alone or files)[-1]}"  # a file that is no model alone, or the user's own on top
        return (f"{' and '.join(files)} each make a model on their own, and stacked (the last file to set a value "
                f"decides it) they make none: pass one of them")
    if not valid(as_filed) or not moved:
        return f"fix {files[-1]}"
    moved = [k for k in moved if valid(config | {k: as_filed[k]})] or moved  # the flags whose file value alone mends it
    return (f"{' '.join(files)} on its own is a model, and {' '.join(f'--{k}={config[k]}' for k in moved)} "
            f"make{'s' if len(moved) == 1 else ''} it none: drop {'that flag' if len(moved) == 1 else 'those flags'}, "
            f"or start from the config of the model meant")


def checked(config, argv):
    """config, after the model's own checks of its shape and settings (GPTConfig's): one sentence."""
    try:
        model_config(config)
    except ValueError as e:
        raise SystemExit(f"{e}: {model_remedy(argv)}") from None
    return config


def assigned(path):
    """The names a config file assigns at its top level: the settings it makes, whatever their values."""
    with open(path, encoding='utf-8-sig') as f:
        tree = ast.parse(f.read(), path)
    targets = [t for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
               for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def hf_shaped(config, argv):
    """config, with the shape of the HF model its init_from names (a fine-tune plans that model, as
    train.py builds it): a local folder's, or on the command line a hub model's (a config file's hub
    model: the shape it sets); a shape flag on the command line that disagrees is refused, as train.py does."""
    if config['init_from'] in ('scratch', 'resume'):
        return config
    if not os.path.isdir(config['init_from']) and not any(a.startswith('--init_from') for a in argv):
        return config  # a fine-tune's config file gives its hub model's shape: planned offline
    from hf import misfit, pretrained_config, unfit
    try:
        pretrained = pretrained_config(config['init_from'])  # its config.json, and the weights' shapes
        why = misfit(config['init_from']) if os.path.isdir(config['init_from']) else None
        if why:
            raise ValueError(unfit(config['init_from'], why))
    except (OSError, ValueError) as e:
        raise SystemExit(f"cannot plan a fine-tune of {config['init_from']}: {e}") from None
    given = {a[2:].partition('=')[0] for a in argv if a.startswith('--')}
    keys = ('arch', 'norm', 'vocab_size', 'n_layer', 'n_head', 'n_embd', 'n_kv_head', 'mlp_hidden', 'tied_head')
    wrong = [key for key in keys if model_config(config).resolved(key) != pretrained.resolved(key)]
    for key in wrong:
        if key in given:
            raise SystemExit(f"{config['init_from']} has {key}={getattr(pretrained, key)!r} but --{key}="
                             f"{config[key]!r}: drop --{key} (a fine-tune's shape is the model's)")
    for path in (a for a in argv if not a.startswith('--')):
        sets = [key for key in wrong if key in assigned(path)]
        if sets:  # train.py refuses this run: its config's shape must be the model's
            raise SystemExit(f"{config['init_from']} has {', '.join(f'{k}={getattr(pretrained, k)!r}' for k in sets)} "
                             f"but {path} sets {', '.join(f'{k}={config[k]!r}' for k in sets)}: plan that model "
                             f"without {path}, or set {' '.join(f'--{k}={getattr(pretrained, k)!r}' for k in sets)} "
                             f"(a fine-tune's shape is the model's)")
    shape = {key: getattr(pretrained, key) for key in keys}
    if 'block_size' not in given:  # a context no longer than the model's
        shape['block_size'] = min(config['block_size'], pretrained.block_size)
    elif config['block_size'] > pretrained.block_size:
        raise SystemExit(f"block_size={config['block_size']} exceeds {config['init_from']}'s context of "
                         f"{pretrained.block_size}: lower --block_size")
    return checked(config | shape, argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    values = configure({**train_flags(), **FLAGS}, argv, 'memory.py', __doc__, configs=True, layered_note=False)
    argv = joined(argv, {**train_flags(), **FLAGS})  # --nproc 2: its value is no config file
    nproc, gpu_gb = values['nproc'], values['gpu_gb']
    init = values['init_from']
    folder = init if os.path.isdir(init) else os.path.dirname(init) or '.' if os.path.isfile(init) else None
    run_dir = folder if folder and os.path.isfile(os.path.join(folder, 'ckpt.pt')) else None
    if run_dir:  # the run's folder, or a checkpoint in it (ckpt.pt, ckpt_folded.pt)
        raise SystemExit(f"init_from={init} is {'a checkpoint of ' if init != run_dir else ''}a run of this repository, "
                         f"whose config is in its checkpoint: python train.py --init_from=resume --out_dir={shlex.quote(run_dir)} "
                         f"--memory_plan")
    if values['init_from'] == 'resume':  # train.py reads a resume's config from its checkpoint
        raise SystemExit(f"memory.py plans from config files and flags; a resume's config is in its checkpoint: "
                         f"python train.py --init_from=resume --out_dir={shlex.quote(values['out_dir'])} --memory_plan")
    if os.path.isfile(os.path.join(values['out_dir'], 'ckpt.pt')) and any(a.startswith('--out_dir') for a in argv):
        print(f"note: this plan is of the config files and flags given, not of the run in {values['out_dir']}: "
              f"python train.py --init_from=resume --out_dir={shlex.quote(values['out_dir'])} --memory_plan plans that run")
    if nproc > 1 and not values['fsdp'] and any(a.startswith('--fsdp=') for a in argv):  # said so, not the default
        raise SystemExit(f"--nproc={nproc} with --fsdp=False asks for a plan of DDP, which keeps every weight and "
                         f"its AdamW state on each rank; memory.py plans FSDP2 over several ranks: drop --fsdp=False, "
                         f"or plan one rank (--nproc=1), which DDP's ranks each match")
    try:
        split_batch(resolve([a for a in argv if not (a.startswith('--') and a[2:].partition('=')[0] in FLAGS)]), nproc)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    rest = [a for a in argv if not (a.startswith('--') and a[2:].partition('=')[0] in FLAGS)]
    if not values['summary']:
        files = [a for a in rest if not a.startswith('--')]
        if len(files) > 1:  # layered, as train.py reads them; a reader who meant a table is told how
            print(f"note: the {len(files)} config files are applied one over another, as train.py reads them, for one "
                  f"plan; --summary plans each apart")
        config = hf_shaped(checked(resolve(rest), rest), argv)
        if config['device'].startswith('cpu') and any(a.startswith('--gpu_gb') for a in argv):
            note("--gpu_gb is a GPU's memory, and this plan is of a run on the CPU (--device=cpu): it is judged "
                 "against this machine's RAM")
        print(describe(config, nproc, gpu_gb))
        return
    files = [a for a in rest if not a.startswith('--')]
    flags = [a for a in rest if a.startswith('--')]
    if not files:
        raise SystemExit("--summary makes one row per config file: name at least one, e.g. config/finetune_gpt2_*.py")
    real = [os.path.realpath(f) for f in files]
    twice = next((f for f, r in zip(files, real) if real.count(r) > 1), None)
    if twice:  # one file under two spellings too (a shell pattern and the name typed again)
        raise SystemExit(f"--summary would plan {twice} more than once (it is named twice): name each config file once")
    replaced = sorted({(key, path, own[key]) for path in files for own in [resolve([path])]
                       for key, value in resolve([path, *flags]).items() if key in own and own[key] != value
                       and any(f[2:].partition('=')[0] == key for f in flags)})
    if replaced:  # --n_embd=64 beside config files of other widths: every row is planned at 64
        key, path, own = replaced[0]
        print(f"note: the flags apply to every config file of the summary, over the files' own values (--{key} "
              f"replaces {path}'s {key}={own!r}" + (f", and {len(replaced) - 1} more" if len(replaced) > 1 else "")
              + ")")
    rows = []  # every row planned before the table starts: a refused config leaves no half table
    for path in files:
        config = hf_shaped(checked(resolve([path, *flags]), [path, *flags]), [path, *flags])
        try:  # each file's own batch: the check above read the files layered
            _, micro = split_batch(config, nproc)
        except ValueError as e:
            raise SystemExit(f"{path}: {e}") from None
        p = plan(config, nproc)
        state = p['weights'] + p['gradients'] + p['adamw'] + p.get('fsdp_gathered', 0) + p['weight_copies']
        fits = p['total'] <= FIT_FRACTION * gpu_gb * GB
        rows.append(f"| `{path}` | {p['params'] / 1e6:,.0f}M | {micro} x {config['block_size']} "
                    f"| {'yes' if config['grad_checkpoint'] else 'no'} | {state / GB:.1f} GB "
                    f"| {(p['activations'] + p['logits_transient']) / GB:.1f} GB | {p['total'] / GB:.1f} GB "
                    f"| {'fits' if fits else 'does not fit'} ({p['total'] / (gpu_gb * GB):.0%}) |")
    print(f"| config | parameters | micro-batch | checkpointing | weights, grads, AdamW, bf16 copies | "
          f"activations + logits | total | {gpu_gb} GB GPU |")
    print("|---|---|---|---|---|---|---|---|")
    print('\n'.join(rows))

if __name__ == '__main__':
    main()
