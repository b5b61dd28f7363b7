"""
Fold the g = 0 maps of a tapered model into its weights (Sec. 3.3, App. B): the tapered norms leave
the inference graph and the model computes the same function.

    python fold.py --out_dir=out-taper-internal-512       # writes out_dir/ckpt_folded.pt
    python fold.py --out_dir=out-gpt2-s-alltaper --export_hf=gpt2-s-folded   # also an HF folder (hf.py)

At g = 0 a TaperNorm is y = c h D_gammatilde and a TaperLN is y = c (h - mu_h) D_gammatilde + beta. The
next linear layer z = y W^T + b absorbs either. PyTorch stores W as (out, in), so a scaling of y's
features scales W's input columns. Internal-Taper folds into the attention QKV projection and the MLP
input projection(s); All-Taper also folds the final norm into the output head, untied from the
embedding. The arithmetic runs in float64.
"""

import copy
import fcntl
import os
import shlex
import shutil
import sys
from dataclasses import asdict, replace
from types import SimpleNamespace

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import torch

from configurator import (HERE, FlagError, cannot_write, discard, flag, locked, parse_flags, replaced_link,
                          unreplaceable, write_failure, write_remedy)
from diagnose import train_counts
from model import GPT, FakeLN, LayerNorm, broken_link, load_checkpoint, missing_hint, mixed_run_note, run_checkpoint
from tokens import open_tokens, read_meta


# --- the algebra, one identity per function ----------------------------------------------------------

def fold_bias(linear, beta):
    """(x + beta) W^T + b = x W^T + (b + W beta): a shift of the input moves into the bias."""
    linear.bias += linear.weight @ beta


def fold_scale(linear, scale):
    """(x D_s) W^T = x (W D_s)^T: a per-feature scaling multiplies W's input columns."""
    linear.weight *= scale


def fold_centering(linear):
    """(x (I - 11^T/d)) W^T = x (W (I - 11^T/d))^T: mean-centering subtracts each row's mean from W.
    Centering is idempotent, so the folded W ignores any mean its input still carries."""
    linear.weight -= linear.weight.mean(dim=1, keepdim=True)


def fold_norm(norm, linears, path=0):
    """A norm that is a fixed map, followed by linear layers, becomes those linear layers alone.
    y = (h - mu) D_s + beta with s = norm.fixed_scale() (c gammatilde for a tapered norm at g = 0,
    gamma / sigma_avg of the given path for a removed FakeLN): beta first (it meets the original W),
    then the scaling, then the centering (LayerNorm kinds only)."""
    centered = isinstance(norm, LayerNorm)
    scale = norm.fixed_scale(path) if isinstance(norm, FakeLN) else norm.fixed_scale()
    for linear in linears:
        if centered and norm.bias is not None:
            fold_bias(linear, norm.bias)
        fold_scale(linear, scale)
        if centered:
            fold_centering(linear)


def rows(linear, start, stop):
    """Output rows start:stop of a linear layer, as a layer of their own: views, so folding into them
    folds into the original. FakeLN's ln_1 feeds the Q/K rows and the V rows with a sigma_avg each."""
    return SimpleNamespace(weight=linear.weight[start:stop],
                           bias=None if linear.bias is None else linear.bias[start:stop])


def mlp_inputs(mlp):
    return [mlp.w1, mlp.w3] if hasattr(mlp, 'w1') else [mlp.c_fc]


