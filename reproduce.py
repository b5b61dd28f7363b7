"""
The paper's TinyStories effects at CPU scale, in one command (the README's Results section):

    python reproduce.py --seeds=1337,1338,1339 \
        --input_file=../shared/data/tinystories/train_sample.txt,../shared/data/tinystories/valid_sample.txt
    python reproduce.py --seeds=1 -- --n_layer=4           # arguments after -- go to every train.py
    python reproduce.py --jobs=2 ...                       # two runs at once, one core each
    python reproduce.py --seeds=1,2,3 --ablation_seeds=1   # the ablations on seed 1 only
    python reproduce.py --settings=baseline,internal,all   # the paper's settings only

Without --input_file, prepare_tinystories.py downloads the full dataset. Several comma-separated
files are pooled and split by story, --val_fraction of them held out (or pass --val_file). The
vocabulary is learned from the training split alone. Then, with the same seeds and data order for
every setting:
1. train.py config/tinystories_cpu.py in every setting of --settings, once per seed (the ablations,
   by default on every seed too): Baseline, Internal-Taper (+aux), All-Taper (+aux), and the
   ablations All-Taper without the scale loss, Baseline with it, Internal-Taper without it, and
   All-Taper with its taper ending at the last step; a run whose checkpoint is unfinished is
   resumed, a finished one is kept (--retrain trains it again);
2. the validation cross-entropy of each, tapered models at g = 0, over held-out windows: over all
   windows, and over the clean windows whose tokens all occur in training;
3. fold.py on every tapered run, and the validation cross-entropy of the folded model, which must
   be the g = 0 model's; for All-Taper also fold.py --reset_unseen, the mitigation, scored the same;
4. diagnose.py on the All-Taper (+aux) run with the worst window: diagnose.txt and diagnose.png;
5. bench.py --fused: KV-cached decoding of the Internal-Taper model, Baseline vs folded;
6. each run's log.jsonl, config.json and train_time.json copied to <assets>/runs/, and plot.py on
   those copies: {loss,logit_norm,grad_norms}.png for the paper's settings, ablations_*.png for all;
7. results.json and results.md in --assets (default out-repro/results; the committed ones come from
   --assets=assets): per-setting mean ± sd over seeds, the paired gap of each setting to Baseline
   on the same seeds, per-seed rows, the fold and the mitigation; the tables printed in Markdown.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import torch

import diagnose
import memory
from configurator import PRCTL, closest_choice, flag, folder_kind, parse_flags
from model import GPT
from tokens import open_tokens, read_meta

SETTINGS = {  # name: (label, taper, aux_loss)
    'baseline': ('Baseline', 'none', 'none'),
    'internal': ('Internal-Taper (+aux)', 'internal', 'fixed'),
    'all': ('All-Taper (+aux)', 'all', 'fixed'),
    'all-noaux': ('All-Taper (no aux)', 'all', 'none'),
    'baseline-aux': ('Baseline (+aux)', 'none', 'fixed'),
    'internal-noaux': ('Internal-Taper (no aux)', 'internal', 'none'),
    'all-notail': ('All-Taper (+aux) without tail', 'all', 'fixed'),
}
# Beyond the paper's table, the ablations that decide why All-Taper's gap has the sign it has here
# (docs/reproduction.md): trained on the first --ablation_seeds seeds. all-notail ends the taper at
# the last step, as App. C does, instead of config/tinystories_cpu.py's step 450 (extra_flags).
ABLATIONS = ('all-noaux', 'baseline-aux', 'internal-noaux', 'all-notail')
PAPER_GAP = {'internal': '+1.46%', 'all': '+1.82%'}  # Table 1, 1M row; the ablations are not reported
HERE = os.path.dirname(os.path.abspath(__file__))  # the scripts and the config, from any working directory
CONFIG = os.path.relpath(os.path.join(HERE, 'config', 'tinystories_cpu.py'))


def script(name):
    """The path of one of the repository's scripts, as the working directory reaches it."""
    return os.path.relpath(os.path.join(HERE, name))


CHILDREN = set()  # the scripts running now: a stop of reproduce.py stops them too
STAGE = ['checking its arguments']  # what it is doing now, for the line a stop prints


STOPS = {signal.SIGINT, signal.SIGTERM}  # Ctrl-C, and a scheduler's stop
STOPPING = []  # the signal of a stop asked for, once one is
STOPPED = set()  # the scripts a stop has passed Ctrl-C to


def stop(signum=None, frame=None):
    """Ctrl-C or a scheduler's SIGTERM: passed on at once to every script under way as Ctrl-C (a training
    run keeps its last checkpoint, which the next invocation resumes), remembered, and raised. The raise
    alone can be lost (Python prints and drops one that lands in a hook it runs around a fork, which is
    why run() holds stops back while it starts a script), so run() raises again once it sees the stop."""
    STOPPING.append(signum)
    for proc in list(CHILDREN - STOPPED):
        STOPPED.add(proc)
        proc.send_signal(signal.SIGINT)
    raise KeyboardInterrupt


def interrupted():
    """After a stop: every script under way ends (asked again, harder, if it has not in 30 s), no further
    one starts, and one line says what reproduce.py was doing."""
    for proc in list(CHILDREN - STOPPED):
        STOPPED.add(proc)
        proc.send_signal(signal.SIGINT)
    for proc in list(CHILDREN):
        for then in (signal.SIGTERM, signal.SIGKILL):  # one still starting up may not heed Ctrl-C yet
            try:
                proc.wait(timeout=30)
                break
            except subprocess.TimeoutExpired:
                proc.send_signal(then)
        proc.wait()
    if STAGE[0] == 'checking its arguments':
        raise SystemExit("reproduce.py stopped: interrupted while checking its arguments, before it started anything")
    if STAGE[0] == 'training':
        raise SystemExit("reproduce.py stopped: interrupted while training; the runs under way stopped at their last "
                         "checkpoint, and the same command goes on from there")
    raise SystemExit(f"reproduce.py stopped: interrupted while {STAGE[0]}; the finished runs are kept, and the same "
                     f"command goes on from there")


