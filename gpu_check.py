"""
Every CUDA path of the repository in one command and a few minutes, with a report:

    python gpu_check.py                          # on a CUDA machine -> out-gpu-check/report.{md,json}
    python gpu_check.py --only=bench,fold_alltaper   # some steps again

Each step runs the repository's own scripts as a subprocess, at small scale, on data made here (no
hub access: a random bigram chain of tokens, 4 successors each, so the loss has somewhere to fall,
and a random-weight GPT-2 written with save_pretrained). A failing step is recorded with its last
line of output and the next step runs.

  train_eager    train.py, the d = 512 TinyStories model in bf16 through the three taper phases
                 (calibration at g = 1, mid-taper, g = 0): the loss falls; tok/s and MFU
  train_compile  the same under torch.compile, recompilations counted (TORCH_LOGS=recompiles): the
                 gate is a tensor, so only the two phase changes may recompile
  bench          bench.py --compile --cuda_graph: Table 2 in every mode, with the ratios
  finetune_vanilla, finetune_fakeln, finetune_internaltaper, finetune_alltaper
                 a random-weight GPT-2 (50,257-token vocabulary) fine-tuned under each protocol of
                 Table 3 in bf16 (the S configs on a short schedule; All-TaperLN with activation
                 checkpointing)
  fold_alltaper, fold_fakeln
                 fold.py on the All-TaperLN and FakeLN runs (with the HF export), then evaluate.py
                 in bf16 on each checkpoint and its folded copy: the same cross-entropy
  ddp, fsdp      torchrun over the GPUs present: DDP and FSDP2 (one GPU: a single-rank FSDP2 run)
  (data makes the token files the others read; --only takes these names)

The device memory in use is sampled during every step (the CUDA driver's view, context included)
and set beside memory.py's plan for the training runs.

On a machine without network access, the fold steps need tiktoken's GPT-2 files: set
TIKTOKEN_CACHE_DIR to a folder that holds them. The report of the first run, on one H100, is kept in
assets/gpu-check/.

Without CUDA it stops. --device=cpu runs the same steps at toy size in float32 (bench.py in eager
mode only); that is what the tests do. The exit status is 1 when a step failed.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import traceback

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import torch

import memory

from configurator import FlagError, configure_globals, flag  # noqa: E402
# -----------------------------------------------------------------------------
STEPS = ('data', 'train_eager', 'train_compile', 'bench', 'finetune_vanilla', 'finetune_fakeln',
         'finetune_internaltaper', 'finetune_alltaper', 'fold_alltaper', 'fold_fakeln', 'ddp', 'fsdp')
out_dir = flag('out-gpu-check', "the folder of the report, the data made here and the runs", path='out')
device = flag('cuda', "'cuda' runs the check; 'cpu' the toy run of the tests", choices=('cuda', 'cpu'))
only = flag((), "the steps to run again (none named: every step); the report keeps the others' last results",
            items=str, unique=True, choices=STEPS)
timeout = flag(600, "seconds each script may run", min=1)
# -----------------------------------------------------------------------------
try:
    configure_globals(globals(), sys.argv[1:])
except FlagError as e:
    print(e, file=sys.stderr)
    sys.exit(1)
ROOT = os.path.dirname(os.path.abspath(__file__))
PROTOCOLS = ('vanilla', 'fakeln', 'internaltaper', 'alltaper')
# Sizes: the CUDA run is the paper's d = 512 model on short schedules; the CPU run only proves the
# steps work together. The d = 512 schedule keeps the paper's learning rate and starts the taper a
# third of the way in: on an H100, every run at 6e-4 or 1e-3, and both at 3e-4 that started the taper
# at step 50, diverged mid-taper (assets/gpu-check/schedule_sweep.txt).
SCALE = {
    'cuda': dict(
        train=['--n_layer=8', '--n_head=16', '--n_embd=512', '--block_size=512', '--batch_size=16',
               '--max_iters=600', '--warmup_iters=30', '--lr_decay_iters=600', '--taper_start=200',
               '--taper_end=500', '--eval_interval=50', '--eval_iters=4', '--log_interval=10',
               '--learning_rate=3e-4'],
        gpt2=dict(n_layer=4, n_head=4, n_embd=256),
        finetune=['--block_size=256', '--batch_size=8', '--gradient_accumulation_steps=2',
                  '--max_iters=60', '--warmup_iters=5', '--lr_decay_iters=60', '--learning_rate=1e-3',
                  '--min_lr=1e-4', '--taper_start=10', '--taper_end=45', '--fakeln_start=10,20,30,45',
                  '--fakeln_gap=2,2,3', '--eval_interval=20', '--eval_iters=4',
                  '--log_interval=5'],
        bench=['--compile', '--cuda_graph', '--max_new_tokens=64', '--repeats=3'],
        tokens=2_000_000),
    'cpu': dict(
        train=['--n_layer=2', '--n_head=4', '--n_embd=64', '--block_size=64', '--batch_size=8',
               '--max_iters=24', '--warmup_iters=4', '--lr_decay_iters=24', '--taper_start=8',
               '--taper_end=18', '--eval_interval=8', '--eval_iters=2', '--log_interval=4',
               '--learning_rate=3e-3'],
        gpt2=dict(n_layer=2, n_head=2, n_embd=32),
        finetune=['--block_size=64', '--batch_size=4', '--gradient_accumulation_steps=2',
                  '--max_iters=16', '--warmup_iters=2', '--lr_decay_iters=16', '--learning_rate=3e-3',
                  '--min_lr=3e-4', '--taper_start=3', '--taper_end=12', '--fakeln_start=2,6,9,13',
                  '--fakeln_gap=1,1,1', '--eval_interval=8', '--eval_iters=2',
                  '--log_interval=2'],
        bench=['--max_new_tokens=8', '--repeats=1', '--batch_size=1', '--prompt_len=16'],  # eager only
        tokens=200_000),
}
# The paper's Table 2 (H100, bf16, eager), tok/s: (B, T) -> (Baseline, unfused, fused).
PAPER_TABLE2 = {(1, 128): (336, 383, 397), (1, 256): (340, 383, 398),
                (4, 128): (1253, 1382, 1441), (4, 256): (1250, 1378, 1437)}


class StepFailed(Exception):
    """A check of a step did not hold: one sentence for the report."""


def expect(condition, message):
    if not condition:
        raise StepFailed(message)


def sh(*args, env=None, torchrun=0):
    """Run one of the repository's scripts; its stdout and stderr, or StepFailed with its last line."""
    launcher = [sys.executable]
    if torchrun:
        launcher += ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={torchrun}']
    cmd = launcher + [str(a) for a in args]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, 'HF_HUB_OFFLINE': '1', **(env or {})})
    except subprocess.TimeoutExpired:
        raise StepFailed(f"`{args[0]}` ran past --timeout={timeout} s and was stopped: raise --timeout, "
                         f"e.g. --timeout={max(600, 4 * timeout)}") from None
    if proc.returncode != 0:  # the scripts say why on stderr; stdout's last line is only their last log row
        lines = [line for line in proc.stderr.splitlines() if line.strip()] or \
                [line for line in proc.stdout.splitlines() if line.strip()]
        raise StepFailed(f"`{' '.join(map(str, args))}` exited with {proc.returncode}: "
                         f"{lines[-1] if lines else 'no output'}")
    return proc.stdout, proc.stderr


