"""
Training curves of several runs as the paper's Figures 1-2 (Sec. 4.1), read from each run's log.jsonl.

    python plot.py out/base_s0 out/base_s1 out/itaper_s0 out/ataper_s0 --out_dir out-plots

writes loss.png (Fig. 1a), logit_norm.png (Fig. 1b) and grad_norms.png (Fig. 2). Runs whose configs
agree on everything but the seed (and out_dir, data_dir and the flags of one invocation) are seeds
of one setting: each setting is drawn as the median over seeds with a shaded
2.5-97.5 percentile band, as in the paper. Settings without a final norm (All-Taper, FakeLN) are dashed.
Train curves are EMA-smoothed per run (--smooth) before the median; val losses are drawn raw.
"""
import contextlib
import errno
import json
import math
import os
import re
import shlex
import signal
import sys

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np

from configurator import (SIGNALS, FolderLock, compression, dead_link, discard, elsewhere_hint, figure_metadata, flag,
                          folder_kind, is_our_figure, matplotlib_folder, parse_flags, releasing_locks, replaced_link,
                          special_files, unreplaceable, write_failure, write_remedy)

TAPER_LABELS = {"none": "Baseline", "internal": "Internal-Taper", "all": "All-Taper"}
AUX_LABELS = {"none": "", "fixed": " (+aux)", "baroni": " (+Baroni aux)"}
# Fig. 2 panels: log key -> weight type; each is a gradient norm averaged over the blocks
GRAD_PANELS = {"grad_q": "q", "grad_k": "k", "grad_v": "v", "grad_o": "o",
               "grad_mlp_in": "mlp in", "grad_mlp_out": "mlp out", "grad_norms": "norms"}


RUN_KEYS = ('taper', 'aux_loss', 'fakeln', 'norm', 'arch', 'n_layer', 'n_embd', 'seed', 'data_dir')  # a resume keeps