def dies_with_parent():
    """A child's first act (Linux): SIGTERM when reproduce.py ends without stopping it, e.g. under kill -9, so
    that no run trains on unseen; train.py stops at its last checkpoint on it. And the stops, which run()
    holds back while it starts the child, are let through again."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    if PRCTL is not None:
        PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


ECHOED = set()  # the scripts' notes passed on so far: each once, however many runs give it


def run(*args, allow_divergence=False, progress='', threads=None):
    """Run one of the repository's scripts, echoing its command; its output is returned. With
    progress set, each line that names an iteration is echoed after that label as it arrives; a
    script's note (or warning) on its inputs is always passed on, each distinct one once. A
    training run that stops because the model diverged returns None when allow_divergence is set.
    threads sets the script's OpenMP/torch thread count."""
    cmd = [sys.executable, script(args[0]), *map(str, args[1:])]
    print('$', ' '.join(cmd[1:]), flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    if STOPPING:
        raise KeyboardInterrupt
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)  # a stop waits until the script is started and known
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=dies_with_parent)
        CHILDREN.add(proc)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a stop held back is raised here
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if progress and line.startswith('iter '):
                print(f"  {progress}: {line.rstrip()}", flush=True)
            elif line.startswith(('note:', 'warning:')) and line not in ECHOED and 'has no effect in this run' not in line:
                # a script's word on its inputs (the flags after -- go to every setting: a Baseline ignores the taper's)
                ECHOED.add(line)
                print(f"  {args[0]} {line.rstrip()}", flush=True)
        err = proc.stderr.read()
        code = proc.wait()
    finally:
        CHILDREN.discard(proc)
    if STOPPING:  # the script ended on a stop whose raise here was lost
        raise KeyboardInterrupt
    if code != 0:
        last = err.strip().splitlines()[-1] if err.strip() else ''
        if allow_divergence and 'the model diverged' in last:
            print(f"  diverged: {last}", flush=True)
            return None
        if last and 'Traceback' not in err:  # the script's own sentence for a mistake: passed on as it is
            raise SystemExit(last if last.startswith(f"{args[0]} stopped: ") else f"{args[0]} stopped: {last}")
        raise SystemExit(f"{args[0]} failed:\n{err[-2000:]}")
    return ''.join(lines)