class DeviceMemory:
    """The peak device memory in use during a step, over every GPU, above what was in use before it
    (sampled every 20 ms from the driver, so it includes the CUDA context and the allocator's cache)."""

    def __init__(self, on_cuda):
        self.on_cuda = on_cuda
        self.peak = None

    def used(self):
        return [total - free for free, total in
                (torch.cuda.mem_get_info(i) for i in range(torch.cuda.device_count()))]

    def __enter__(self):
        if self.on_cuda:
            self.base = self.used()
            self.peak = 0
            self.done = threading.Event()
            self.thread = threading.Thread(target=self.sample, daemon=True)
            self.thread.start()
        return self

    def sample(self):
        while not self.done.wait(0.02):
            self.peak = max(self.peak, *(u - b for u, b in zip(self.used(), self.base)))

    def __exit__(self, *exc):
        if self.on_cuda:
            self.done.set()
            self.thread.join()


# --- data, made here -------------------------------------------------------------------------------

def bigram_stream(vocab_size, n, seed):
    """n tokens of a random Markov chain in which every token has 4 equally likely successors: the
    best possible cross-entropy is ln 4."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, vocab_size, (vocab_size, 4))
    choice = rng.integers(0, 4, n)
    out = np.empty(n, dtype=np.uint16)
    out[0] = 1
    for i in range(1, n):
        out[i] = successors[out[i - 1], choice[i]]
    return out


def write_dataset(path, vocab_size, n_tokens, extra_splits=(), **meta):
    os.makedirs(path, exist_ok=True)
    stream = bigram_stream(vocab_size, n_tokens, seed=vocab_size)
    cut = n_tokens * 9 // 10
    stream[:cut].tofile(os.path.join(path, 'train.bin'))
    for split in ('val', *extra_splits):
        stream[cut:].tofile(os.path.join(path, f'{split}.bin'))
    with open(os.path.join(path, 'meta.json'), 'w') as f:
        json.dump(dict(vocab_size=vocab_size, **meta), f)


def make_data(ctx):
    write_dataset(ctx['tiny_data'], 10000, ctx['scale']['tokens'])
    write_dataset(ctx['owt_data'], 50257, ctx['scale']['tokens'], extra_splits=('pile', 'pile_filtered'),
                  eot_token=50256)  # the GPT-2 configs mask end-of-text targets
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as transformers_logging
    transformers_logging.disable_progress_bar()  # the steps' lines are the output, on stdout
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_positions=1024, **ctx['scale']['gpt2'])).save_pretrained(ctx['gpt2_dir'])
    return dict(data=f"bigram chains of {ctx['scale']['tokens']:,} tokens (vocab 10,000 and 50,257); "
                     f"a random GPT-2 {ctx['scale']['gpt2']}")


# --- the steps -----------------------------------------------------------------------------------

def read_log(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, 'log.jsonl'))]
    return [r for r in rows if 'lr' in r], [r for r in rows if 'val_loss' in r]


def planned_gb(args, nproc=1):
    config = memory.resolve(list(args))
    return round(memory.plan(config, nproc)['total'] / memory.GB, 2)


def train_metrics(run_dir):
    """Loss falls across the taper; tok/s and MFU (the first logged step, with its warm-up, left out)."""
    rows, evals = read_log(run_dir)
    expect(all(np.isfinite(r['loss']) for r in rows), "a training loss is not finite")
    expect(rows[-1]['loss'] < rows[0]['loss'],
           f"the loss did not fall ({rows[0]['loss']:.3f} -> {rows[-1]['loss']:.3f})")
    steady = rows[1:] or rows
    return dict(loss_first=round(rows[0]['loss'], 4), loss_last=round(rows[-1]['loss'], 4),
                val_loss_last=round(evals[-1]['val_loss'], 4) if evals else None,
                gates=sorted({round(r['gate'], 3) for r in rows}),
                tok_per_s=round(statistics.median(r['tok_per_s'] for r in steady)),
                mfu=round(statistics.median(r['mfu'] for r in steady), 4) if 'mfu' in steady[0] else None)


def train_args(ctx, name):
    return ['train.py', f'--device={ctx["device"]}', f'--data_dir={ctx["tiny_data"]}', '--vocab_size=10000',
            '--overwrite',  # each check trains afresh over its last one
            '--taper=internal', '--aux_loss=fixed', *ctx['scale']['train'], f'--out_dir={ctx["runs"]}/{name}']


def train_eager(ctx):
    args = train_args(ctx, 'eager')
    sh(*args)
    metrics = train_metrics(f"{ctx['runs']}/eager")
    expect(metrics['gates'][0] == 0.0 and metrics['gates'][-1] == 1.0 and len(metrics['gates']) > 2,
           f"the run did not pass through the three taper phases (gates {metrics['gates']})")
    return dict(metrics, plan_gb=planned_gb(args[1:]))


def train_compile(ctx):
    args = train_args(ctx, 'compile') + ['--compile']
    _, err = sh(*args, env={'TORCH_LOGS': 'recompiles'})
    recompiles = [line for line in err.splitlines() if 'Recompiling function' in line]
    metrics = train_metrics(f"{ctx['runs']}/compile")
    # start_taper() and g = 0 change the layers' phase flags, which the graph depends on; the gate's
    # value itself changes every step without recompiling.
    expect(len(recompiles) <= 2, f"{len(recompiles)} recompilations, more than the 2 phase changes")
    return dict(metrics, recompiles=len(recompiles), plan_gb=planned_gb(args[1:]))


def bench(ctx):
    out, _ = sh('bench.py', f'--device={ctx["device"]}', *ctx['scale']['bench'])
    rows = json.loads(out.strip().splitlines()[-1])['rows']
    table = {}
    for r in rows:
        table.setdefault((r['mode'], r['batch_size'], r['prompt_len']), {})[r['variant']] = r['tok_per_s']
    modes = {mode for mode, _, _ in table}
    expect(len(modes) == (4 if ctx['device'] == 'cuda' else 1), f"bench.py timed only {sorted(modes)}")
    return dict(table=[dict(mode=mode, batch_size=B, prompt_len=T, **tok)
                       for (mode, B, T), tok in table.items()])


def finetune(ctx, proto):
    g = ctx['scale']['gpt2']
    args = ['train.py', f'{ROOT}/config/finetune_gpt2_s_{proto}.py', f'--device={ctx["device"]}', '--overwrite',
            f'--init_from={ctx["gpt2_dir"]}', f'--data_dir={ctx["owt_data"]}',
            f'--out_dir={ctx["runs"]}/{proto}',
            f'--n_layer={g["n_layer"]}', f'--n_head={g["n_head"]}', f'--n_embd={g["n_embd"]}',
            *ctx['scale']['finetune'], *(['--grad_checkpoint'] if proto == 'alltaper' else [])]
    sh(*args)
    metrics = train_metrics(f"{ctx['runs']}/{proto}")
    rows, evals = read_log(f"{ctx['runs']}/{proto}")
    if proto == 'fakeln':
        expect(rows[-1]['removed'] == 3 * g['n_layer'] + 1,
               f"FakeLN removed {rows[-1]['removed']} LayerNorms")
    if proto in ('internaltaper', 'alltaper'):
        expect(evals[-1]['eval_gate'] == 0.0, "the taper did not reach g = 0")
    return dict(metrics, plan_gb=planned_gb(args[1:]))


def fold(ctx, proto):
    """fold.py's float32/float64 check, then evaluate.py in bf16 on both checkpoints."""
    run_dir = f"{ctx['runs']}/{proto}"
    out, _ = sh('fold.py', f'--out_dir={run_dir}', f'--export_hf={run_dir}/hf')
    diff, scale = map(float, re.search(r'\| = (\S+) on .*max \|logits\| (\S+),', out).groups())
    expect(diff < 1e-4 * max(1.0, scale),
           f"folding changed the logits by {diff:.2e} (max |logits| {scale:.3g})")
    ce = {}
    for ckpt in ('ckpt.pt', 'ckpt_folded.pt'):
        out, _ = sh('evaluate.py', f'--out_dir={run_dir}', f'--ckpt={ckpt}', f'--data_dir={ctx["owt_data"]}',
                    f'--device={ctx["device"]}', '--max_chunks=4', '--batch_size=2')
        ce[ckpt] = json.loads(out.strip().splitlines()[-1])['owt']
    # both run in bf16 on CUDA: the folded model is the same function up to bf16 rounding
    expect(abs(ce['ckpt.pt'] - ce['ckpt_folded.pt']) < 2 ** -7 * ce['ckpt.pt'],
           f"evaluate.py: CE {ce['ckpt.pt']:.4f} unfolded vs {ce['ckpt_folded.pt']:.4f} folded")
    return dict(max_logit_diff=diff, max_logit=scale, ce=ce['ckpt.pt'], ce_folded=ce['ckpt_folded.pt'])


