"""
Where does a norm-free model fail? A short report on the worst held-out windows of any checkpoint,
folded or not, TinyStories or GPT-2:

    python diagnose.py --out_dir=out-repro/all-s1337
    python diagnose.py --out_dir=out-gpt2-s-alltaper --ckpt=ckpt_folded.pt --split=val --plot=residual.png

With no norm left, nothing resets the scale of the residual stream: a token whose embedding row is
far larger than its peers (e.g. one never seen in training, whose tied row only ever receives the
softmax's push) can grow layer by layer until a window's loss explodes. For the worst windows the
report gives the cross-entropy distribution and its outliers; in a window that stands out (CE above
twice the median), the largest-norm tokens before its peak, with their training counts, their
embedding norms against the typical norm, and the window's CE with each one's input row reset to the
mean seen row (a counterfactual); a suspect token only when one stands out; and the residual-stream
norm at the peak position after every layer, with the first block that grows it more than --growth
times that block's typical growth. A block whose typical growth is --growth times the median block's
is named on its own: a blown-up weight shows there, not as a token. Scored in float64 by default, so a blow-up
reads as a number and not as float32's overflow. The last line is JSON.
"""

import json
import math
import os
import shlex
import sys

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import torch
import torch.nn.functional as F

from configurator import (FlagError, cannot_write, figure_metadata, flag, is_our_figure, matplotlib_folder, parse_flags,
                          replaced_link, repository_folder, unreplaceable)
from model import (GPT, broken_link, folded_note, load_checkpoint, missing_hint, mixed_run_note,
                   replaced_run, run_checkpoint, taper_note)
from tokens import (data_tokenizer, inner_data, load_tokenizer, open_tokens, other_tokens, prepare_again, raw_text,
                    read_meta, same_tokenizer)


SPLITS = ('val', 'train', 'pile', 'pile_filtered')  # what prepare_tinystories.py and prepare_owt.py write