@torch.no_grad()
def val_ce(ckpt_path, data_dir, max_windows, confidence=False):
    """Cross-entropy of consecutive held-out windows of val.bin, tapered models at g = 0, scored in
    float64 so that a blow-up is a number and not float32's overflow. Over all windows: the median,
    the mean, the non-finite count and the outliers (windows not within twice the median). Over the
    clean windows, whose tokens all occur in train.bin: the median and mean, and how many windows
    were excluded for holding a token the model never trained on (its embedding row then only ever
    received the softmax's push; see diagnose.py). With confidence, also what the length of its
    pre-logit vectors is worth (diagnose.prelogit_confidence): prelogit_cv, ce_tempered, ce_one_rms."""
    model = GPT.from_checkpoint(ckpt_path).eval().double()
    if model.started and model.tapered_norms():
        model.set_gate(0.0)
    T = model.config.block_size
    data = open_tokens(data_dir, 'val')
    n = min(max_windows, (len(data) - 1) // T)
    ce = diagnose.score_windows(model, data, T, n)[0]
    seen = diagnose.train_counts(data_dir, model.config.vocab_size) > 0
    clean = np.array([seen[diagnose.window_tokens(data, w, T).numpy()].all() for w in range(n)])
    finite = np.isfinite(ce)
    median = float(np.median(ce[finite]))
    outlier = ~(ce <= 2 * median)  # NaN counts as an outlier
    scores = dict(median=median, mean=float(ce.mean()), non_finite=int((~finite).sum()),
                  outliers=int(outlier.sum()), clean_outliers=int((outlier & clean).sum()),
                  clean_median=float(np.median(ce[clean])), clean_mean=float(ce[clean].mean()),
                  excluded=int((~clean).sum()))
    if confidence:
        c = diagnose.prelogit_confidence(model, data, T, n)
        scores.update(prelogit_cv=c['cv'], ce_tempered=c['ce_tempered'], ce_one_rms=c['ce_one_rms'])
    return scores


def progress_of(ckpt_path):
    """(iter, max_iters, config) of a run's checkpoint, or (None, None, None) without one."""
    if not os.path.isfile(ckpt_path):
        return None, None, None
    ckpt = torch.load(ckpt_path, map_location='cpu', weights_only=False)
    return ckpt['iter_num'], ckpt['config']['max_iters'], ckpt['config']


# train.py flags that say how one invocation runs, not what it trains: a kept run may differ in them.
PER_RUN_CALL = ('out_dir', 'init_from', 'overwrite', 'reschedule', 'stop_iter', 'eval_only', 'memory_plan', 'device',
                'dtype', 'compile', 'peak_flops', 'wandb_log', 'wandb_project', 'wandb_run_name', 'log_interval')


def same_data(a, b):
    """Whether two data folders hold one preparation: the same meta.json (source, token counts and the
    tokenizer's hash), as a folder copied or moved elsewhere does."""
    try:
        return read_meta(a) == read_meta(b) != {}
    except ValueError:
        return False


def unlike(config, wanted):
    """The first key whose value in a run's config differs from what this reproduction trains it with,
    as (key, the run's value, the wanted value), or None."""
    for key, value in wanted.items():
        held = config.get(key)
        if key == 'data_dir' and isinstance(held, str):
            held, value = os.path.realpath(held), os.path.realpath(value)
            if held != value and same_data(held, value):  # the folder copied or moved: the same tokens
                continue
        if isinstance(value, (tuple, list)):
            held, value = list(held) if isinstance(held, (tuple, list)) else held, list(value)
        if key in config and key not in PER_RUN_CALL and held != value:
            return key, config[key], wanted[key]
    return None


FLAGS = dict(
    input_file=flag(None, "local TinyStories text, several files comma-separated (default: download the full "
                          "dataset)", items=str, unique=True, path='text'),
    val_file=flag(None, "local validation text, with --input_file (default: hold out --val_fraction)", type=str,
                  path='text'),
    val_fraction=flag(0.1, "stories held out of --input_file", above=0, below=1),
    data_dir=flag('data/tinystories2048', "prepared here unless present", path='out',
                  read_only_when=lambda values: os.path.isfile(os.path.join(values['data_dir'], 'val.bin'))),
    seeds=flag((1337,), "comma-separated training seeds", items=int, unique=True, min=0, max=2**63 - 1),
    out_root=flag('out-repro', "one run folder per setting and seed", path='out'),
    assets=flag(None, "where the figures and results.json go (default: <out_root>/results; the README's come "
                      "from --assets=assets)", type=str, path='out'),
    val_windows=flag(512, "held-out windows to score", min=1),
    retrain=flag(False, "train runs whose checkpoint exists too"),
    settings=flag(tuple(SETTINGS), f"comma-separated, of {', '.join(SETTINGS)}; baseline and internal always "
                                   f"among them", items=str, unique=True),
    ablation_seeds=flag(None, f"train the ablations ({', '.join(ABLATIONS)}) on only the first N seeds (default: all)",
                        type=int, min=1),
    jobs=flag(1, "training runs at once, the CPU's cores split evenly among them", min=1),
    bench_prompt=flag(128, "decoding benchmark prompt length", min=1),
    bench_new=flag(64, "decoding benchmark new tokens", min=1),
)
SET_HERE = ('taper', 'aux_loss', 'seed', 'out_dir', 'data_dir', 'init_from', 'overwrite')  # per run, by reproduce.py
# train.py flags that make a run stop short or train nothing: the later stages score, fold and plot finished runs.
UNFINISHED = ('stop_iter', 'eval_only', 'memory_plan')
DEFAULT_VAL_FRACTION = FLAGS['val_fraction'].default


def train_values(train_args):
    """train.py's resolved flags for CONFIG, then the config files and --key=value arguments after --, read
    by the flag layer train.py reads them with (memory.resolve)."""
    return memory.resolve([CONFIG, *train_args])


def config_value(key, train_args):
    """One integer train.py flag, as train_values resolves it."""
    return int(train_values(train_args)[key])


def extra_flags(name, train_args):
    """train.py flags a setting sets beyond taper and aux_loss, after the arguments after -- so that
    they define it: all-notail ends its taper at the run's last step."""
    return [f"--taper_end={config_value('max_iters', train_args)}"] if name == 'all-notail' else []


def earlier_results(assets, args, train_args):
    """One sentence when the folder assets holds the results.json of another reproduction (other seeds,
    settings or train.py arguments), which this one would replace: the committed assets/ hold a full
    one, and a smoke test with --assets=assets must not take its place. The same reproduction run again,
    or with settings or seeds added (as docs/reproduction.md grows one), replaces its own."""
    try:
        with open(os.path.join(assets, 'results.json')) as f:
            held = json.load(f)
        had = (list(held['seeds']), sorted(held['settings']), list(held['train_args']))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none there, or not a results.json of this script: figures and tables are written beside
    now = (list(args.seeds), sorted(args.settings), list(train_args))
    if had[2] == now[2] and set(had[0]) <= set(now[0]) and set(had[1]) <= set(now[1]):
        return None  # itself again, or grown by settings or seeds: its results then hold the earlier ones
    said = lambda seeds, settings, extra: (f"seed{'s' * (len(seeds) > 1)} {','.join(map(str, seeds))}; "
                                           f"{len(settings)} settings; "
                                           + (f"train.py {' '.join(extra)}" if extra else "the default schedule"))
    instead = ("choose another --out_root (whose runs and results/ are this one's alone)" if args.assets is None else
               "choose another --assets" + (", and another --out_root for its runs" if had[2] != now[2] else ""))
    return (f"--assets={assets} holds the results of another reproduction ({said(*had)}), which this one "
            f"({said(*now)}) would replace: {instead}, or remove {os.path.join(assets, 'results.json')} "
            f"to replace them")


def check_args(args, train_args):
    """The rules that tie flags together, and the arguments for train.py checked by train.py itself,
    before anything is written: one sentence for each mistake."""
    unknown = [s for s in args.settings if s not in SETTINGS]
    if unknown:
        close = closest_choice(unknown[0], SETTINGS)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise SystemExit(f"--settings names {unknown[0]!r}, which is not a setting{hint}: choose from "
                         f"{', '.join(SETTINGS)}")
    if not {'baseline', 'internal'} <= set(args.settings):
        raise SystemExit(f"--settings takes baseline and internal (the reference of every gap, and the model the "
                         f"decoding benchmark folds) and any of {', '.join(SETTINGS)}")
    ablations = [name for name in args.settings if name in ABLATIONS]
    if args.ablation_seeds is not None and not ablations:
        raise SystemExit(f"--ablation_seeds sets the seeds of {', '.join(ABLATIONS)}, which --settings leaves out: "
                         f"drop --ablation_seeds, or add it to --settings")
    if args.ablation_seeds is not None and args.ablation_seeds > len(args.seeds):
        raise SystemExit(f"--ablation_seeds={args.ablation_seeds} exceeds the {len(args.seeds)} seed(s) of --seeds: "
                         f"pass at most {len(args.seeds)}")
    if args.jobs > (os.cpu_count() or 1):
        raise SystemExit(f"--jobs={args.jobs} exceeds this machine's {os.cpu_count()} cores, and runs that share a "
                         f"core slow each other down more than they gain: pass at most --jobs={os.cpu_count()}")
    if args.input_file is None and (args.val_file is not None or args.val_fraction != DEFAULT_VAL_FRACTION):
        raise SystemExit("--val_file and --val_fraction split --input_file: the downloaded TinyStories has its own "
                         "validation split, so pass --input_file too, or drop them")
    if args.val_file is not None and args.val_fraction != DEFAULT_VAL_FRACTION:
        raise SystemExit("--val_file and --val_fraction both name the val split: pass one of them")
    for key in ('out_root', 'assets'):
        folder = getattr(args, key) or (os.path.join(args.out_root, 'results') if key == 'assets' else None)
        kind = folder_kind(folder) if folder and os.path.isdir(folder) else None
        # runs and results go into folders of their own, never into data, a run or a model (results over results)
        if kind and not (key == 'assets' and kind.startswith("a reproduction's")):
            raise SystemExit(f"--{key}={folder} is {kind}: put the runs and results elsewhere, e.g. "
                             f"--{key}={'out-repro' if key == 'out_root' else 'out-repro/results'}")
    runs = sorted(f for f in os.listdir(args.assets) if os.path.isfile(os.path.join(args.assets, f, 'ckpt.pt'))) \
        if args.assets and os.path.isdir(args.assets) else []
    if runs:  # a reproduction's --out_root: its results would lie among its runs
        raise SystemExit(f"--assets={args.assets} holds training runs ({', '.join(runs[:3])}"
                         f"{', ...' if len(runs) > 3 else ''}), as a reproduction's --out_root does: put the results in "
                         f"a folder of their own, e.g. --assets={os.path.join(args.out_root, 'results')}")
    for arg in train_args:
        name = arg.removeprefix('--').partition('=')[0]
        if arg.startswith('--') and name in UNFINISHED:
            raise SystemExit(f"--{name} after -- would leave every run unfinished, and the later stages score, fold and "
                             f"plot finished runs: drop it (a stopped reproduce.py resumes its runs when run again)")
        if arg.startswith('--') and name in SET_HERE:
            instead = {'seed': f"the seeds are --seeds (e.g. --seeds={arg.partition('=')[2] or '1,2,3'}), before --",
                       'taper': "the settings trained are --settings (e.g. --settings=baseline,all), before --",
                       'aux_loss': "the settings trained are --settings (e.g. --settings=all,all-noaux), before --",
                       }.get(name, "the data folder is --data_dir, the run folders lie under --out_root")
            raise SystemExit(f"--{name} after -- would override what reproduce.py sets for every run: drop it "
                             f"({instead})")
    if train_args:  # train.py checks its own flags and their rules, then exits without reading or writing
        procs = [subprocess.Popen([sys.executable, script('train.py'), CONFIG, f'--taper={taper}', f'--aux_loss={aux}',
                                   f'--out_dir={os.path.join(args.out_root, name)}', f'--data_dir={args.data_dir}',
                                   *train_args, *extra_flags(name, train_args), '--overwrite', '--memory_plan'],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for name, (_, taper, aux) in SETTINGS.items() if name in args.settings]
        errors = [(proc.wait(), proc.stderr.read()) for proc in procs]
        for code, err in errors:
            if code != 0 and 'Traceback' in err:
                raise SystemExit(f"train.py failed on the arguments after --:\n{err[-2000:]}")
            if code != 0:
                last = (err.strip().splitlines() or [''])[-1]
                raise SystemExit(f"the arguments after -- do not suit train.py: {last}")
    block_size = config_value('block_size', train_args)
    if args.bench_prompt + args.bench_new > block_size:
        raise SystemExit(f"--bench_prompt={args.bench_prompt} plus --bench_new={args.bench_new} exceeds the model's "
                         f"block_size={block_size}: lower them")
    if os.path.isfile(os.path.join(args.data_dir, 'val.bin')) and args.input_file:
        import prepare_tinystories  # the same check it makes on a folder prepared otherwise
        prepare_tinystories.check_prepared(
            args.data_dir, args.input_file, args.val_file, args.val_fraction, None,
            os.path.join(args.data_dir, 'tokenizer.model'), os.path.join(args.data_dir, 'meta.json'), 'data_dir')
    if os.path.isfile(os.path.join(args.data_dir, 'val.bin')):  # used as it is: it must be TinyStories' kind
        try:
            meta = read_meta(args.data_dir)
        except ValueError as e:
            raise SystemExit(f"{e}: name another --data_dir, or remove {args.data_dir} to prepare it again") from None
        kind = meta.get('tokenizer', 'sentencepiece')
        vocab = config_value('vocab_size', train_args)
        if meta.get('max_stories'):  # the quick start's folder: reused, as a folder is, but said
            print(f"note: --data_dir={args.data_dir} holds the first {meta['max_stories']:,} training stories only "
                  f"(prepared with --max_stories), and the runs train on those; for all of them, name a new "
                  f"--data_dir")
        if kind != 'sentencepiece' or meta.get('vocab_size') not in (None, vocab):
            raise SystemExit(f"--data_dir={args.data_dir} holds {kind} tokens with a vocabulary of "
                             f"{meta.get('vocab_size')}, not the {vocab}-piece SentencePiece TinyStories the "
                             f"reproduction trains on: name another --data_dir (prepared here unless present)")
    other = earlier_results(args.assets or os.path.join(args.out_root, 'results'), args, train_args)
    if other:  # after the inputs' own checks, which say what is wrong with the command first
        raise SystemExit(other)


def prepare(args):
    """Stage 1: the data folder, prepared unless present, with the vocabulary the runs train with."""
    if not os.path.isfile(os.path.join(args.data_dir, 'val.bin')):
        local = ['--input_file', ','.join(args.input_file)] if args.input_file else []
        if args.input_file:
            local += ['--val_file', args.val_file] if args.val_file else ['--val_fraction', args.val_fraction]
        run('prepare_tinystories.py', '--vocab_size', config_value('vocab_size', args.train_args), '--out_dir', args.data_dir, *local)



def train_all(args, settings, train_args):
    """Stage 2: every setting on every seed (ablations on the first --ablation_seeds), --jobs at once.
    Returns (runs, diverged, minutes): the run folders per setting, in seed order, the seeds that
    diverged, and each run's training minutes."""
    seeds = list(args.seeds)
    # With --jobs=N, N runs train at once on 1/N of the cores each: on a CPU that other work shares
    # too, one-thread runs lose only their share of time, where a two-thread run stalls whenever
    # either thread waits for a core.
    threads = max(1, (os.cpu_count() or 1) // args.jobs) if args.jobs > 1 else None
    jobs = [(k, name, *setting, seed) for k, (name, setting) in enumerate(settings.items())
            for seed in (seeds[:args.ablation_seeds] if name in ABLATIONS else seeds)]

    def train(job):
        """(out_dir, finished, minutes): finished is None when the run diverged, minutes None when kept."""
        k, name, label, taper, aux, seed = job
        out_dir = os.path.join(args.out_root, f'{name}-s{seed}')
        done, total, _ = progress_of(os.path.join(out_dir, 'ckpt.pt'))
        timing = os.path.join(out_dir, 'train_time.json')
        if done is not None and done >= total and not args.retrain:
            print(f"{out_dir}: kept, its checkpoint is at the last step (--retrain trains it again)")
            return out_dir, '', json.load(open(timing))['minutes'] if os.path.isfile(timing) else None
        resume = done is not None and not args.retrain
        if resume:
            print(f"{out_dir}: resuming from iter {done} of {total}")
        t_run = time.time()
        finished = run('train.py', CONFIG, f'--taper={taper}', f'--aux_loss={aux}', f'--seed={seed}',
                       f'--out_dir={out_dir}', f'--data_dir={args.data_dir}', *train_args, *extra_flags(name, train_args),
                       '--init_from=resume' if resume else '--overwrite', allow_divergence=True,
                       progress=f"[{k + 1}/{len(settings)}] {label}, seed {seed}", threads=threads)
        took = (time.time() - t_run) / 60
        with open(timing, 'w') as f:  # this invocation's wall time (a resumed run: since its resume)
            json.dump(dict(minutes=took, threads=threads or torch.get_num_threads(), resumed_from=done), f)
        return out_dir, finished, took

    for k, name, label, taper, aux, seed in jobs if not args.retrain else ():  # before any run starts
        out_dir = os.path.join(args.out_root, f'{name}-s{seed}')
        done, _, held = progress_of(os.path.join(out_dir, 'ckpt.pt'))
        wanted = dict(train_values([*train_args, *extra_flags(name, train_args)]), taper=taper, aux_loss=aux,
                      seed=seed, data_dir=args.data_dir)
        differs = unlike(held, wanted) if done is not None else None
        if differs:  # a run kept or resumed under this name must be the one this command trains
            raise SystemExit(f"{out_dir} holds a run with {differs[0]}={differs[1]!r}, not the {differs[0]}="
                             f"{differs[2]!r} of {label}, seed {seed}: choose another --out_root, or pass --retrain "
                             f"to train it again")
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(train, job) for job in jobs]
        try:
            for future in as_completed(futures):
                if future.exception():  # stop at the first failure; the runs under way finish
                    for pending in futures:
                        pending.cancel()
                    raise future.exception()
        except KeyboardInterrupt:  # no queued run may start once the pool is left
            for pending in futures:
                pending.cancel()
            interrupted()
    trained = [future.result() for future in futures]
    runs, diverged, minutes = {}, {}, {}
    for (_, name, _, _, _, seed), (out_dir, finished, took) in zip(jobs, trained):
        runs.setdefault(name, []).append(out_dir)  # its log is plotted either way
        if took is not None:
            minutes[out_dir] = took
        if finished is None:
            diverged.setdefault(name, []).append(seed)
    return runs, diverged, minutes


def score_all(args, runs, diverged):
    """Stage 3: the validation CE of every run that finished, per setting, in seed order."""
    ce = {}
    for name, out_dirs in runs.items():
        for out_dir, seed in zip(out_dirs, args.seeds):
            if seed not in diverged.get(name, []):
                ce.setdefault(name, []).append(dict(seed=seed, **val_ce(os.path.join(out_dir, 'ckpt.pt'),
                                                                        args.data_dir, args.val_windows, True)))
    return ce


def fold_all(args, settings, runs, ce, diverged):
    """Stage 4: fold.py on every tapered run and the folded model's CE; on All-Taper runs also
    fold.py --reset_unseen, the mitigation, scored the same. Returns (fold, reset) per setting."""
    seeds = list(args.seeds)
    fold, reset = {}, {}
    for name, (_, taper, _) in settings.items():
        if taper == 'none':
            continue
        for out_dir, score in zip([d for d, s in zip(runs[name], seeds) if s not in diverged.get(name, [])],
                                  ce.get(name, [])):
            printed = run('fold.py', f'--out_dir={out_dir}')
            folded = val_ce(os.path.join(out_dir, 'ckpt_folded.pt'), args.data_dir, args.val_windows)
            numbers = re.search(r'\| = (\S+) on .*max \|logits\| (\S+), float32\); (\S+) with', printed)
            fold.setdefault(name, []).append(dict(
                seed=score['seed'], max_logit_diff=float(numbers[1]), max_logit=float(numbers[2]),
                max_logit_diff_float64=float(numbers[3]), val_ce=score['median'], val_ce_folded=folded['median']))
            if taper == 'all':  # the mitigation: only a model without a final norm has its own head
                printed = run('fold.py', f'--out_dir={out_dir}', '--reset_unseen', '--out=ckpt_reset.pt')
                tokens = int(re.search(r'embeddings of (\d+) tokens', printed)[1])
                after = val_ce(os.path.join(out_dir, 'ckpt_reset.pt'), args.data_dir, args.val_windows)
                reset.setdefault(name, []).append(dict(seed=score['seed'], tokens=tokens, before=score,
                                                       after=after))

    return fold, reset


def diagnose_worst(args, runs, ce):
    """Stage 5: diagnose.py on the All-Taper (+aux) run with the worst windows, into the results."""
    worst = max(((d, s) for d, s in zip(runs.get('all', []), ce.get('all', []))),
                key=lambda ds: (ds[1]['non_finite'], np.nan_to_num(ds[1]['mean'], nan=np.inf)), default=None)
    if worst:  # the diagnostic's report on the worst All-Taper (+aux) run, as the README shows it
        os.makedirs(args.assets, exist_ok=True)
        printed = run('diagnose.py', f'--out_dir={worst[0]}', f'--max_windows={args.val_windows}', '--top=2',
                      f"--plot={os.path.join(args.assets, 'diagnose.png')}")
        with open(os.path.join(args.assets, 'diagnose.txt'), 'w') as f:
            f.write(f"$ python diagnose.py --out_dir={worst[0]} --max_windows={args.val_windows} --top=2\n")
            f.write(''.join(printed.splitlines(keepends=True)[:-1]))  # the last line is its JSON



def benchmark(args, runs):
    """Stage 6: KV-cached decoding of the Internal-Taper model, Baseline against folded."""
    return json.loads(run('bench.py', '--fused', f"--ckpt={os.path.join(runs['internal'][0], 'ckpt.pt')}",
                          '--device=cpu', '--batch_size=1', f'--prompt_len={args.bench_prompt}',
                          f'--max_new_tokens={args.bench_new}', '--repeats=9').strip().splitlines()[-1])['rows']


KEPT_FILES = ('log.jsonl', 'config.json', 'train_time.json')  # what a run leaves in <assets>/runs


def plot_all(args, settings, runs):
    """Stage 7: each run's log, config and timing, kept beside the results (the repository's copy of
    every row a figure draws), and the figures drawn from those copies: the paper's settings, then
    every setting (ablations_*.png). Returns what plot.py printed."""
    kept, copies = {}, os.path.join(args.assets, 'runs')
    for name in settings:
        for out_dir in runs[name]:
            kept[out_dir] = os.path.join(copies, os.path.basename(out_dir))
            os.makedirs(kept[out_dir], exist_ok=True)
            for f in KEPT_FILES:
                if os.path.isfile(os.path.join(out_dir, f)):
                    shutil.copyfile(os.path.join(out_dir, f), os.path.join(kept[out_dir], f))
                elif os.path.isfile(os.path.join(kept[out_dir], f)):  # removed since the copy was made
                    print(f"note: {out_dir} has no {f} now, so the figures draw "
                          f"{os.path.join(kept[out_dir], f)}, the copy an earlier reproduce.py kept of it")
    # copies of runs that these results no longer hold (a seed or setting left out since) would be drawn
    # by the next redraw of runs/*: they go, and only they (folders that hold nothing but such copies)
    for folder in sorted(set(os.listdir(copies)) - {os.path.basename(d) for d in kept.values()}):
        path = os.path.join(copies, folder)
        if os.path.isdir(path) and not os.path.islink(path) and set(os.listdir(path)) <= set(KEPT_FILES):
            shutil.rmtree(path)
            print(f"removed {path}: a copy of a run these results do not hold (the run itself is not touched)")
    paper = [name for name in settings if name not in ABLATIONS]
    figures = run('plot.py', *[kept[d] for name in paper for d in runs[name]], '--out_dir', args.assets,
                  '--labels', ','.join(settings[name][0] for name in paper for _ in runs[name]))
    if len(paper) < len(settings):
        figures += run('plot.py', *[kept[d] for name in settings for d in runs[name]], '--out_dir', args.assets,
                       '--prefix', 'ablations_', '--labels', ','.join(settings[name][0] for name in settings
                                                                      for _ in runs[name]))

    return figures


def paired_gap(base_scores, scores, key, base_key=None):
    """The setting's CE (key) minus Baseline's (base_key, default key) on the same seed (same initial
    weights and batches), over the seeds both have: mean and sd in nats and in %, the signs, and the
    paired t statistic."""
    by_seed = {s['seed']: s[base_key or key] for s in base_scores}
    pairs = [(s[key], by_seed[s['seed']]) for s in scores if s['seed'] in by_seed]
    if not pairs:
        return None
    d = np.array([a - b for a, b in pairs])
    pct = np.array([100 * (a / b - 1) for a, b in pairs])
    sd = float(np.std(d, ddof=1)) if len(d) > 1 else None
    return dict(seeds=len(d), nats=float(d.mean()), nats_sd=sd, pct=float(pct.mean()),
                pct_sd=float(np.std(pct, ddof=1)) if len(d) > 1 else None,
                signs=''.join('+' if x > 0 else '-' if x < 0 else '0' for x in d),
                t=float(d.mean() / (sd / np.sqrt(len(d)))) if sd else None)

def summary(scores, key):
    values = [s[key] for s in scores]
    return float(np.mean(values)), (float(np.std(values, ddof=1)) if len(values) > 1 else None)


def write_results(args, settings, runs, ce, diverged, minutes, fold, reset, bench, figures, t0):
    """Stage 8: results.json and results.md in --assets, the tables printed."""
    seeds = list(args.seeds)
    train_args = args.train_args
    keys = ('mean', 'median', 'clean_mean', 'clean_median')
    base = {key: summary(ce['baseline'], key)[0] for key in keys}
    table = {}
    for name, (label, _, _) in settings.items():
        scores = ce.get(name, [])
        row = dict(label=label, val_ce=scores, diverged_seeds=diverged.get(name, []))
        for key in keys:
            value, std = summary(scores, key) if scores else (None, None)
            row[key], row[key + '_std'] = value, std
            row[key + '_gap'] = None if name == 'baseline' or value is None else 100 * (value / base[key] - 1)
        for key in ('outliers', 'non_finite', 'excluded'):
            row[key] = sum(s[key] for s in scores)
        if name != 'baseline':
            row['paired'] = {key: paired_gap(ce['baseline'], scores, key) for key in keys}
        table[name] = row
    tok_per_s = {r['variant']: r['tok_per_s'] for r in bench}
    meta = json.load(open(os.path.join(args.data_dir, 'meta.json')))
    cfg = torch.load(os.path.join(runs['baseline'][0], 'ckpt.pt'), map_location='cpu', weights_only=False)['config']
    seen = cfg['max_iters'] * cfg['batch_size'] * cfg['gradient_accumulation_steps'] * cfg['block_size']
    data = dict(train_tokens=meta['train_tokens'], val_tokens=meta['val_tokens'],
                tokens_per_run=seen, epochs=seen / meta['train_tokens'],
                val_windows=min(args.val_windows, (meta['val_tokens'] - 1) // cfg['block_size']))
    results = dict(seeds=seeds, settings=table, fold=fold, reset_unseen=reset, bench=bench, data=data,
                   train_minutes=minutes, train_args=train_args, minutes=(time.time() - t0) / 60)
    os.makedirs(args.assets, exist_ok=True)
    with open(os.path.join(args.assets, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)

    def cell(row, key):
        if row[key] is None:
            return 'diverged'
        std = f" ± {row[key + '_std']:.4f}" if row[key + '_std'] is not None else ''
        gap = f" ({row[key + '_gap']:+.3g}%)" if row[key + '_gap'] is not None else ''
        return f"{row[key]:.4g}{std}{gap}"

    md = [f"data: {data['train_tokens']:,} training tokens, {data['val_tokens']:,} held out; each run trains on "
          f"{data['tokens_per_run']:,} tokens, {data['epochs']:.1f} epochs",
          '',
          f"val CE at g = 0 over {data['val_windows']} held-out windows (float64), {len(seeds)} seed(s), mean ± std "
          f"over seeds (gap vs Baseline); clean windows hold only tokens that occur in training",
          '',
          "| setting | clean windows, mean | clean windows, median | windows excluded (sum over seeds) | "
          "all windows, median | all windows, mean | non-finite (sum) | > 2x median (sum) | paper's gap (1M) |",
          "|---|---|---|---|---|---|---|---|---|"]
    for name, row in table.items():
        trained = len(runs[name])
        note = f" ({len(row['diverged_seeds'])} of {trained} seeds diverged)" if row['diverged_seeds'] else ''
        note += f" ({trained} seed{'s' * (trained > 1)})" if trained < len(seeds) else ''
        md.append(f"| {row['label']}{note} | {cell(row, 'clean_mean')} | {cell(row, 'clean_median')} | {row['excluded']} | "
                  f"{cell(row, 'median')} | {cell(row, 'mean')} | {row['non_finite']} | {row['outliers']} | "
                  f"{PAPER_GAP.get(name, '')} |")
    def paired_cell(gap):
        if gap is None:
            return 'no seed shared with Baseline'
        sd = f" ± {gap['nats_sd']:.3f}" if gap['nats_sd'] is not None else ''
        pct = f" ± {gap['pct_sd']:.2f}" if gap['pct_sd'] is not None else ''
        t = f", t = {gap['t']:.3g}" if gap['t'] is not None else ''
        return f"{gap['nats']:+.3f}{sd} ({gap['pct']:+.2f}{pct}%), {gap['signs']}{t}"

    md += ['', "paired gap to Baseline: the setting's val CE minus Baseline's on the same seed (same initial "
               "weights and batches), mean ± sd over seeds in nats (and %), each seed's sign, and the paired t",
           '', "| setting | seeds | clean windows, mean | all windows, median |", "|---|---|---|---|"]
    for name, row in table.items():
        if name != 'baseline' and row['paired']['clean_mean'] is not None:
            md.append(f"| {row['label']} | {row['paired']['clean_mean']['seeds']} | "
                      f"{paired_cell(row['paired']['clean_mean'])} | {paired_cell(row['paired']['median'])} |")
    md += ['', "the pre-logit vector's length as confidence (diagnose.prelogit_confidence, all windows, mean over "
               "seeds): the coefficient of variation over tokens of the head's input RMS (a final norm fixes it); "
               "the CE at the best single logit temperature; the same with every token's head input rescaled to "
               "the mean RMS first (its directions alone); and that CE's paired gap to Baseline's at its best "
               "temperature", '',
           "| setting | RMS cv | CE, best temperature | CE at one RMS | at one RMS, paired gap to Baseline |",
           "|---|---|---|---|---|"]
    for name, row in table.items():
        scores = [s for s in row['val_ce'] if 'ce_one_rms' in s]
        if scores:
            gap = paired_gap(ce['baseline'], scores, 'ce_one_rms', 'ce_tempered') if name != 'baseline' else None
            md.append(f"| {row['label']} | {summary(scores, 'prelogit_cv')[0]:.3f} | {summary(scores, 'ce_tempered')[0]:.4f} | "
                      f"{summary(scores, 'ce_one_rms')[0]:.4f} | {paired_cell(gap) if gap else ''} |")
    md += ['', 'per seed', '',
           "| setting | seed | clean windows, mean | windows excluded | all windows, median | all windows, mean | "
           "non-finite | > 2x median (of them clean) | train minutes |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, row in table.items():
        for s, out_dir in zip(row['val_ce'], [d for d, x in zip(runs[name], seeds) if x not in row['diverged_seeds']]):
            took = f"{minutes[out_dir]:.1f}" if out_dir in minutes else 'not recorded'
            md.append(f"| {row['label']} | {s['seed']} | {s['clean_mean']:.4f} | {s['excluded']} | {s['median']:.4f} | "
                      f"{s['mean']:.4g} | {s['non_finite']} | {s['outliers']} ({s['clean_outliers']}) | {took} |")
    md += ['', 'fold.py, per seed: max |Δlogits| of the folded model in float32 (against the largest |logit|) '
               'and in float64; the median val CE before and after', '',
           "| setting | seed | max \\|Δlogits\\| float32 | max \\|logits\\| | float64 | median val CE | folded |",
           "|---|---|---|---|---|---|---|"]
    for name, rows in fold.items():
        md += [f"| {settings[name][0]} | {f['seed']} | {f['max_logit_diff']:.2e} | {f['max_logit']:.3g} | "
               f"{f['max_logit_diff_float64']:.2e} | {f['val_ce']:.6f} | {f['val_ce_folded']:.6f} |" for f in rows]
    md += ['', 'fold.py --reset_unseen (the mitigation) on all windows, before -> after', '',
           "| setting | seed | tokens reset | mean | median | non-finite | > 2x median | clean windows, mean |",
           "|---|---|---|---|---|---|---|---|"]
    for name, rows in reset.items():
        for r in rows:
            b, a = r['before'], r['after']
            md.append(f"| {settings[name][0]} | {r['seed']} | {r['tokens']} | {b['mean']:.4g} -> {a['mean']:.4g} | "
                      f"{b['median']:.4f} -> {a['median']:.4f} | {b['non_finite']} -> {a['non_finite']} | "
                      f"{b['outliers']} -> {a['outliers']} | {b['clean_mean']:.4f} -> {a['clean_mean']:.4f} |")
    md += ['', f"decode B=1 T={args.bench_prompt} on the CPU: Baseline {tok_per_s['baseline']:,.0f} tok/s, fused "
               f"{tok_per_s['fused']:,.0f} tok/s ({tok_per_s['fused'] / tok_per_s['baseline']:.2f}x)"]
    with open(os.path.join(args.assets, 'results.md'), 'w') as f:
        f.write('\n'.join(md) + '\n')
    print('\n' + '\n'.join(md))
    print(figures.strip())
    print(f"{results['minutes']:.1f} minutes; results in {os.path.join(args.assets, 'results.json')} and results.md")



def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index('--') if '--' in argv else len(argv)
    args = parse_flags(FLAGS, argv[:cut])
    args.train_args = [a for a in argv[cut + 1:] if a != '--']
    check_args(args, args.train_args)
    settings = {name: SETTINGS[name] for name in args.settings}
    args.assets = args.assets or os.path.join(args.out_root, 'results')
    t0 = time.time()
    STAGE[0] = 'preparing the data'
    prepare(args)
    STAGE[0] = 'training'
    runs, diverged, minutes = train_all(args, settings, args.train_args)
    STAGE[0] = 'scoring the runs'
    ce = score_all(args, runs, diverged)
    STAGE[0] = 'folding the runs'
    fold, reset = fold_all(args, settings, runs, ce, diverged)
    STAGE[0] = 'running the diagnostic'
    diagnose_worst(args, runs, ce)
    STAGE[0] = 'benchmarking'
    bench = benchmark(args, runs)
    STAGE[0] = 'drawing the figures'
    figures = plot_all(args, settings, runs)
    STAGE[0] = 'writing the results'
    write_results(args, settings, runs, ce, diverged, minutes, fold, reset, bench, figures, t0)


if __name__ == '__main__':
    for signum in STOPS:
        signal.signal(signum, stop)
    try:
        main()
    except KeyboardInterrupt:
        interrupted()