@torch.no_grad()
def fold_model(model):
    """The folded copy of a tapered model at g = 0: the same function without its tapered norms."""
    cfg = model.config
    if cfg.folded:
        raise ValueError("this model is already folded")
    if cfg.norm == 'dyt':
        raise ValueError("DyT's tanh(alpha h) D_gamma is not a fixed linear map, so no linear layer can "
                         "absorb it: a DyT model has nothing to fold")
    if cfg.taper == 'none' and not cfg.fakeln:
        raise ValueError("this is a Baseline model: it has no tapered norm to fold; only tapered runs "
                         "(train.py --taper=internal or --taper=all) have a norm to fold")
    if cfg.taper != 'none' and (not model.started or model.gate.item() != 0.0):
        raise ValueError(f"the gate is {model.gate.item():g}, not 0: only a model at the end of its "
                         f"taper (iter >= taper_end) is a fixed map that folds; train it on to taper_end "
                         f"with train.py --init_from=resume")
    if cfg.fakeln and not all(all(m.removed) for m in model.fakelns()):
        raise ValueError("not every FakeLN layer is removed yet: fold a checkpoint from the end of "
                         "the removal schedule (train it on with train.py --init_from=resume)")
    dtype = model.lm_head.weight.dtype
    source = copy.deepcopy(model).double()
    folded = GPT(replace(cfg, folded=True)).double()
    kept = folded.state_dict()
    for key, value in source.state_dict().items():
        if key in kept:  # everything but the tapered norms; lm_head.bias of a folded head starts at 0
            kept[key].copy_(value)
    d = cfg.n_embd
    for src, dst in zip(source.transformer.h, folded.transformer.h):
        if cfg.fakeln:
            fold_norm(src.ln_1, [rows(dst.attn.c_attn, 0, 2 * d)])
            fold_norm(src.ln_1, [rows(dst.attn.c_attn, 2 * d, 3 * d)], path=1)
        else:
            fold_norm(src.ln_1, [dst.attn.c_attn])
        fold_norm(src.ln_2, mlp_inputs(dst.mlp))
    if cfg.final_norm_removed:
        fold_norm(source.transformer.ln_f, [folded.lm_head])
    return folded.to(dtype)


def check_tokens(config, data_dir=None, batch_size=4, seq_len=128, seed=0):
    """(tokens, source) to compare two models on: windows of the run's own validation text when
    data_dir/val.bin exists, else random tokens. A norm-free model's activations on random tokens
    can overflow float32, which makes any comparison there meaningless."""
    T = min(seq_len, config.block_size)
    if data_dir and os.path.isfile(os.path.join(data_dir, 'val.bin')):
        data = open_tokens(data_dir, 'val')[:batch_size * T]
        return torch.from_numpy(data.astype(np.int64)).view(batch_size, T), 'validation text'
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch_size, T), generator=generator), 'random tokens'


@torch.no_grad()
def max_logit_diff(a, b, idx=None, dtype=torch.float32):
    """max |logits_a - logits_b| on idx (default: random tokens), copies of both models in dtype."""
    idx = check_tokens(a.config)[0] if idx is None else idx
    a, b = (copy.deepcopy(m).to(dtype).eval() for m in (a, b))
    idx = idx.to(a.lm_head.weight.device)
    return (a(idx)[0] - b(idx)[0]).abs().max().item()


@torch.no_grad()
def reset_unseen_embeddings(model, counts):
    """Set the input embedding of every token that never occurs in training (counts == 0) to the mean
    of the seen tokens' rows; returns how many were reset. Through a tied head such a row only ever
    received the softmax's push away from it, and with no norm left its excess scale can blow a window
    up (see diagnose.py). Only the input side changes, so the model needs its own head (a folded
    All-Taper or FakeLN model); every window without those tokens keeps its logits exactly."""
    wte = model.transformer.wte.weight
    if model.lm_head.weight is wte:
        raise ValueError("its head is the embedding (tied): resetting input rows would change every "
                         "output logit; only a folded All-Taper or FakeLN model has a head of its own")
    unseen = torch.from_numpy(np.asarray(counts) == 0).to(wte.device)
    wte[unseen] = wte[~unseen].mean(dim=0)
    return int(unseen.sum())


FLAGS = dict(
    out_dir=flag(None, "the run's folder", type=str, required=True, path='dir'),
    ckpt=flag('ckpt.pt', "the checkpoint file in out_dir to fold"),
    out=flag('ckpt_folded.pt', "the folded checkpoint's file in out_dir: a new file, or one fold.py wrote "
             "(never ckpt.pt or the checkpoint being folded)"),
    export_hf=flag(None, "also write an HF folder: GPT2LMHeadModel or LlamaForCausalLM (All-Taper and FakeLN "
                   "only): a new or empty folder, or one fold.py exported to", type=str, path='out'),
    reset_unseen=flag(False, "All-Taper/FakeLN: set the input embeddings of tokens absent from the run's "
                      "train.bin to their mean (a guard against blow-ups; see diagnose.py)"),
)


def fail(message):
    """Stop with one sentence that says what to do; called before anything is written."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def hold(path):
    """One fold.py at a time folds the checkpoint at path: an exclusive lock on that file, nothing written
    for it, held until the process ends (two folds of one run would write the same files at once)."""
    global held
    held = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fail(f"another fold.py is folding {path} right now: wait for it to end, then run this again")


def training_in(folder):
    """Whether a train.py is training in folder now: it holds the folder's lock (train.hold_out_dir)."""
    return locked(folder)