def fail(message):
    """Stop with one sentence that says what to do."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def tokens_of(data_dir, split, tokenizer=None):
    if not os.path.isdir(data_dir):
        fail(f"no data folder at {data_dir}: pass --data_dir, the folder the run was trained on")
    try:
        return open_tokens(data_dir, split)
    except FileNotFoundError as e:
        there = [s for s in SPLITS if os.path.isfile(os.path.join(data_dir, f'{s}.bin'))]
        fail(f"{e}: choose --split among the splits {data_dir} holds ({', '.join(there)})" if there else
             f"{e}: {inner_data(data_dir, split, tokenizer=tokenizer) or 'pass --data_dir, the folder the run was trained on'}")
    except ValueError as e:
        fail(f"cannot diagnose: {e}; {prepare_again(data_dir, e)}")


def train_counts(data_dir, vocab_size):
    """How often each token id occurs in the training split (None when it is not at hand)."""
    if not os.path.isfile(os.path.join(data_dir or '', 'train.bin')):
        return None
    data = tokens_of(data_dir, 'train')
    counts = np.zeros(vocab_size, dtype=np.int64)
    for i in range(0, len(data), 2**26):
        counts += np.bincount(data[i:i + 2**26], minlength=vocab_size)[:vocab_size]
    return counts


@torch.no_grad()
def residual_norms(model, idx):
    """(ce per window (B,), residual-stream L2 norm (B, L + 1, T)): row 0 is the input of the first
    block, row l the output of block l."""
    norms = []
    hooks = [model.transformer.h[0].register_forward_pre_hook(lambda m, args: norms.append(args[0].norm(dim=-1)))]
    hooks += [b.register_forward_hook(lambda m, args, out: norms.append(out.norm(dim=-1)))
              for b in model.transformer.h]
    try:
        logits = model(idx[:, :-1])[0]
    finally:
        for h in hooks:
            h.remove()
    ce = F.cross_entropy(logits.transpose(1, 2), idx[:, 1:], reduction='none').mean(dim=1)
    return ce, torch.stack(norms, dim=1)


def window_tokens(data, w, T):
    """Window w: T tokens and the T targets after them."""
    return torch.from_numpy(data[w * T:w * T + T + 1].astype(np.int64))


def score_windows(model, data, T, n, batch_size=16):
    """(cross-entropy, peak last-layer residual norm) of each of the first n windows, as arrays, and
    each block's typical growth: the median, over every position of every window, of the factor by
    which it multiplies the residual norm."""
    device = model.transformer.wte.weight.device
    ce, peaks, growths = [], [], []
    for start in range(0, n, batch_size):
        idx = torch.stack([window_tokens(data, w, T) for w in range(start, min(n, start + batch_size))]).to(device)
        c, norms = residual_norms(model, idx)
        ce += c.tolist()
        peaks += norms[:, -1].max(dim=1).values.tolist()
        growths.append((norms[:, 1:] / norms[:, :-1]).transpose(0, 1).reshape(len(model.transformer.h), -1).cpu())
    typical = torch.cat(growths, dim=1).double().nan_to_num(nan=math.inf).median(dim=1).values
    return np.array(ce), np.array(peaks), typical.numpy()


TEMPERATURE_RANGE = (0.25, 4.0)  # where prelogit_confidence looks for the best single logit scale


@torch.no_grad()
def prelogit_confidence(model, data, T, n, batch_size=16):
    """How much of the model's cross-entropy rides on the length of its pre-logit vectors z (ln_f's
    output, the head's input) over the first n windows: dict(cv, ce, ce_tempered, ce_one_rms) with cv
    the coefficient of variation over tokens of z's RMS (a final norm makes it 0 up to eps), ce the
    mean CE, ce_tempered the mean CE with every logit times the best single temperature, and
    ce_one_rms the same with each z first rescaled to the mean RMS over all tokens: the model's
    directions without per-token confidence. ce_one_rms - ce_tempered is what that confidence is worth."""
    device = model.transformer.wte.weight.device
    zs, ys = [], []
    for start in range(0, n, batch_size):
        idx = torch.stack([window_tokens(data, w, T) for w in range(start, min(n, start + batch_size))]).to(device)
        zs.append(model.transformer.ln_f(model.trunk(idx[:, :-1])))
        ys.append(idx[:, 1:])
    rms = [z.pow(2).mean(-1, keepdim=True).sqrt() for z in zs]
    every = torch.cat([r.flatten() for r in rms])
    mean_rms = every.mean()

    head = model.lm_head.weight.float()  # the searches run the head in float32: z is the model's own
    bias = None if model.lm_head.bias is None else model.lm_head.bias.float()

    def mean_ce(rescale, temperature):
        total = sum(F.cross_entropy(temperature * F.linear((z / r * mean_rms if rescale else z).float(), head, bias).flatten(0, 1),
                                    y.flatten(), reduction='sum').item() for z, r, y in zip(zs, rms, ys))
        return total / sum(y.numel() for y in ys)

    def best(rescale, steps=14):  # CE is convex in the temperature: golden-section search, ends included
        a, b = TEMPERATURE_RANGE
        ends = min(mean_ce(rescale, a), mean_ce(rescale, b))
        g = (math.sqrt(5) - 1) / 2
        c, d = b - g * (b - a), a + g * (b - a)
        fc, fd = mean_ce(rescale, c), mean_ce(rescale, d)
        for _ in range(steps):
            if fc < fd:
                b, d, fd = d, c, fc
                c = b - g * (b - a)
                fc = mean_ce(rescale, c)
            else:
                a, c, fc = c, d, fd
                d = a + g * (b - a)
                fd = mean_ce(rescale, d)
        return min(fc, fd, ends)
    return dict(cv=(every.std() / mean_rms).item(), ce=mean_ce(False, 1.0), ce_tempered=best(False),
                ce_one_rms=best(True))


@torch.no_grad()
def reset_row_ce(model, idx, token, row):
    """The cross-entropy of window idx (1, T + 1) with token's input embedding replaced by row at every
    position that holds it: the counterfactual of one token. The head (tied or not) is untouched."""
    def swap(module, args, out):
        return torch.where((args[0] == token)[..., None], row.to(out.dtype), out)
    hook = model.transformer.wte.register_forward_hook(swap)
    try:
        return residual_norms(model, idx)[0].item()
    finally:
        hook.remove()


def diagnose(model, data, counts=None, window=256, max_windows=512, batch_size=16, top=3, norm_outlier=3.0,
             growth=10.0):
    """The report as a dict. data: a token array; consecutive windows of window + 1 tokens are scored.
    (See also the module's docstring.)
    A worst window stands out when its CE is not within twice the median. In such a window, each of
    the five largest-norm tokens before its peak is re-scored with its input row reset to the mean row
    of the tokens seen in training (all rows without counts); the suspect is the one whose reset
    lowers the CE most, named only if it stands out: its row norm_outlier times the median norm or
    more, never seen in training, or its reset removing more than half of the window's excess over
    the median. In every worst window, the first block that grows the residual norm at the peak more
    than growth times its typical growth (the median over all positions scored) is flagged; and, for
    the whole model, the first block whose typical growth is more than growth times the median
    block's (a weight, not a token, as the cause)."""
    T = min(window, model.config.block_size)
    n = min(max_windows, (len(data) - 1) // T)
    if n < 1:
        raise SystemExit(f"the split holds {len(data)} tokens, fewer than one window of {T + 1}")
    emb = model.transformer.wte.weight.detach()
    row_norm = emb.double().norm(dim=1)
    typical = row_norm.median().item()
    seen = torch.ones(len(emb), dtype=torch.bool) if counts is None else torch.from_numpy(counts > 0)
    mean_row = emb[seen.to(emb.device)].mean(dim=0)
    ce, peaks, typical_growth = score_windows(model, data, T, n, batch_size)
    finite = np.isfinite(ce)
    median = float(np.median(ce[finite])) if finite.any() else math.nan
    outliers = [int(w) for w in np.argsort(np.where(finite, ce, np.inf))[::-1]
                if not (finite[w] and ce[w] <= 2 * median)]
    report = dict(windows=n, window=T, median=median, mean=float(ce.mean()) if finite.all() else math.inf,
                  non_finite=int((~finite).sum()), outliers=len(outliers), typical_embedding_norm=typical,
                  quantiles={q: float(np.quantile(ce[finite], q / 100)) for q in (10, 50, 90, 99)} if finite.any() else {},
                  unseen_tokens=None if counts is None else int((counts == 0).sum()), norm_outlier=norm_outlier,
                  growth=growth, typical_growth=typical_growth.tolist(), worst=[])
    # A block that grows the stream far more than the model's median block does, at typical positions:
    # a weight that blows every window up, which no token or window singles out.
    usual = float(np.median(typical_growth))
    report['weight_block'] = next((l for l, g in enumerate(typical_growth) if not g <= growth * usual), None)
    for w in (outliers or list(np.argsort(ce)[::-1]))[:top]:
        idx = window_tokens(data, w, T)[None].to(emb.device)
        _, norms = residual_norms(model, idx)
        last = norms[0, -1].nan_to_num(nan=math.inf)
        pos = int(last.argmax())                                   # the position where the stream peaks
        upto = idx[0, :pos + 1].tolist()
        stands_out = w in outliers
        tokens = []
        for t in sorted(set(upto), key=lambda t: -row_norm[t].item())[:5]:
            count = None if counts is None else int(counts[t])
            ratio = row_norm[t].item() / typical
            reset_ce = reset_row_ce(model, idx, t, mean_row) if stands_out else None
            reasons = [] if not stands_out else (
                ([f"embedding norm {ratio:.3g}x typical"] if ratio >= norm_outlier else [])
                + (["never seen in training"] if count == 0 else [])
                + ([f"its reset lowers the CE from {ce[w]:.4g} to {reset_ce:.4g}"]
                   if not ce[w] - reset_ce <= 0.5 * (ce[w] - median) else []))  # NaN: a reset that cures
            tokens.append(dict(id=t, position=max(i for i, u in enumerate(upto) if u == t), train_count=count,
                               embedding_norm_ratio=ratio, reset_ce=reset_ce, reasons=reasons))
        ranked = sorted(tokens, key=lambda t: -np.nan_to_num(ce[w] - t['reset_ce'], nan=np.inf)) if stands_out else []
        suspect = next((t for t in ranked if t['reasons']), None)
        through = norms[0, :, pos].nan_to_num(nan=math.inf).double()
        ratios = (through[1:] / through[:-1]).tolist()            # block l multiplies the norm by ratios[l]
        grown = next((l for l, r in enumerate(ratios) if not r <= growth * typical_growth[l]), None)
        report['worst'].append(dict(window=int(w), ce=float(ce[w]), stands_out=stands_out, position=pos,
                                    suspect=suspect and suspect['id'], reasons=suspect['reasons'] if suspect else [],
                                    tokens=tokens, residual_norm=norms[0, :, pos].tolist(), block_growth=ratios,
                                    growth_block=grown))
    report['peak_residual_norm'] = dict(median=float(np.median(peaks)), max=float(np.max(peaks)))
    return report


def print_report(report, decode=None):
    name = (lambda t: repr(decode([t]))) if decode else str
    print(f"{report['windows']} windows of {report['window']} tokens: median CE {report['median']:.4g}, "
          f"mean {report['mean']:.4g}; {report['non_finite']} non-finite, {report['outliers']} above twice the median")
    if report['quantiles']:
        print("CE quantiles: " + ", ".join(f"p{q} {v:.4g}" for q, v in report['quantiles'].items()))
    if report['unseen_tokens'] is not None:
        print(f"{report['unseen_tokens']} vocabulary entries never occur in the training tokens")
    print(f"typical embedding row norm (median over the vocabulary): {report['typical_embedding_norm']:.4g}")
    for worst in report['worst']:
        print(f"\nwindow {worst['window']}: CE {worst['ce']:.4g} ({worst['ce'] / report['median']:.3g}x the median); "
              f"the residual stream peaks at position {worst['position']}")
        if not worst['stands_out']:
            print("  it does not stand out (its CE is within twice the median): no suspect")
        elif worst['suspect'] is None:
            print(f"  no token stands out: none has an embedding norm {report['norm_outlier']:.3g}x typical or more, "
                  f"none is unseen, and resetting none removes half of the excess CE")
        else:
            print(f"  suspect token {name(worst['suspect'])}: {'; '.join(worst['reasons'])}")
        for t in worst['tokens']:
            seen = '' if t['train_count'] is None else f", {t['train_count']:,} times in training"
            reset = '' if t['reset_ce'] is None else f"; CE with its input row reset: {t['reset_ce']:.4g}"
            print(f"  token {name(t['id'])} (id {t['id']}, last at {t['position']}): embedding norm "
                  f"{t['embedding_norm_ratio']:.3g}x typical{seen}{reset}")
        print("  residual norm by layer: " + " -> ".join(f"{v:.3g}" for v in worst['residual_norm']))
        b = worst['growth_block']
        if b is None:
            print(f"  no block grows it more than {report['growth']:.3g}x its typical growth")
        else:
            print(f"  growth starts at block {b} (transformer.h.{b}): x{worst['block_growth'][b]:.3g} here, "
                  f"x{report['typical_growth'][b]:.3g} at a typical position")
    b, typical = report['weight_block'], report['typical_growth']
    if b is not None:
        print(f"\nblock {b} (transformer.h.{b}) multiplies the residual norm by {typical[b]:.3g} at a typical "
              f"position, more than {report['growth']:.3g}x the median block's {np.median(typical):.3g}: look at its "
              f"weights")


def plot(report, path):
    matplotlib_folder()
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for worst in report['worst']:
        ax.plot(worst['residual_norm'], marker='o', label=f"window {worst['window']} (CE {worst['ce']:.3g})")
    ax.set_yscale('log')
    ax.set_xlabel('layer (0 = embedding)')
    ax.set_ylabel('residual-stream L2 norm')
    ax.legend(fontsize=7)
    fig.tight_layout()
    drawn = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        fig.savefig(drawn, dpi=120, metadata=figure_metadata(path, 'diagnose.py'), format=os.path.splitext(path)[1][1:])
        os.replace(drawn, path)  # a link at path is replaced, never written through to the file it names
    finally:
        if os.path.lexists(drawn):  # a full disk part-way: the earlier figure stays as it was
            os.remove(drawn)


FLAGS = dict(
    out_dir=flag(None, "the run's folder", type=str, required=True, path='dir'),
    ckpt=flag('ckpt.pt', "the checkpoint file in out_dir: ckpt.pt, or ckpt_folded.pt (fold.py)"),
    data_dir=flag(None, "the data folder (None: the run's own, from its checkpoint)", type=str, path='dir'),
    split=flag('val', "the token file to score", choices=SPLITS),
    window=flag(256, "tokens per scored window (cropped to the model's context)", min=1),
    max_windows=flag(512, "windows to score at most", min=1),
    top=flag(3, "worst windows to report", min=1),
    norm_outlier=flag(3.0, "an embedding row this many times the median row norm stands out", above=1),
    growth=flag(10.0, "flag a block that grows the residual norm this many times more than it typically does "
                      "(at the peak), or than the median block does (at a typical position)", above=1),
    dtype=flag('float64', "float64 shows a blow-up as a number, not as float32's overflow",
               choices=('float64', 'float32')),
    plot=flag(None, "also write residual norm against layer to this image file (.png, .pdf, .svg)", type=str,
              path='outfile'),
)


def check_plot(path, out_dir):
    """The --plot file can be written in a format matplotlib knows, outside the repository's own folders
    (out_dir: the run's, offered instead): checked before any work."""
    try:
        matplotlib_folder()
        import matplotlib
        matplotlib.use('Agg')
    except ImportError:
        fail("--plot needs matplotlib: `pip install matplotlib`, or drop --plot")
    ext = os.path.splitext(path)[1].lstrip('.').lower()
    if ext not in ('png', 'pdf', 'svg'):  # the formats whose files carry figure_metadata's mark
        fail(f"plot={path} is not a .png, .pdf or .svg file name: end it in one of those")
    if os.path.isdir(path):
        fail(f"plot={path} is a folder: name an image file, e.g. --plot={os.path.join(path, 'residual.png')}")
    if os.path.isfile(path) and not is_our_figure(path, 'diagnose.py'):
        fail(f"plot={path} exists and is not a figure that diagnose.py wrote, so diagnose.py will not replace it: "
             f"name a new file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        fail(f"plot={path} lies in {folder}, which does not exist: create it, or choose another path")
    if repository_folder(folder):  # python diagnose.py --plot=resid.png, run from the clone
        fail(f"plot={path} lies in {repository_folder(folder)}, where no script writes its outputs: name a file "
             f"elsewhere, e.g. --plot={os.path.join(out_dir, os.path.basename(path))}")
    why = unreplaceable(path) or cannot_write(folder)  # an earlier figure made read-only or immutable
    if why:
        fail(f"plot={path} cannot be written: {why}; choose another path")


def main(argv=None):
    try:
        args = parse_flags(FLAGS, argv)
    except FlagError as e:
        fail(str(e))
    if args.plot is not None:
        check_plot(args.plot, args.out_dir)
    path, elsewhere = run_checkpoint(args.out_dir, args.ckpt, 'diagnose')
    if elsewhere:
        print(f"note: {elsewhere}")
    replaced_run(os.path.dirname(path), 'diagnose')
    broken_link(path, 'diagnose')
    if not os.path.isfile(path):
        hint = missing_hint(args.out_dir, args.ckpt,
                            "pass --out_dir=<a run's folder> and --ckpt=<its checkpoint file>")
        fail(f"cannot diagnose: no checkpoint at {path}: {hint}")
    try:
        ckpt = load_checkpoint(path)
        model = GPT.from_checkpoint(ckpt).eval().to(getattr(torch, args.dtype))
    except (FileNotFoundError, ValueError) as e:
        fail(f"cannot diagnose: {e}")
    if model.started and model.tapered_norms():
        model.set_gate(0.0)
        if taper_note(ckpt):
            print(taper_note(ckpt))
    mixed = mixed_run_note(path, ckpt)
    if mixed:
        print(mixed)
    if folded_note(ckpt, path):
        print(folded_note(ckpt, path))
    data_dir = args.data_dir or (ckpt.get('config') or {}).get('data_dir')
    if not data_dir:
        fail(f"{path} names no data folder: pass --data_dir, the folder the run was trained on")
    own = (ckpt.get('config') or {}).get('data_dir')
    if args.data_dir and ' holds text (' in (raw_text(args.data_dir) or '') and isinstance(own, str) and os.path.isfile(
            os.path.join(own, f'{args.split}.bin')):  # the run's text: a new prepare would be another tokenizer
        fail(f"{args.data_dir} holds text, not tokens, and a prepare of it would learn another tokenizer than the "
             f"run's: pass the run's own --data_dir={shlex.quote(own)} (or drop --data_dir, which reads it)")
    data = tokens_of(data_dir, args.split, ckpt.get('tokenizer'))
    try:
        theirs = data_tokenizer(data_dir, read_meta(data_dir), model.config.arch)
    except (OSError, KeyError, ValueError):
        theirs = None  # a folder without meta.json or its tokenizer: only the id range below is checked
    if not same_tokenizer(ckpt.get('tokenizer'), theirs):
        fail(other_tokens(data_dir, ckpt, f'the model in {path}'))
    T = min(args.window, model.config.block_size)
    if args.window > T:
        print(f"windows cropped to the model's context: {T} tokens, not --window={args.window}")
    if len(data) < T + 1:
        fail(f"{data_dir}/{args.split}.bin holds {len(data)} tokens, fewer than one window of {T + 1}: "
             f"lower --window, or choose a larger --split")
    used = data[:min(args.max_windows, (len(data) - 1) // T) * T + 1]
    top = int(used.max())
    if top >= model.config.vocab_size:
        fail(f"{data_dir}/{args.split}.bin holds token id {top}, beyond the model's vocabulary of "
             f"{model.config.vocab_size}: pass the --data_dir the run was trained on")
    decode = load_tokenizer(ckpt['tokenizer'])[1] if ckpt.get('tokenizer') else None
    report = diagnose(model, data, train_counts(data_dir, model.config.vocab_size),
                      args.window, args.max_windows, top=args.top, norm_outlier=args.norm_outlier,
                      growth=args.growth)
    print_report(report, decode)
    if args.plot:
        if said := replaced_link(args.plot, 'diagnose.py'):
            print(f"note: {said}")
        plot(report, args.plot)
        print(f"wrote {args.plot}")
    print(json.dumps(report))


if __name__ == '__main__':
    main()