def distributed(ctx, fsdp):
    nproc = max(1, torch.cuda.device_count()) if ctx['device'] == 'cuda' else 1
    name = 'fsdp' if fsdp else 'ddp'
    args = [a for a in train_args(ctx, name) if not a.startswith('--eval_iters=')]  # given once, for nproc ranks
    args += [f'--gradient_accumulation_steps={nproc}', f'--eval_iters={2 * nproc}']
    sh(*args, *(['--fsdp'] if fsdp else []), torchrun=nproc)
    metrics = train_metrics(f"{ctx['runs']}/{name}")
    from model import GPT
    GPT.from_checkpoint(f"{ctx['runs']}/{name}/ckpt.pt")  # FSDP's checkpoint is gathered whole
    return dict(metrics, ranks=nproc, plan_gb=planned_gb(args[1:] + (['--fsdp'] if fsdp else []), nproc))


# The step each one reads from: the data, or the fine-tune it folds.
NEEDS = {**{name: 'data' for name in ('train_eager', 'train_compile', 'ddp', 'fsdp')},
         **{f'finetune_{p}': 'data' for p in PROTOCOLS}, **{f'fold_{p}': f'finetune_{p}' for p in ('alltaper', 'fakeln')}}


def steps(ctx):
    """(name, function) in order; later steps read what earlier ones wrote."""
    listed = [('data', make_data), ('train_eager', train_eager), ('train_compile', train_compile),
              ('bench', bench)]
    listed += [(f'finetune_{p}', lambda ctx, p=p: finetune(ctx, p)) for p in PROTOCOLS]
    listed += [(f'fold_{p}', lambda ctx, p=p: fold(ctx, p)) for p in ('alltaper', 'fakeln')]
    multi = ctx['device'] == 'cuda' and torch.cuda.device_count() > 1
    if multi:
        listed.append(('ddp', lambda ctx: distributed(ctx, fsdp=False)))
    listed.append(('fsdp', lambda ctx: distributed(ctx, fsdp=True)))
    return listed