staged = None  # the export's staging folder, once this process holds it (claim)


def aside(path, kind='tmp'):
    """Where fold.py writes the file or folder at path before giving it that name (kind 'tmp'), or puts the
    folder it replaces until the new one holds the name (kind 'old'): hidden beside it, under a name of
    fold.py's own (a user's 'model.tmp' beside an export 'model' is the user's, never a leftover)."""
    folder, name = os.path.split(os.path.normpath(path))
    return os.path.join(folder, f'.{name}.fold-{kind}')


def swap(staging, path):
    """Give the folder staging, written whole, the name path: the folder there is renamed aside first and
    removed only once the new one holds its name, so that a failure at any step leaves it as it was."""
    old = aside(path, 'old')
    discard(old)  # a killed fold's leftover: this process holds the export's staging folder (claim)
    if os.path.isdir(path):
        os.rename(path, old)
    try:
        os.rename(staging, path)
    except OSError:
        if os.path.isdir(old):
            os.rename(old, path)  # the old folder back under its name
        raise
    discard(old)


def claim(staging, export_dir):
    """The export's staging folder, made empty and locked for this process: a second fold.py exporting
    to the same folder at once stops here, before it writes, rather than mixing two models' files. A
    staging folder no process holds is a killed fold's leftover, and is emptied."""
    global staged
    os.makedirs(staging, exist_ok=True)
    fd = os.open(staging, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fail(f"another fold.py is exporting into {export_dir} right now: wait for it to end, or export elsewhere")
    staged = fd
    for name in os.listdir(staging):
        path = os.path.join(staging, name)
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)


def folded_from(path):
    """The checkpoint the file at path was folded from, if fold.py wrote it; None otherwise."""
    try:
        ckpt = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
    except Exception:  # not a checkpoint at all
        return None
    return ckpt.get('folded_from') if isinstance(ckpt, dict) else None


def copy_of(folded, path):
    """Whether the folded file at folded was folded from the run of the checkpoint at path, though under
    another path (a run folder copied or moved, then maybe trained on): an earlier step of the same run
    (train.py's run_id), or, for checkpoints from before run_id, the same step of the same model and seed."""
    try:
        a = torch.load(folded, map_location='cpu', weights_only=True, mmap=True)
        b = torch.load(path, map_location='cpu', weights_only=True, mmap=True)
        if a.get('run_id') is not None and a.get('run_id') == b.get('run_id'):
            return a['iter_num'] <= b['iter_num']
        args = lambda c: {k: v for k, v in c['model_args'].items() if k != 'folded'}
        return (a['iter_num'], args(a), a['config'].get('seed')) == (b['iter_num'], args(b), b['config'].get('seed'))
    except Exception:  # either unreadable, or without those fields: not known to be a copy
        return False


def iter_of(path):
    """The step of the checkpoint (folded or not) at path; None if it records none or cannot be read."""
    try:
        step = torch.load(path, map_location='cpu', weights_only=True, mmap=True).get('iter_num')
    except Exception:
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def run_of(path):
    """The run (train.py's run_id) of the checkpoint at path; None if it records none or cannot be read."""
    try:
        return torch.load(path, map_location='cpu', weights_only=True, mmap=True).get('run_id')
    except Exception:
        return None


def same_run(run_id, path):
    """Whether run_id, an export's record, is the run of the checkpoint at path."""
    try:
        return run_id is not None and torch.load(path, map_location='cpu', weights_only=True,
                                                 mmap=True).get('run_id') == run_id
    except Exception:  # unreadable: not known to be the same run
        return False


def same_path(a, b):
    return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b) or os.path.abspath(a) == os.path.abspath(b)


def unused(out_dir):
    """A name for the folded checkpoint that no file in out_dir holds: the default, else one numbered."""
    names = ['ckpt_folded.pt'] + [f'ckpt_folded_{i}.pt' for i in range(2, 1000)]
    return next(name for name in names if not os.path.lexists(os.path.join(out_dir, name)))