def load_run(run_dir):
    """Label, taper and log rows of one run: train rows carry 'lr', eval rows carry 'val_loss'."""
    if os.path.isfile(run_dir):
        parent = os.path.dirname(os.path.abspath(run_dir))
        if os.path.isfile(os.path.join(parent, "log.jsonl")):  # one of a run's own files
            raise SystemExit(f"{run_dir} is a file, not a run's folder: pass the folder that holds it "
                             f"({parent}), the out_dir of a train.py run.")
        raise SystemExit(f"{run_dir} is a file, not a run's folder: pass the out_dir of a train.py run (a folder "
                         f"holding its log.jsonl), or leave the file out.")
    if dead_link(run_dir, "the run's folder"):
        raise SystemExit(dead_link(run_dir, "the run's folder"))
    if not os.path.isdir(run_dir):
        raise SystemExit(f"run directory {run_dir} not found" + (elsewhere_hint(run_dir) or "; pass the out_dir of a "
                                                                 "train.py run."))
    special_files(None, run_dir)
    if os.path.isdir(os.path.join(run_dir, ".replaced")):  # a killed --overwrite: its log is not the run's
        from model import replaced_run
        replaced_run(run_dir, "plot")
    kind = folder_kind(run_dir)
    if kind and not kind.startswith("a training run"):
        raise SystemExit(f"{run_dir} is {kind}, not a train.py run: pass the out_dir of a train.py run.")
    config_path, log_path = os.path.join(run_dir, "config.json"), os.path.join(run_dir, "log.jsonl")
    inside = sorted(d for d in os.listdir(run_dir) if os.path.isfile(os.path.join(run_dir, d, "log.jsonl")))
    if inside and not any(os.path.exists(os.path.join(run_dir, f)) for f in ("config.json", "log.jsonl", "ckpt.pt")):
        every = len(inside) == len(os.listdir(run_dir))  # the glob would take in anything else there too
        raise SystemExit(f"{run_dir} is no run itself but holds {len(inside)} run(s) in its folders ({', '.join(inside[:3])}"
                         f"{', ...' if len(inside) > 3 else ''}): pass the runs, e.g. python plot.py "
                         + (f"{os.path.join(run_dir, '*')}" if every else
                            ' '.join(os.path.join(run_dir, d) for d in inside[:2])) + ".")
    for path in (config_path, log_path):
        if os.path.isdir(path):
            raise SystemExit(f"{path} is a folder, not the file train.py writes; pass the out_dir of a train.py run.")
        if dead_link(path, f"the run's {os.path.basename(path)}", named=False):
            raise SystemExit(dead_link(path, f"the run's {os.path.basename(path)}", named=False))
        if not os.path.isfile(path) and path == config_path and os.path.isfile(os.path.join(run_dir, "ckpt.pt")):
            continue  # removed: the checkpoint holds the config, read below
        if not os.path.isfile(path) and path == log_path and os.path.isfile(config_path):
            raise SystemExit(f"{run_dir} holds a run's config.json but no log.jsonl, the log plot.py draws (removed, "
                             f"or a run that never finished its first step): pass runs that have their log")
        if not os.path.isfile(path):
            raise SystemExit(f"{path} not found; pass the out_dir of a train.py run.")
    try:
        with open(config_path, encoding="utf-8-sig") as f:  # a BOM from a Windows editor
            config = json.load(f)
    except FileNotFoundError:
        config = checkpoint_config(os.path.join(run_dir, "ckpt.pt"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        if not os.path.isfile(os.path.join(run_dir, "ckpt.pt")):
            raise SystemExit(f"{config_path} is not valid JSON (cut short, or edited by hand?), and {run_dir} has "
                             f"no checkpoint holding the config: put the run's own config.json back") from None
        print(f"note: {config_path} is not valid JSON (cut short, or edited by hand?), so the config its "
              f"checkpoint holds is used")
        config = checkpoint_config(os.path.join(run_dir, "ckpt.pt"))
    ckpt_path = os.path.join(run_dir, "ckpt.pt")
    if isinstance(config, dict) and os.path.isfile(ckpt_path):  # a config.json copied in from another run
        held = checkpoint_config(ckpt_path)
        other = [k for k in RUN_KEYS if k in held and k in config and held[k] != config[k]]
        if other:
            raise SystemExit(f"{config_path} gives {other[0]}={config[other[0]]!r}, but the run's checkpoint beside it "
                             f"was trained with {other[0]}={held[other[0]]!r}: config.json is another run's; put "
                             f"the run's own back, or remove it to plot from the checkpoint's config")
    if not isinstance(config, dict) or config.get("taper") not in TAPER_LABELS \
            or config.get("aux_loss") not in AUX_LABELS:
        raise SystemExit(f"{config_path} needs taper in {list(TAPER_LABELS)} "
                         f"and aux_loss in {list(AUX_LABELS)}.")
    train, evals = [], []
    if compression(log_path):  # a log compressed to keep, under its own name
        name, unpack, _ = compression(log_path)
        raise SystemExit(f"{log_path} is {name}-compressed: unpack it in place first (`{unpack} {shlex.quote(log_path)} > "
                         f"{shlex.quote(log_path + '.txt')} && mv {shlex.quote(log_path + '.txt')} {shlex.quote(log_path)}`).")
    with open(log_path, encoding="utf-8-sig", errors="replace") as f:  # a BOM from a Windows editor
        for n, line in enumerate(f, 1):
            try:
                if not line.strip():
                    continue
                row = json.loads(line)
            except json.JSONDecodeError:
                if not line.endswith("\n"):  # the last line (no other lacks its newline), torn by a kill as written
                    print(f"note: {log_path}'s last line (line {n}) was cut short as it was written (a kill?) and "
                          f"is left out")
                    break
                raise SystemExit(f"{log_path} line {n} is not valid JSON; fix or delete that line.") from None
            problem = row_problem(row)
            if not problem and config["taper"] == "none" and is_number(row.get("gate")) and row["gate"] != 1:
                raise SystemExit(f"{log_path} line {n} logs gate {row['gate']} at iter {row['iter']}, but the run's "
                                 f"taper is 'none', whose gate stays 1: the log holds rows of another run; keep one "
                                 f"run per log.")
            if problem:
                raise SystemExit(f"{log_path} line {n} is not a train.py log row ({problem}); fix or delete that line.")
            kind = train if "lr" in row else evals  # a resume rewrites its log in order, each kind's steps rising
            if kind and row["iter"] <= kind[-1]["iter"]:
                moves = "repeats" if row["iter"] == kind[-1]["iter"] else f"goes back to iter {row['iter']} after"
                raise SystemExit(f"{log_path} line {n} {moves} iter {kind[-1]['iter']}: the rows are out of order "
                                 f"(logs appended, or sorted by hand?); keep one run per log, in the order "
                                 f"train.py wrote it.")
            if "lr" in row:
                train.append(row)
            elif "val_loss" in row:
                evals.append(row)
    if not train:
        it = checkpoint_iter(ckpt_path)
        if it:  # a run with a checkpoint has logged before it: the log was emptied or replaced since
            raise SystemExit(f"{log_path} holds no train.py training rows, though the run's checkpoint is at iter "
                             f"{it}: its log was emptied or replaced since; put the run's log back (reproduce.py "
                             f"keeps a copy in its assets' runs/), or leave {run_dir} out.")
        raise SystemExit(f"{log_path} holds no train.py training rows (rows with 'iter' and 'lr'); plot a run "
                         f"after its first log interval.")
    if not any(is_number(row["loss"]) and math.isfinite(row["loss"]) for row in train):  # null: train.py's NaN
        raise SystemExit(f"{log_path} logs no finite training loss (every row's loss is null or NaN: a run that "
                         f"diverged from its first step?), so it has no curve to draw: pass runs whose loss was finite.")
    return dict(label=method_label(config), taper=config["taper"], normless=normless(config), train=train,
                evals=evals, config=config, dir=run_dir)


def method_label(config):
    """The setting's name: FakeLN and DyT by their own names (FakeLN removes every LayerNorm of a run
    whose taper is 'none'; DyT replaces them), else the taper's; then the scale loss."""
    base = "FakeLN" if config.get("fakeln") else "DyT" if config.get("norm") == "dyt" else TAPER_LABELS[config["taper"]]
    return base + AUX_LABELS[config["aux_loss"]]


def normless(config):
    """Whether the run ends without a final norm (All-Taper, FakeLN): drawn dashed, as in the paper."""
    return config["taper"] == "all" or bool(config.get("fakeln"))


def checkpoint_iter(path):
    """The iteration a run's checkpoint was saved at, or None when there is none to read."""
    from model import load_checkpoint
    try:
        it = load_checkpoint(path, "cpu", mmap=True).get("iter_num") if os.path.isfile(path) else None
    except ValueError:
        return None
    return it if isinstance(it, int) else None


def checkpoint_config(path):
    """The config a run's checkpoint holds: its config.json, when that was removed."""
    from model import load_checkpoint
    try:
        config = load_checkpoint(path, "cpu", mmap=True).get("config")
    except ValueError as e:
        raise SystemExit(f"{os.path.dirname(path)} has no config.json, and {e}") from None
    if not isinstance(config, dict):
        raise SystemExit(f"{os.path.dirname(path)} has no config.json, and {path} holds no config: pass the out_dir "
                         f"of a train.py run.")
    return config


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def row_problem(row):
    """What is wrong with one parsed log line ('' when nothing): train.py writes one object per line, a
    train row with 'lr' or an eval row with 'val_loss', each with its step 'iter' and numbers (or null)."""
    if not isinstance(row, dict):
        return f"it holds a JSON {type(row).__name__}, not an object"
    if "lr" not in row and "val_loss" not in row:  # train.py writes these two kinds alone
        return "it has neither 'lr' (a train row) nor 'val_loss' (an eval row)"
    if "iter" not in row:
        return "it has no 'iter'"
    if "lr" in row and "loss" not in row:
        return "a train row without 'loss'"
    if not (is_number(row["iter"]) and math.isfinite(row["iter"]) and row["iter"] >= 0):
        return f"its iter is {row['iter']!r}, not a step number"
    for key in ("loss", "val_loss", "logit_norm", *GRAD_PANELS):
        if row.get(key) is not None and not is_number(row[key]):
            return f"its {key} is {row[key]!r}, not a number"
    return ""


# Config keys that differ between seeds of one setting, or between invocations of one run, and those that
# say how a run ran, not what it trained (memory, speed, the machine, logging)
PER_RUN = ("seed", "out_dir", "init_from", "overwrite", "stop_iter", "reschedule", "eval_only", "memory_plan",
           "wandb_run_name", "data_dir", "grad_checkpoint", "fsdp", "compile", "device", "peak_flops", "wandb_log",
           "wandb_project", "eval_interval", "log_interval", "eval_iters")


# The settings that make a run another method or model, never seeds of one setting.
METHOD = ("taper", "aux_loss", "fakeln", "arch", "norm", "n_layer", "n_head", "n_embd", "vocab_size")


def group_runs(runs, labelled=False):
    """Seeds of one setting, in the order given: runs with the same label when the labels were given,
    else runs whose configs agree on everything but PER_RUN. Two settings that share a label (e.g.
    All-Taper with two taper ends) get the keys they differ in appended to it."""
    if labelled:
        groups = {}
        for run in runs:
            groups.setdefault(run["label"], []).append(run)
        for label, members in groups.items():  # a median over two methods is no setting's curve
            first = members[0]
            for other in members[1:]:
                differ = [k for k in METHOD if first["config"].get(k) != other["config"].get(k)]
                if differ:
                    k = differ[0]
                    raise SystemExit(f"--labels names {first['dir']} and {other['dir']} both {label!r}, but they "
                                     f"differ in {k} ({first['config'].get(k)}, {other['config'].get(k)}), and runs "
                                     f"that share a label are drawn as seeds of one setting: give them two labels")
        return groups
    keyed = {}
    for run in runs:
        setting = tuple(sorted((k, json.dumps(v)) for k, v in run["config"].items() if k not in PER_RUN))
        keyed.setdefault((run["label"], setting), []).append(run)
    groups = {}
    for (label, setting), members in keyed.items():
        twins = [other for (l, other) in keyed if l == label and other != setting]
        if twins:
            mine, theirs = dict(setting), dict(twins[0])
            label += " (" + ", ".join(f"{k}={json.loads(mine[k])}" for k in sorted(mine)
                                      if mine[k] != theirs.get(k)) + ")"
        groups[label] = members
    for label, members in groups.items():  # seeds of one setting: said where they may not be
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                seed, data = (a["config"].get("seed"), b["config"].get("seed")), \
                    [os.path.normpath(str(run["config"].get("data_dir"))) for run in (a, b)]
                odd = ([f"the same seed ({seed[0]})"] if seed[0] == seed[1] else []) + \
                    ([f"different data ({data[0]}, {data[1]})"] if data[0] != data[1] else [])
                if odd:
                    print(f"note: {a['dir']} and {b['dir']} are drawn as two seeds of {label!r}, but have "
                          f"{' and '.join(odd)}: give them two --labels to draw them apart")
    return groups


def token_kind(run):
    """What a run's loss is measured in: its tokenizer (from its data folder's meta.json, where that is
    still there) and its vocabulary size."""
    config = run["config"]
    try:
        with open(os.path.join(str(config.get("data_dir")), "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        name = meta.get("tokenizer_name") or (f"{meta['tokenizer']} {meta['tokenizer_sha256'][:12]}"
                                              if "tokenizer_sha256" in meta else meta.get("tokenizer"))
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        name = None
    return name if isinstance(name, str) else None, config.get("vocab_size")


def tokens_note(runs):
    """A note when the runs drawn on one axis measure their loss in the tokens of different tokenizers
    (nats per token are not comparable across them), else None. The data folders' tokenizers decide
    where both are known (a model padded to a larger vocab_size reads the same tokens); else the
    vocabularies."""
    kinds = [token_kind(run) for run in runs]
    for run, kind in zip(runs[1:], kinds[1:]):
        differs = kind[0] != kinds[0][0] if kind[0] and kinds[0][0] else kind[1] != kinds[0][1]
        if differs:
            said = lambda k: f"vocab_size {k[1]}" + (f", tokenizer {k[0]}" if k[0] else "")
            return (f"note: {runs[0]['dir']} ({said(kinds[0])}) and {run['dir']} ({said(kind)}) measure their loss in "
                    f"the tokens of different tokenizers, which one axis does not compare: plot them apart")
    return None


def ema(values, smooth):
    """Exponential moving average, bias-corrected so the curve does not start near zero."""
    out, avg = np.empty(len(values)), 0.0
    for i, v in enumerate(values):
        avg = smooth * avg + (1 - smooth) * v
        out[i] = avg / (1 - smooth ** (i + 1))
    return out


def aggregate(row_lists, key, smooth=0.0):
    """Median and 2.5 / 97.5 percentiles over seeds of one key, on the steps every seed logged."""
    curves = []
    for rows in row_lists:
        points = [(r["iter"], r[key]) for r in rows if r.get(key) is not None]  # early rows may lack it
        steps, values = zip(*points) if points else ((), ())
        if smooth > 0 and values:
            values = ema(values, smooth)
        curves.append(dict(zip(steps, values)))
    shared = sorted(set.intersection(*(set(c) for c in curves)))
    if not shared:
        return None
    y = np.array([[c[s] for s in shared] for c in curves])  # (seeds, steps)
    with np.errstate(invalid="ignore"):  # an infinite score (train.py records one) interpolates to NaN: a gap
        return np.array(shared), np.median(y, 0), np.percentile(y, 2.5, 0), np.percentile(y, 97.5, 0)


def plot_metric(ax, groups, key, smooth=0.0):
    """One line per setting (median over seeds) with its percentile band; returns (steps, values) drawn."""
    drawn = []
    for i, (label, runs) in enumerate(groups.items()):
        agg = aggregate([r["train"] for r in runs], key, smooth)
        if agg is None:
            continue
        steps, median, lo, hi = agg
        linestyle = "--" if runs[0]["normless"] else "-"  # no final norm, as in the paper
        name = label if len(runs) == 1 else f"{label} ({len(runs)} seeds)"
        ax.plot(steps, median, color=f"C{i}", linestyle=linestyle, linewidth=1.2, label=name)
        if len(runs) > 1:
            ax.fill_between(steps, lo, hi, color=f"C{i}", alpha=0.2, linewidth=0)
        drawn.append([np.r_[steps, steps], np.r_[lo, hi]])
    ax.grid(alpha=0.3)
    return np.concatenate(drawn, 1) if drawn else np.empty((2, 0))


def aside(path):
    """Where save draws the figure at path before giving it that name: hidden beside it, under a name of this
    process's own, never another plot.py's."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{os.getpid()}.plot-tmp")


LEFTOVER = re.compile(r"\..+\.(\d+)\.plot-tmp")  # aside()'s name: a file of a plot.py killed outright (kill -9)


def running(pid):
    """Whether a process with this id runs (another plot.py drawing its figures)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


@contextlib.contextmanager
def stops_held():
    """Ctrl-C and the signals that stop a script (configurator.SIGNALS) wait for the block's end: a stop
    between two renames would leave a mix of two plots' figures. Each is caught where Python takes it, in
    the main thread (a signal mask would not hold it: any thread of the process may receive it)."""
    held = []
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, *SIGNALS)
            if signal.getsignal(s) not in (signal.SIG_IGN, None)}  # nohup's ignored SIGHUP stays ignored
    for s in kept:
        signal.signal(s, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)
        if held:
            signal.raise_signal(held[0])


def save(figures, out_dir):
    """Write each figure ({name: figure}) aside, then rename them all over their names once every one is
    written: a full disk or a stop part-way leaves the earlier figures as they were, not a mix of two plots.
    A figure that is a link is replaced, never written through to the file it names."""
    import matplotlib.pyplot as plt
    paths = [os.path.join(out_dir, name) for name in figures]
    earlier = any(os.path.lexists(path) for path in paths)
    replaced = None  # the names renamed into place so far, once the renames begin
    try:
        for path, fig in zip(paths, figures.values()):
            fig.savefig(aside(path), dpi=150, bbox_inches="tight", metadata=figure_metadata(path, "plot.py"),
                        format=os.path.splitext(path)[1][1:])
        with stops_held():
            replaced = []
            for path in paths:
                os.replace(aside(path), path)
                replaced.append(os.path.basename(path))
    except OSError as e:  # path: the figure being written, or renamed
        for leftover in map(aside, paths):
            discard(leftover)
        left = [aside(p) for p in paths if os.path.lexists(aside(p))]
        reason = write_failure(e, path)
        todo = write_remedy(reason) or (("clear the append-only or immutable attribute of the folder (lsattr shows "
                                         "it; chattr -a -i)" if e.errno == errno.EPERM else f"make {out_dir} writable")
                                        + ", or choose another --out_dir")
        if replaced:  # a rename failed after others (the check in main saw every figure replaceable)
            state = f"{', '.join(replaced)} {'is' if len(replaced) == 1 else 'are'} new, the others the earlier ones"
        else:
            state = f"the earlier figures in {out_dir} are kept as they were" if earlier else "no figure was written"
        raise SystemExit(f"cannot {'write' if replaced is None else 'replace'} {path} ({reason}): {todo}; {state}"
                         + (f" (only {', '.join(left)} {'is' if len(left) == 1 else 'are'} left, which the folder "
                            f"does not let plot.py remove: an append-only folder?)" if left else "")) from None
    finally:
        for leftover in map(aside, paths):
            discard(leftover)
        for fig in figures.values():
            plt.close(fig)
    for name in os.listdir(out_dir):  # a plot.py killed outright (kill -9) left these; a running one's stay
        if (m := LEFTOVER.fullmatch(name)) and not running(int(m[1])):
            discard(os.path.join(out_dir, name))
    for path in paths:
        print(f"wrote {path}")
    return paths


FLAGS = dict(
    out_dir=flag("out-plots", "folder the PNGs are written to (the README's figures are in assets/, written by "
                            "reproduce.py)", path='out'),
    smooth=flag(0.9, "EMA factor for train curves, 0 = none", min=0, below=1),
    prefix=flag("", "prepended to each PNG name"),
    labels=flag(None, "comma-separated labels, one per run_dir, replacing the config's; runs that share a "
                      "label are drawn as seeds of one setting", items=str),
)


@releasing_locks
def main(argv=None):
    args = parse_flags(FLAGS, argv, positional="run_dirs")  # before matplotlib: it reads MPLBACKEND as imported
    matplotlib_folder()
    import matplotlib
    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt
    if os.sep in args.prefix or (os.altsep and os.altsep in args.prefix):
        raise SystemExit(f"--prefix={args.prefix} holds a path separator; it is prepended to each PNG name, "
                         f"so choose the folder with --out_dir")
    seen = {}
    for d in args.run_dirs:
        if os.path.realpath(d) in seen:
            raise SystemExit(f"{d} is given twice (also as {seen[os.path.realpath(d)]}); each run folder counts as "
                             f"one seed, so pass it once")
        seen[os.path.realpath(d)] = d
    if args.labels is not None:
        strays = [d for d in args.run_dirs if not os.path.exists(d)]
        if len(args.labels) != len(args.run_dirs) and strays:  # --labels a b: b became a run dir
            raise SystemExit(f"--labels has {len(args.labels)} entries for {len(args.run_dirs)} run dirs, and {strays[0]} "
                             f"is no folder (a label after a space?): write the labels comma-separated, "
                             f"--labels={','.join([*args.labels, *strays])}")
        if len(args.labels) != len(args.run_dirs):
            raise SystemExit(f"--labels has {len(args.labels)} entries but {len(args.run_dirs)} run dirs were "
                             f"given: pass one label per run dir.")
        if not all(label.strip() for label in args.labels):
            raise SystemExit("--labels holds an empty label: give every run dir a name.")
        for label in args.labels:
            if label.strip().startswith("_"):  # matplotlib's mark of an artist left out of every legend
                raise SystemExit(f"--labels={label.strip()} begins with '_', and matplotlib leaves such labels out of "
                                 f"the legend: begin it with another character.")
            if label.count("$") - label.count("\\$") >= 2:  # matplotlib reads $...$ as math: it must parse
                from matplotlib.mathtext import MathTextParser
                try:
                    MathTextParser("path").parse(label.strip())
                except ValueError as e:
                    raise SystemExit(f"--labels={label.strip()}: matplotlib reads the text between $ signs as math, "
                                     f"and cannot read this ({str(e).strip().splitlines()[-1]}): use the math it "
                                     f"knows (\\mathbf{{...}} for bold), or write \\$ for a dollar sign.") from None
    names = [f"{args.prefix}{name}.png" for name in ("loss", "logit_norm", "grad_norms")]
    kind = folder_kind(args.out_dir) if os.path.isdir(args.out_dir) else None
    if kind and not kind.startswith(('a training run', "a reproduction's")):  # beside a run or results: fine
        raise SystemExit(f"out_dir={args.out_dir} is {kind}: write the figures elsewhere, e.g. --out_dir=out-plots")
    if kind and kind.startswith('a training run') and not any(
            os.path.realpath(run_dir) == os.path.realpath(args.out_dir) for run_dir in args.run_dirs):
        raise SystemExit(f"out_dir={args.out_dir} is another training run, none of those plotted, where these figures "
                         f"would pass for its own: write them elsewhere, e.g. --out_dir=out-plots, or into the "
                         f"folder of a run plotted")
    # One plot.py at a time writes a folder of figures (held up front if there). A run's own folder is not
    # held: its train.py holds it while the run trains, and plotting a run as it trains is allowed.
    lock = None if kind and kind.startswith('a training run') else FolderLock(args.out_dir, "plot.py")
    foreign = [n for n in names if os.path.isfile(os.path.join(args.out_dir, n))
               and not is_our_figure(os.path.join(args.out_dir, n), "plot.py")]
    if foreign:
        raise SystemExit(f"{os.path.join(args.out_dir, foreign[0])} exists and is not a figure that plot.py "
                         f"wrote, so plot.py will not replace it: choose another --out_dir or --prefix")
    for name in names:  # checked before any is drawn: the three are replaced together, or none
        path = os.path.join(args.out_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            raise SystemExit(f"{path} is a folder, where plot.py writes a figure, and nothing was written: move it "
                             f"away, or choose another --out_dir or --prefix")
        if why := unreplaceable(path):
            raise SystemExit(f"{why}, so plot.py will not replace it, nor the other figures without it, and nothing "
                             f"was written: make it writable (an immutable or read-only file? lsattr and ls -l show "
                             f"which), or choose another --out_dir or --prefix")
    runs = [load_run(d) for d in args.run_dirs]
    for i, run in enumerate(runs):  # a run passed twice, or copied, would count as two seeds
        twin = next((j for j in range(i) if runs[j]["train"] == run["train"]), None)
        if twin is not None:
            raise SystemExit(f"{args.run_dirs[twin]} and {args.run_dirs[i]} hold the same run (identical logs): "
                             f"pass each run once.")
    if args.labels is not None:
        for run, label in zip(runs, args.labels):
            run["label"] = label.strip()
    for run in runs:  # a log_interval at or past max_iters: drawn, but a curve of one point reads as none
        if len(run["train"]) == 1:
            print(f"note: {run['dir']}'s log holds one training row (iter {run['train'][0]['iter']}), so its training "
                  f"curve is a single point (a log_interval at or past its max_iters?)")
    groups = group_runs(runs, labelled=args.labels is not None)
    for label, members in groups.items():  # a seed stopped early cuts every curve of its setting short
        ends = [m["train"][-1]["iter"] for m in members]
        if len(set(ends)) > 1:
            print(f"note: the {len(members)} seeds of {label!r} end at different steps ({', '.join(map(str, ends))}): "
                  f"its median and band are drawn over the steps they all logged, to iter {min(ends)}; pass the "
                  f"finished seeds alone for the whole curve")
    tokens = tokens_note(runs)
    if tokens:
        print(tokens)
    os.makedirs(args.out_dir, exist_ok=True)
    if lock:
        lock.hold()
    figures = {}  # name -> figure, written together at the end

    # Fig. 1a: train CE (what is compared; the aux loss is logged apart), val loss as markers
    fig, ax = plt.subplots(figsize=(6, 4))
    steps, values = plot_metric(ax, groups, "loss", args.smooth)
    # A val loss far above the training curves (a norm-free model's blow-up on a rare window, 1e7 nats) would
    # flatten them: past the training range plus three times its span (at least a nat), it is drawn as a
    # triangle on the top edge and said, and the limits follow the rest.
    late = values[steps >= 0.1 * steps.max()] if len(values) else values
    cap = late.max() + 3 * max(late.max() - values.min(), 1.0) if len(late) else np.inf
    beyond = []  # (color, steps) of val losses above cap
    for i, (label, runs) in enumerate(groups.items()):
        agg = aggregate([r["evals"] for r in runs], "val_loss")
        if agg is not None:
            inside = np.isfinite(agg[1]) & (agg[1] <= cap)  # the val markers are drawn inside the limits too
            ax.plot(agg[0][inside], agg[1][inside], "o", color=f"C{i}", markersize=4)
            steps, values = np.concatenate([steps, agg[0][inside]]), np.concatenate([values, agg[1][inside]])
            high = np.isfinite(agg[1]) & (agg[1] > cap)
            if high.any():
                beyond.append((f"C{i}", agg[0][high]))
                print(f"note: {label!r} has {int(high.sum())} val loss(es) far above its training curve (up to "
                      f"{agg[1][high].max():.3g}, at iter {', '.join(str(int(k)) for k in agg[0][high][:3])}"
                      f"{', ...' if high.sum() > 3 else ''}): drawn as triangles on the top edge of {args.prefix}loss.png")
    ax.plot([], [], "o", color="gray", markersize=4, label="val loss")
    if len(values):  # the first tenth's loss would squash the ~1% gaps the figure is about; zoom past it
        lo, hi = values.min(), values[steps >= 0.1 * steps.max()].max()
        if hi > lo:  # (a log of one value leaves matplotlib's own limits)
            ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    for color, high_steps in beyond:
        ax.plot(high_steps, [ax.get_ylim()[1]] * len(high_steps), "^", color=color, markersize=6, clip_on=False)
    smoothed = f", EMA {args.smooth}" if args.smooth > 0 else ""
    ax.set(xlabel="step", ylabel="cross-entropy", title=f"Training loss (median over seeds{smoothed})")
    ax.legend()
    figures[f"{args.prefix}loss.png"] = fig

    # Fig. 1b: logit chasing shows as growth over orders of magnitude, hence log y when the range is wide
    fig, ax = plt.subplots(figsize=(6, 4))
    _, values = plot_metric(ax, groups, "logit_norm", args.smooth)
    if len(values) and values.min() > 0 and values.max() / values.min() > 20:
        ax.set_yscale("log")
    ax.set(xlabel="step", ylabel="mean logit $\\ell_2$ norm",
           title="Mean logit $\\ell_2$ norm (dashed: no final norm)")
    ax.legend()
    figures[f"{args.prefix}logit_norm.png"] = fig

    # Fig. 2: one panel per weight type; the eighth cell holds the shared legend
    fig, axes = plt.subplots(2, 4, figsize=(13, 6), sharex=True)
    for ax, (key, name) in zip(axes.flat, GRAD_PANELS.items()):
        plot_metric(ax, groups, key, args.smooth)
        ax.set_yscale("log")
        ax.set_title(name)
    fig.supxlabel("step")
    fig.supylabel("gradient norm")
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.suptitle("Gradient norm by weight type, averaged over blocks (dashed: no final norm)")
    if max(map(len, labels), default=0) <= 40:
        axes.flat[-1].legend(handles, labels, loc="center")
        fig.tight_layout()
    else:  # labels too long for the cell (runs told apart by their flags): the legend goes under the panels
        fig.tight_layout()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize="small")
    figures[f"{args.prefix}grad_norms.png"] = fig
    for name in figures:  # a figure that is a link (to a shared folder of figures) is replaced, not written through
        if said := replaced_link(os.path.join(args.out_dir, name), 'plot.py'):
            print(f"note: {said}")
    return save(figures, args.out_dir)


if __name__ == "__main__":
    main()