# --- the report ----------------------------------------------------------------------------------

def environment(on_cuda):
    env = dict(torch=torch.__version__, python=sys.version.split()[0], device='cpu')
    if on_cuda:
        env.update(device=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count(),
                   cuda=torch.version.cuda,
                   memory_gb=round(torch.cuda.get_device_properties(0).total_memory / 1e9, 1))
    return env


def markdown(env, results):
    lines = ['# gpu_check.py report', '', ' · '.join(f"{k} {v}" for k, v in env.items()), '',
             '| step | result | seconds | peak device memory (GB) | memory.py plan (GB) | notes |',
             '|---|---|---|---|---|---|']
    for r in results:
        notes = r.get('error') or ', '.join(f"{k} {v}" for k, v in r.get('metrics', {}).items()
                                            if k not in ('table', 'plan_gb'))
        lines.append(f"| {r['step']} | {'ok' if r['ok'] else 'FAILED'} | {r['seconds']:.0f} | "
                     f"{'-' if r['peak_gb'] is None else r['peak_gb']} | "
                     f"{r.get('metrics', {}).get('plan_gb', '-')} | {notes.replace('|', '/')} |")
    for r in results:
        if r['step'] == 'bench' and r['ok']:
            lines += ['', '## Decoding (bench.py), tok/s; x = over Baseline', '',
                      '| mode | B | T | Baseline | unfused | fused | paper (eager, H100) |',
                      '|---|---|---|---|---|---|---|']
            for row in r['metrics']['table']:
                base = row['baseline']
                cells = [f"{row[v]:,.0f} ({row[v] / base:.2f}x)" if v in row else '-'
                         for v in ('unfused', 'fused')]
                paper = PAPER_TABLE2.get((row['batch_size'], row['prompt_len']))
                paper = f"{paper[0]} / {paper[1]} / {paper[2]}" if paper and row['mode'] == 'eager' else ''
                lines.append(f"| {row['mode']} | {row['batch_size']} | {row['prompt_len']} | {base:,.0f} | "
                             f"{' | '.join(cells)} | {paper} |")
    return '\n'.join(lines) + '\n'