def check_outputs(args, path):
    """Refuse, before anything is written, an output that would replace a file fold.py did not
    make: the training checkpoint, the checkpoint being folded, or any other file of the run."""
    out = os.path.join(args.out_dir, args.out)
    if not args.out.strip() or args.out.endswith(('/', os.sep)) or os.path.isdir(out):
        fail(f"out={args.out} is not a file name: name the folded checkpoint's file, e.g. "
             f"--out={unused(args.out_dir)}")
    if os.path.abspath(out) == os.path.abspath(path) or (os.path.exists(out) and os.path.samefile(out, path)):
        fail(f"out={args.out} names the checkpoint being folded ({path}): name a new file, e.g. "
             f"--out={unused(args.out_dir)}")
    if os.path.basename(out) == 'ckpt.pt':
        fail(f"out={args.out} is named ckpt.pt, train.py's checkpoint, which fold.py never writes: name "
             f"another file, e.g. --out={unused(args.out_dir)}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        fail(f"out={args.out} lies in {os.path.dirname(os.path.abspath(out))}, which does not exist: name a "
             f"file in an existing folder, e.g. --out={unused(args.out_dir)}")
    if os.path.exists(out) and folded_from(out) is None:
        fail(f"{out} exists and is not a checkpoint fold.py wrote, so fold.py will not replace it: name a new "
             f"file with --out, e.g. --out={unused(args.out_dir)}")
    step = iter_of(path)
    if os.path.exists(out) and step is not None and (iter_of(out) or 0) > step and \
            (same_path(folded_from(out), path) or same_run(run_of(out), path)):  # an earlier checkpoint put back
        fail(f"{out} holds the fold of iter {iter_of(out)}, a later step than {path}'s iter {step} (an earlier "
             f"checkpoint put back in its place?), so fold.py will not replace it: keep it, and fold this one into "
             f"a new file, e.g. --out={unused(args.out_dir)}")
    if os.path.exists(out) and not same_path(folded_from(out), path) and not copy_of(out, path):
        fail(f"{out} holds a model folded from {folded_from(out)}, not from {path}, so fold.py will not replace it: "
             f"name a new file with --out, e.g. --out={unused(args.out_dir)}")
    out_folder = os.path.dirname(os.path.abspath(out))
    if not same_path(out_folder, os.path.dirname(os.path.abspath(path))) and \
            os.path.isfile(os.path.join(out_folder, 'ckpt.pt')):  # sample.py --out_dir=<it> would take it for its run's
        fail(f"out={args.out} lies in {out_folder}, the folder of another run (it holds ckpt.pt), where the folded "
             f"{path} would pass for that run's own: name a file beside it, e.g. --out={unused(args.out_dir)}, or in "
             f"a folder that holds no run")
    ending = os.path.splitext(args.out)[1].lower()
    if ending and ending not in ('.pt', '.pth', '.ckpt'):  # .safetensors, .bin, .json: another program's format
        fail(f"out={args.out} ends in {ending}, but fold.py writes a PyTorch checkpoint (torch.save, read by sample.py "
             f"and evaluate.py): name it with .pt, e.g. --out={unused(args.out_dir)}"
             + (", and pass --export_hf=<a folder> for the safetensors weights transformers loads"
                if ending in ('.safetensors', '.bin') else ""))
    why = cannot_write(os.path.dirname(os.path.abspath(out)))
    if why:
        fail(f"{why}: choose an --out_dir or --out you may write")
    why = unreplaceable(out)
    if why:
        fail(f"{why}, so fold.py will not replace it, and nothing was changed: make it writable (an immutable or "
             f"read-only file? lsattr and ls -l show which), or name a new file, e.g. --out={unused(args.out_dir)}")
    hf_dir = args.export_hf
    if hf_dir is not None and os.path.islink(os.path.normpath(hf_dir)):  # an export replaces its folder whole
        fail(f"export_hf={hf_dir} is a symbolic link (to {os.readlink(os.path.normpath(hf_dir))}), and an export "
             f"replaces its folder whole, which would replace the link: name the folder itself, e.g. "
             f"--export_hf={shlex.quote(os.path.realpath(hf_dir))}")
    if hf_dir is not None:
        from hf import export_source, is_export
        run_dir = os.path.dirname(os.path.abspath(path))
        if not os.path.relpath(run_dir, os.path.abspath(hf_dir)).startswith('..'):  # the run's folder, or above it
            fail(f"export_hf={hf_dir} holds the checkpoint being exported ({path}), and an export replaces its "
                 f"folder whole: name a new folder for it, e.g. --export_hf={run_dir.rstrip(os.sep)}_hf")
        inside = os.path.relpath(os.path.abspath(out), os.path.abspath(hf_dir))
        if not inside.startswith('..'):  # the export replaces its folder whole
            fail(f"out={out} lies inside export_hf={hf_dir}, which the export replaces: name a file outside it, "
                 f"e.g. --out={unused(args.out_dir)}")
        if os.path.isdir(hf_dir) and os.listdir(hf_dir) and not is_export(hf_dir):
            fail(f"export_hf={hf_dir} holds files fold.py did not export, so fold.py will not write over them: "
                 f"name a new or empty folder")
        if os.path.isdir(hf_dir) and export_source(hf_dir) and not same_path(export_source(hf_dir), path) and \
                not same_run(export_source(hf_dir, 'run_id'), path):  # a run folder copied or moved with its export
            fail(f"export_hf={hf_dir} holds an export of {export_source(hf_dir)}, not of {path}, so fold.py will "
                 f"not replace it: name a new or empty folder")
        exported = export_source(hf_dir, 'iter') if os.path.isdir(hf_dir) else None
        if isinstance(exported, int) and step is not None and exported > step:
            fail(f"export_hf={hf_dir} holds the export of iter {exported}, a later step than {path}'s iter {step} "
                 f"(an earlier checkpoint put back in its place?), so fold.py will not replace it: name a new or "
                 f"empty folder")
        why = unreplaceable(hf_dir)
        if why:  # the export replaces its folder whole, every file of it
            fail(f"export_hf={hf_dir} cannot be replaced whole: {why}; nothing was changed, and the old export "
                 f"there is kept as it was: make it writable (an immutable or read-only file? lsattr and ls -l "
                 f"show which), or name a new folder with --export_hf")
    return out


def export_tokenizer(ckpt, data_dir, fail):
    """The HF tokenizer an export carries, built before anything is written: the one prepare_owt.py
    --tokenizer saved beside the data when it is there, else one converted from the checkpoint's own
    tokenizer (tiktoken's GPT-2, or the run's SentencePiece model)."""
    from transformers import AutoTokenizer
    from tokens import hf_tokenizer
    meta = {}
    if data_dir and os.path.isdir(data_dir):
        try:
            meta = read_meta(data_dir)
        except ValueError as e:
            fail(f"cannot export the run's tokenizer: {e}: prepare the data again, or drop --export_hf")
    if 'tokenizer_dir' in meta:
        tokenizer_dir = os.path.join(data_dir, str(meta['tokenizer_dir']))
        if not os.path.isdir(tokenizer_dir):
            fail(f"cannot export the run's tokenizer: {tokenizer_dir}, which {data_dir}/meta.json names, is "
                 f"missing: prepare the data again, or drop --export_hf")
        return AutoTokenizer.from_pretrained(tokenizer_dir)
    if ckpt.get('tokenizer') is None:
        fail("cannot export: the checkpoint names no tokenizer (its data had no meta.json), and an export "
             "carries one: train on data prepared by prepare_tinystories.py or prepare_owt.py")
    try:
        return hf_tokenizer(ckpt['tokenizer'])
    except Exception as e:  # tiktoken offline without its files, a damaged model: the library's own types
        fail(f"cannot export the run's tokenizer ({type(e).__name__}: {e}): connect once or set "
             f"TIKTOKEN_CACHE_DIR for GPT-2's, or drop --export_hf")


DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@torch.no_grad()
def export(args, ckpt, model, folded, reference, tokenizer, idx, source, path):
    """--export_hf: the folded model (folded, the very weights of the folded checkpoint) as an HF folder
    (written at path, then moved to --export_hf) with its tokenizer and a model card (README.md) that
    records how its logits in each dtype compare with reference, the float64 model at g = 0 (folded, and
    with the same embeddings reset under --reset_unseen), on idx."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as transformers_logging
    from hf import export_hf
    transformers_logging.disable_progress_bar()  # its checks below load the export three times
    tokenizer.save_pretrained(path)
    sigma, alpha, bound = export_hf(model, folded, path, tokenizer.bos_token_id, tokenizer.eos_token_id,
                                     ckpt['folded_from'], ckpt.get('run_id'), ckpt.get('iter_num'))
    reference = reference.eval()(idx)[0]
    rows = []
    for dtype in DTYPES:
        logits = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()(idx).logits.double()
        error = ((logits - reference).abs().max() / reference.abs().max()).item()
        agree = (logits.argmax(-1) == reference.argmax(-1)).double().mean().item()
        rows.append(f"| {str(dtype).removeprefix('torch.')} | {error:.2e} | {100 * agree:.1f}% |")
        print(f"export in {str(dtype).removeprefix('torch.')}: max |dlogits| / max |logits| = {error:.2e}, "
              f"argmax agrees on {100 * agree:.1f}% of positions ({source})")
    cfg = model.config
    protocol = 'FakeLN (Baroni et al.)' if cfg.fakeln else f"All-Taper, scale loss {cfg.aux_loss}"
    hf_class = 'GPT2LMHeadModel' if cfg.arch == 'gpt2' else 'LlamaForCausalLM'
    reset = (f" (the input embeddings of {ckpt['reset_unseen']} tokens absent from the run's train.bin set to "
             f"their mean, in both: --reset_unseen)") if ckpt.get('reset_unseen') else ""
    card = f"""# A norm-free {cfg.arch} model, folded

Exported by tapernorm's `fold.py` from `{os.path.abspath(os.path.join(args.out_dir, args.ckpt))}`
(iter {ckpt.get('iter_num')}). {protocol}: every norm was removed during training, and the fixed maps
left at g = 0 are folded into the weights. {cfg.n_layer} layers, d = {cfg.n_embd}, vocabulary {cfg.vocab_size}.
Last validation loss in the run's log: {last_val_loss(args.out_dir)}.

`{hf_class}` always runs its norms, so here every norm is an identity: eps = sigma^2 with sigma =
{sigma:g} and norm weights sigma, the residual stream scaled by alpha = {alpha:.4g}. A norm's relative
error is (r / sqrt(eps))^2 / 2 for a residual of RMS r; at four times the largest typical RMS the
run calibrated, that is {bound:.2g}. Its final norm holds the model's own fixed final map.

Logits in each dtype against the float64 model at g = 0{reset}, on {source} ({idx.numel()} tokens):

| dtype | max abs(dlogits) / max abs(logits) | argmax agrees |
|---|---|---|
{chr(10).join(rows)}