def fail(message):
    """Stop with one sentence that says what to do."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def main():
    on_cuda = device == 'cuda'
    if on_cuda and not torch.cuda.is_available():
        fail("CUDA is not available on this machine: gpu_check.py checks the GPU paths (the CPU ones are in "
             "python -m pytest; --device=cpu runs this check at toy size)")
    root = os.path.abspath(out_dir)
    ctx = dict(device=device, scale=SCALE[device], runs=f'{root}/runs', tiny_data=f'{root}/data/tiny',
               owt_data=f'{root}/data/owt', gpt2_dir=f'{root}/gpt2-random')
    listed = steps(ctx)
    chosen = list(only) or [name for name, _ in listed]
    unknown = [name for name in chosen if name not in {name for name, _ in listed}]
    if unknown:  # ddp, on fewer than two GPUs
        fail(f"the {unknown[0]} step needs more than one CUDA GPU, and this machine has "
             f"{torch.cuda.device_count() if on_cuda else 0}: drop it from --only")
    env = environment(on_cuda)
    previous = {}  # --only reruns some steps: the report keeps the others' last results
    if os.path.isfile(f'{root}/report.json'):
        try:
            with open(f'{root}/report.json') as f:
                report = json.load(f)
            previous = {r['step']: r for r in report['steps']}
            earlier = report['environment']['device']
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            fail(f"{root}/report.json is not a report of gpu_check.py, and gpu_check.py writes only over its "
                 f"own: choose a new or empty --out_dir")
        if earlier != env['device']:  # e.g. the kept report of a GPU, and a toy run on the CPU
            fail(f"{root} holds the report of a check on {earlier}, and this one runs on {env['device']}: a report "
                 f"holds one device's results, so choose another --out_dir")
    if not only:
        previous = {}
    for name in chosen:  # a step reads what an earlier one wrote: that one runs now, or ran here before
        need = NEEDS.get(name)
        if need and need not in chosen and not previous.get(need, {}).get('ok'):
            fail(f"the {name} step reads what the {need} step writes, which has not run in {root}: add {need} "
                 f"to --only, or drop --only to run every step")
    lock = configurator.FolderLock(root, 'gpu_check.py')  # one check at a time writes root (held up front if there)
    if os.path.isdir(root) and os.listdir(root) and not os.path.isfile(f'{root}/report.json'):
        fail(f"{root} holds files that gpu_check.py did not write (it has no report.json): choose a new or "
             f"empty --out_dir")
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as e:
        fail(f"cannot create {root} ({e.strerror}): choose another --out_dir")
    lock.hold()
    results = []
    for name, function in listed:
        if name not in chosen:
            if name in previous:
                results.append(previous[name])
            continue
        print(f"{name} ...", flush=True)
        t0 = time.time()
        result = dict(step=name, ok=True)
        with DeviceMemory(on_cuda) as mem:
            try:
                result['metrics'] = function(ctx)
            except StepFailed as e:
                result.update(ok=False, error=str(e))
            except Exception as e:  # a bug in a check must not hide the other steps
                result.update(ok=False, error=f"{type(e).__name__}: {e}".splitlines()[0],
                              traceback=traceback.format_exc())
        result.update(seconds=round(time.time() - t0, 1),
                      peak_gb=None if mem.peak is None else round(mem.peak / 1e9, 2))
        print(f"{name}: {'ok' if result['ok'] else 'FAILED: ' + result['error']} ({result['seconds']:.0f} s)",
              flush=True)
        results.append(result)
        with open(f'{root}/report.json', 'w') as f:  # written after every step: a crash keeps the rest
            json.dump(dict(environment=env, steps=results), f, indent=1)
        with open(f'{root}/report.md', 'w') as f:
            f.write(markdown(env, results))
    failed = [r for r in results if not r['ok']]
    print(f"\n{len(results) - len(failed)} of {len(results)} steps ok"
          + (f"; failed: {', '.join(r['step'] for r in failed)}" if failed else '') + f"; report in {root}/report.md")
    if failed:  # the first failure's own sentence, where a failed command's message goes
        fail(f"{len(failed)} of {len(results)} steps failed, first {failed[0]['step']}: {failed[0]['error']} "
             f"(report in {root}/report.md)")


if __name__ == '__main__':
    main()