```python
from transformers import pipeline
generate = pipeline('text-generation', model='{args.export_hf}')   # dtype=torch.float16 or torch.bfloat16 too
```
"""
    with open(os.path.join(path, 'README.md'), 'w', encoding='utf-8') as f:
        f.write(card)


def last_val_loss(out_dir):
    """The last val_loss train.py logged in out_dir, as text."""
    import json
    value = None
    try:
        with open(os.path.join(out_dir, 'log.jsonl'), encoding='utf-8') as f:
            for line in f:
                row = json.loads(line)
                if isinstance(row, dict) and isinstance(row.get('val_loss'), (int, float)):
                    value = (row['val_loss'], row.get('iter'))
    except (OSError, ValueError):
        pass
    return 'not recorded' if value is None else f"{value[0]:.4f} at iter {value[1]} (train.py's estimate)"


def main(argv=None):
    try:
        args = parse_flags(FLAGS, argv)
    except FlagError as e:
        fail(str(e))
    path, elsewhere = run_checkpoint(args.out_dir, args.ckpt, 'fold', folded_ok=False)
    if elsewhere:  # the folded file goes in --out_dir: beside another run's files
        fail(f"cannot fold: {elsewhere}; fold.py writes beside the checkpoint it folds, so name its own folder")
    broken_link(path, 'fold')
    if not os.path.isfile(path) and os.path.isdir(args.out_dir) and training_in(args.out_dir):
        fail(f"cannot fold {path} yet: a train.py is training in {args.out_dir} right now and has not written its "
             f"first checkpoint: fold once it has, or once the run ends")
    if not os.path.isfile(path):
        fail(f"cannot fold {path}: there is no checkpoint there; " + missing_hint(
            args.out_dir, args.ckpt, "pass --out_dir=<a tapered run's folder> (and --ckpt=<its checkpoint file>)",
            folded_ok=False))
    try:
        ckpt = load_checkpoint(path)
        model = GPT.from_checkpoint(ckpt)
    except (FileNotFoundError, ValueError) as e:
        fail(f"cannot fold: {e}")
    mixed = mixed_run_note(path, ckpt)
    if mixed:
        print(mixed)
    cfg = model.config
    from hf import export_source, is_export
    source = (ckpt.get('config') or {}).get('init_from')
    if args.export_hf is not None and cfg.taper == 'none' and not cfg.fakeln and isinstance(source, str) \
            and os.path.isdir(source) and is_export(source):
        origin = export_source(source)
        fail(f"cannot export {path}: it is a fine-tune of the norm-free export {source}, whose norms it kept as "
             f"layers of eps {cfg.norm_eps:g}, and fold.py exports only a model it made norm-free itself: use this "
             f"run's ckpt.pt as it is (sample.py, evaluate.py), or train " +
             (f"the run the export came from on (train.py --init_from=resume --out_dir={os.path.dirname(origin)})"
              if origin else "the run the export came from on") + ", then fold and export that")
    if args.export_hf is not None and cfg.taper == 'none' and not cfg.fakeln and cfg.norm != 'dyt':
        fail(f"cannot export {path}: it is a Baseline run, whose norms stay, so there is no norm-free model to "
             f"export: train with --taper=all (e.g. config/finetune_gpt2_s_alltaper.py) to g = 0, "
             f"then fold and export that run")
    if cfg.folded:  # the run's training checkpoint is what folds; an export is made from it too
        training = os.path.join(os.path.dirname(path), 'ckpt.pt')
        fail(f"cannot fold {path}: this model is already folded: " +
             ("fold the run's training checkpoint (--ckpt=ckpt.pt)" if os.path.isfile(training) and
              not same_path(training, path) else
              f"sample or score it as it is (sample.py --out_dir={os.path.dirname(path)} "
              f"--ckpt={os.path.basename(path)}, or diagnose.py with the same flags); folding or exporting needs the "
              f"run's training checkpoint, which this folder does not hold"))
    try:
        folded = fold_model(model)
    except ValueError as e:
        fail(f"cannot fold {path}: {e}")
    out = check_outputs(args, path)
    if training_in(os.path.dirname(os.path.abspath(out))):  # its --overwrite or resume would outlive this fold
        fail(f"a train.py is training in {os.path.dirname(os.path.abspath(out))} right now, and {out} would sit "
             f"beside that run: fold once it ends, or write the folded file elsewhere with --out=<a path in "
             f"another folder>")
    if said := replaced_link(out, 'fold.py'):  # ckpt_folded.pt a link, e.g. to a shared folder of models
        print(f"note: {said}")
    if args.export_hf is not None:
        from hf import check_exportable
        try:
            check_exportable(model)
        except ValueError as e:
            fail(f"cannot export {path}: {e}")
    data_dir = (ckpt.get('config') or {}).get('data_dir')
    counts = None
    if args.reset_unseen:
        if folded.lm_head.weight is folded.transformer.wte.weight:
            fail(f"cannot reset unseen embeddings of {path}: its head is the embedding (tied), so resetting "
                 f"input rows would change every output logit; only a folded All-Taper or FakeLN model has a "
                 f"head of its own: drop --reset_unseen")
        counts = train_counts(data_dir, model.config.vocab_size)
        if counts is None and isinstance(data_dir, str) and not os.path.isabs(data_dir):  # read from the folder run in
            started = [d for d in (os.path.dirname(os.path.dirname(os.path.abspath(path))), HERE)
                       if os.path.isfile(os.path.join(d, data_dir, 'train.bin'))]
            fail(f"cannot reset unseen embeddings: the run's data_dir ({data_dir}) is relative to the folder the run "
                 f"was started in, and {os.getcwd()} holds no {os.path.join(data_dir, 'train.bin')}: run fold.py from "
                 + (f"{started[0]} (where it is)" if started else "that folder") + ", or drop --reset_unseen")
        if counts is None:
            fail(f"cannot reset unseen embeddings: no train.bin in the run's data_dir ({data_dir}): prepare "
                 f"it again there, or drop --reset_unseen")
        if args.export_hf is not None and (cfg.arch == 'gpt2' or cfg.tied_head):
            fail(f"cannot export {path} with --reset_unseen: the {'GPT2LMHeadModel' if cfg.arch == 'gpt2' else 'tied-head Llama'} "
                 f"it exports to reads its head from the input embeddings, so resetting input rows there would change "
                 f"every logit: export without --reset_unseen, or fold with it and no --export_hf")
    tokenizer = None
    if args.export_hf is not None:
        tokenizer = export_tokenizer(ckpt, data_dir, fail)
    try:
        idx, source = check_tokens(model.config, data_dir)
    except ValueError as e:
        fail(f"cannot check the fold on the run's validation text: {e}; prepare the data again")
    # every refusal is above: from here on fold.py writes, one fold.py at a time for this checkpoint
    hold(path)
    diff = max_logit_diff(model, folded, idx)
    with torch.no_grad():
        scale = model.eval()(idx)[0].abs().max().item()
    model64 = copy.deepcopy(model).double()  # the algebra alone, without float32 weights
    exact = max_logit_diff(model64, fold_model(model64), idx, torch.float64)
    print(f"max |logits(g=0) - logits(folded)| = {diff:.2e} on {source} "
          f"(max |logits| {scale:.3g}, float32); {exact:.2e} with both in float64")
    reset = None
    reference = model64  # what an export's logits are compared with
    if args.reset_unseen:  # after the check above: it changes the function on windows with those tokens
        reset = reset_unseen_embeddings(folded, counts)
        reference = fold_model(model64)
        reset_unseen_embeddings(reference, counts)
        print(f"reset the input embeddings of {reset} tokens that never occur in {data_dir}/train.bin")
    ckpt = dict(model=folded.state_dict(), reset_unseen=reset, model_args=asdict(folded.config), config=ckpt.get('config'),
                iter_num=ckpt.get('iter_num'), tokenizer=ckpt.get('tokenizer'), folded_from=os.path.abspath(path),
                run_id=ckpt.get('run_id'))
    # Both files are written aside and take their names only once both are whole: a failure leaves the
    # folders as they were.
    staging = aside(args.export_hf) if args.export_hf is not None else None
    old_export = staging is not None and os.path.isdir(args.export_hf)
    written = aside(out)
    wrote = None  # the checkpoint, once in place: a failure after it leaves it, and says so
    try:
        torch.save(ckpt, written)
        if staging is not None:
            claim(staging, args.export_hf)
            export(args, ckpt, model, folded, reference, tokenizer, idx, source, staging)
            others = sorted(set(os.listdir(args.export_hf)) - set(os.listdir(staging))) \
                if os.path.isdir(args.export_hf) else []  # empty, or fold.py's export of this checkpoint
            if others:  # put there since: the user's, which a replaced export would take with it
                fail(f"{args.export_hf} holds {', '.join(others[:3])}, which the export does not write, so fold.py "
                     f"will not replace the folder: move {'it' if len(others) == 1 else 'them'} out, or export "
                     f"elsewhere")
        os.replace(written, out)
        wrote = out
        if staging is not None:
            swap(staging, args.export_hf)
    except (OSError, RuntimeError) as e:
        reason = write_failure(e, out)
        if reason is None:
            raise
        if not os.path.isdir(args.out_dir):  # mv run run2 while fold.py wrote beside its checkpoint
            fail(f"{args.out_dir} was moved or removed while fold.py wrote into it, so nothing was written in its "
                 f"place: run fold.py again with --out_dir=<where the run is now> (that removes the hidden "
                 f"{os.path.basename(written)} this one left there)")
        target = str(getattr(e, 'filename2', None) or getattr(e, 'filename', None) or out)
        ours = (staging, aside(args.export_hf, 'old')) if staging else ()
        target = out if target == written else args.export_hf if ours and target.startswith(ours) else target
        discard(written)
        left = f" (only {written}, which the folder does not let fold.py remove: an append-only folder?)" \
            if os.path.lexists(written) else ""
        kept = f", and the old export in {args.export_hf} is kept as it was" if old_export else ""
        fail(f"cannot write {target} ({reason}): " + (f"{wrote} was written, the export was not{kept}; " if wrote else
                                                      f"nothing was changed{left}{kept}; ")
             + (write_remedy(reason) or "make it writable (a read-only or immutable file? see ls -l, lsattr), or "
                                        "name another file with --out (or folder with --export_hf)"))
    finally:  # this process's own leftovers: another fold's staging folder is that fold's
        for leftover in (written, staging if staged is not None else None):
            if leftover:
                discard(leftover)
    print(f"wrote {out}")
    if staging is not None:
        print(f"wrote {args.export_hf} (loads with {'GPT2LMHeadModel' if model.config.arch == 'gpt2' else 'LlamaForCausalLM'}"
              f".from_pretrained; its tokenizer and a model card with it)")

if __name__ == '__main__':
    main()
