"""
The scripts, end to end on real TinyStories text (../shared/data): data preparation, training in
every setting of the paper, exact resume, DDP, the errors a user can cause, and the figures.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import prepare_tinystories
from fold import fold_model
from model import GPT

from conftest import ROOT, SHARED, TINY, pretrained_layernorm_std, require_shared, run, run_pairwise, train_namespace
from memory import resolve


def read_log(out_dir):
    rows = [json.loads(line) for line in open(Path(out_dir) / 'log.jsonl')]
    return [r for r in rows if 'lr' in r], [r for r in rows if 'val_loss' in r]


def test_prepare_tinystories(data_dir, capsys):
    import sentencepiece as spm
    meta = json.load(open(data_dir / 'meta.json'))
    assert meta['vocab_size'] == 512 and meta['bos_id'] == 1 and meta['dtype'] == 'uint16'
    sp = spm.SentencePieceProcessor(model_file=str(data_dir / meta['tokenizer_model']))
    val = np.memmap(data_dir / 'val.bin', dtype=np.uint16, mode='r')
    assert len(val) == meta['val_tokens'] > 100_000 and val[0] == 1 and val.max() < 512
    text = (SHARED / 'tinystories' / 'valid_sample.txt').read_text()
    assert sp.decode(val[1:60].tolist()) in text  # the first paragraph comes back
    prepare_tinystories.main(['--input_file', str(SHARED / 'tinystories' / 'train_sample.txt'),
                              '--val_file', str(SHARED / 'tinystories' / 'valid_sample.txt'),
                              '--vocab_size', '512', '--out_dir', str(data_dir)])
    assert capsys.readouterr().out.count('skip') >= 3  # idempotent: nothing is redone


SETTINGS = {  # name: (taper, aux_loss)
    'baseline': ('none', 'none'),
    'internal_aux': ('internal', 'fixed'),
    'internal': ('internal', 'none'),
    'all_aux': ('all', 'fixed'),
    'all': ('all', 'none'),
}


@pytest.fixture(scope='module')
def runs(data_dir, tmp_path_factory):
    """A tiny model trained for 40 steps in each setting, from the same seed and data order."""
    root = tmp_path_factory.mktemp('runs')
    for name, (taper, aux) in SETTINGS.items():
        run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root / name}',
            f'--taper={taper}', f'--aux_loss={aux}')
    return root


@pytest.mark.parametrize('name', list(SETTINGS))
def test_training_in_each_setting(runs, name):
    """Loss falls; the gate follows g(k) to 0; c is frozen from taper_start on; tapered models are
    evaluated at g = 0 once the taper has started."""
    taper, aux = SETTINGS[name]
    train, evals = read_log(runs / name)
    drop = 0.5 if (taper, aux) != ('all', 'none') else 0.0  # no anchor: fragile, as the paper says
    assert train[-1]['loss'] < train[0]['loss'] - drop
    assert evals[-1]['val_loss'] < evals[0]['val_loss'] - drop
    if taper == 'none':
        assert all(r['gate'] == 1.0 and r['c'] == [] for r in train)
        return
    assert [r['gate'] for r in train if r['iter'] < 8] == [1.0] * 2
    assert train[-1]['gate'] == 0.0 and evals[-1]['eval_gate'] == 0.0
    assert evals[0]['eval_gate'] == 1.0  # before taper start c is not calibrated yet
    cs = [r['c'] for r in train if r['iter'] >= 8]
    assert all(c == cs[0] for c in cs) and len(cs[0]) == 4 + (taper == 'all')
    assert [r['c'] for r in train if r['iter'] < 8][0] == [0.0] * len(cs[0])
    s_tgt = {r['s_tgt'] for r in train if r['iter'] >= 8}
    assert len(s_tgt) == 1 and (s_tgt.pop() > 0) == (aux == 'fixed')
    model = GPT.from_checkpoint(str(runs / name / 'ckpt.pt'))
    assert model.gate.item() == 0.0 and model.started


def test_training_a_dyt_model(data_dir, tmp_path):
    """train.py trains the DyT comparison (norm='dyt') in the same loop: loss falls, and every alpha
    moves off its init."""
    refused = run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path}', '--norm=dyt', check=False)
    assert refused.returncode != 0 and 'Traceback' not in refused.stderr  # train.py's default taper
    assert "norm='dyt' leaves no norm to taper" in refused.stderr.strip().splitlines()[-1]
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path}', '--norm=dyt', '--taper=none',
        '--aux_loss=none')
    train, evals = read_log(tmp_path)
    assert train[-1]['loss'] < train[0]['loss'] - 0.5 and evals[-1]['val_loss'] < evals[0]['val_loss'] - 0.5
    model = GPT.from_checkpoint(str(tmp_path / 'ckpt.pt'), norm='dyt')
    alphas = [m.alpha.item() for m in model.modules() if hasattr(m, 'alpha')]
    assert len(alphas) == 5 and all(a not in (0.8, 0.2) for a in alphas)


def test_all_taper_without_aux_chases_logits(runs):
    """Prop. 2 in training: without an anchor, All-Taper's logit norm runs far past the anchored runs'."""
    peak = {name: max(r['logit_norm'] for r in read_log(runs / name)[0]) for name in SETTINGS}
    assert peak['all'] > 2 * max(peak['all_aux'], peak['internal_aux'], peak['baseline']), peak


def test_a_run_that_ends_far_above_its_first_evaluation_says_so(data_dir, tmp_path):
    """A run whose loss rises without ever turning non-finite is not stopped, and not silent either:
    when its last val_loss (as log.jsonl records it) lies more than a nat above its first, the run
    ends with a note giving both; a run that learns ends without one."""
    short = ['--max_iters=12', '--warmup_iters=2', '--taper_start=4', '--taper_end=8', '--lr_decay_iters=12',
             '--eval_interval=6', '--eval_iters=2']
    for name, setting in (('all', ['--taper=all', '--aux_loss=none']), ('baseline', ['--taper=none', '--aux_loss=none'])):
        proc = run('train.py', *TINY, *short, *setting, f'--data_dir={data_dir}', f'--out_dir={tmp_path / name}')
        first, last = read_log(tmp_path / name)[1][0], read_log(tmp_path / name)[1][-1]
        risen = last['val_loss'] > first['val_loss'] + 1
        assert risen == (name == 'all'), (first, last)  # a 4-step taper at 3e-3 throws All-Taper's scale off
        assert (f"note: val_loss ended at {last['val_loss']:.4g}, more than a nat above the "
                f"{first['val_loss']:.4g} of iter 0" in proc.stdout) == risen, proc.stdout[-1000:]


def assert_same_run(straight, split):
    """Two out_dirs hold the same run: identical weights, AdamW state and training log; the split
    run's extra evaluation at its stop step aside, the same evaluations. Returns max |delta|."""
    a = torch.load(Path(straight) / 'ckpt.pt', weights_only=True)
    b = torch.load(Path(split) / 'ckpt.pt', weights_only=True)
    assert a['iter_num'] == b['iter_num']
    assert a['model'].keys() == b['model'].keys()
    delta = max((a['model'][k].double() - b['model'][k].double()).abs().max().item() for k in a['model'])
    state_a, state_b = a['optimizer']['state'], b['optimizer']['state']
    assert state_a.keys() == state_b.keys()  # no state invented for a parameter that had none
    for name in state_a:
        assert state_a[name].keys() == state_b[name].keys(), name
        delta = max([delta] + [(state_a[name][k].double() - state_b[name][k].double()).abs().max().item()
                               for k in state_a[name]])
    (train_a, evals_a), (train_b, evals_b) = read_log(straight), read_log(split)
    assert [r['iter'] for r in train_a] == [r['iter'] for r in train_b]  # the log continues, no repeats
    for ra, rb in zip(train_a, train_b):
        assert {k: v for k, v in ra.items() if k != 'tok_per_s'} == {k: v for k, v in rb.items() if k != 'tok_per_s'}
    by_iter = {r['iter']: r['val_loss'] for r in evals_b}
    assert all(by_iter[r['iter']] == r['val_loss'] for r in evals_a)
    assert delta == 0.0, delta
    return delta


# Stop points of the tiny schedule (taper 8 -> 32 over 40 steps): calibrating at g = 1, mid-taper at
# g = 0.5, and at g = 0.
@pytest.mark.parametrize('stop', [4, 20, 36])
def test_resume_from_every_taper_phase_continues_the_same_run_bitwise(runs, data_dir, tmp_path, stop):
    """A run stopped at any phase and resumed is the run that never stopped. Before taper start
    gammatilde has no AdamW state yet; the resumed run must not invent one. Mid-taper, the run's folder
    name holds a space; at g = 0 the run is started from a folder of the user's, not the repository's
    (python <repository>/train.py); each time the command printed to continue it runs in bash as printed,
    where it was started."""
    out = tmp_path / ('my run' if stop == 20 else 'run')
    where = tmp_path if stop == 36 else ROOT
    common = [*TINY, f'--data_dir={data_dir}', '--taper=all', '--aux_loss=fixed', f'--out_dir={out}']
    stopped = run('train.py', *common, f'--stop_iter={stop}', cwd=where)
    printed = re.search(r"continue the run with `(python \S*train.py --init_from=resume --out_dir=[^`]+)`", stopped.stdout)
    assert printed, stopped.stdout[-2000:]
    phase = torch.load(out / 'ckpt.pt', weights_only=True)
    assert phase['iter_num'] == stop
    assert any('taper_weight' in k for k in phase['optimizer']['state']) == (stop > 8)
    if stop in (20, 36):
        resumed = subprocess.run(['bash', '-c', printed.group(1).replace('python', sys.executable, 1)], cwd=where,
                                 capture_output=True, text=True)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
    else:
        run('train.py', *common, '--init_from=resume')
    assert_same_run(runs / 'all_aux', out)


def test_ddp_and_fsdp_match_one_process(data_dir, tmp_path):
    """torchrun with 2 gloo ranks, each drawing its own half of the batch, follows the loss curve of
    one process with the same global batch (2 micro-batches of accumulation), replicated (DDP) or
    sharded (FSDP2); the FSDP run's checkpoint is gathered whole and loads like any other."""
    common = [*TINY, f'--data_dir={data_dir}', '--taper=internal', '--aux_loss=fixed',
              '--gradient_accumulation_steps=2', '--max_iters=24', '--taper_end=20', '--lr_decay_iters=24']
    run('train.py', *common, f'--out_dir={tmp_path / "one"}')
    run('train.py', *common, f'--out_dir={tmp_path / "ddp"}', torchrun=2)
    run('train.py', *common, f'--out_dir={tmp_path / "fsdp"}', '--fsdp', torchrun=2)
    one = read_log(tmp_path / 'one')
    for name in ('ddp', 'fsdp'):
        two = read_log(tmp_path / name)
        for rows_one, rows_two in zip(one, two):
            assert len(rows_one) == len(rows_two) > 2
            for r1, r2 in zip(rows_one, rows_two):
                assert r1['loss'] == pytest.approx(r2['loss'], rel=1e-5, abs=1e-5), name
        assert one[0][-1]['c'] == pytest.approx(two[0][-1]['c'], rel=1e-5)
    a = GPT.from_checkpoint(str(tmp_path / 'one' / 'ckpt.pt')).state_dict()
    b = GPT.from_checkpoint(str(tmp_path / 'fsdp' / 'ckpt.pt')).state_dict()
    assert all(torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-5) for k in a if a[k].is_floating_point())
    # Stopped and resumed under FSDP, whose optimizer state is loaded by another path than one process's
    # (DDP's is one process's), with each rank's place in the data: before taper start, mid-taper
    # (g = 0.5) and at g = 0, in one run stopped three times.
    for name, stops in (('fsdp', (4, 14, 22)),):
        split = tmp_path / f'{name}-split'
        extra = ['--fsdp'] if name == 'fsdp' else []
        stopped = run('train.py', *common, *extra, f'--out_dir={split}', f'--stop_iter={stops[0]}', torchrun=2)
        # the command it prints to continue starts it as it was started (one process refuses fsdp=True)
        assert f"continue the run with `torchrun --standalone --nproc_per_node=2 train.py --init_from=resume " \
               f"--out_dir={split}`" in stopped.stdout, stopped.stdout[-2000:]
        for stop in stops[1:]:
            run('train.py', *common, *extra, f'--out_dir={split}', '--init_from=resume', f'--stop_iter={stop}',
                torchrun=2)
        run('train.py', *common, *extra, f'--out_dir={split}', '--init_from=resume', torchrun=2)
        assert_same_run(tmp_path / name, split)


def test_torchrun_splits_the_global_batch_of_any_config(data_dir, tmp_path):
    """A config written for one process (accumulation 1) runs under torchrun unchanged: the ranks
    split its batch, so each step sees the same sequences as one process does."""
    common = [*TINY, f'--data_dir={data_dir}', '--taper=none', '--aux_loss=none', '--max_iters=8',
              '--warmup_iters=2', '--eval_interval=8']
    run('train.py', *common, f'--out_dir={tmp_path / "one"}')
    proc = run('train.py', *common, f'--out_dir={tmp_path / "two"}', torchrun=2)
    assert '2 rank(s) x 1 micro-batches x 4 x 64 = 512 tokens per step' in proc.stdout
    one, two = read_log(tmp_path / 'one')[0], read_log(tmp_path / 'two')[0]
    assert [r['loss'] for r in one] == pytest.approx([r['loss'] for r in two], rel=1e-5)
    odd = run('train.py', *common, f'--out_dir={tmp_path / "odd"}', '--batch_size=3', torchrun=2, check=False)
    assert odd.returncode != 0 and odd.stderr.count('cannot split the global batch') == 1
    assert 'train.py stopped' not in odd.stderr  # the other rank, ended by torchrun as it waits, says nothing


def test_a_diverged_run_never_overwrites_its_last_good_checkpoint(data_dir, tmp_path):
    """A resumed run that diverges (NaN, or a residual stream that overflows while the loss stays
    finite) stops, says truthfully which checkpoint is kept, and leaves it and its log untouched."""
    out = tmp_path / 'out'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--taper=none', '--aux_loss=none',
        '--max_iters=20')
    before = {f: (out / f).read_bytes() for f in ('ckpt.pt', 'log.jsonl')}
    for lr in ('1e30', '1e4'):  # NaN at once; a flat loss over an exploding pre-logit scale
        proc = run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--taper=none',
                   '--aux_loss=none', '--init_from=resume', f'--learning_rate={lr}', '--max_iters=200',
                   '--lr_decay_iters=200', '--eval_interval=10', '--log_interval=50', check=False)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr
        assert 'the model diverged' in last and f'{out}/ckpt.pt (iter 20), is kept' in last, last
        assert (out / 'ckpt.pt').read_bytes() == before['ckpt.pt']
        assert (out / 'log.jsonl').read_bytes() == before['log.jsonl']  # rolled back to its checkpoint
    kept = torch.load(out / 'ckpt.pt', weights_only=True)
    assert kept['iter_num'] == 20 and all(torch.isfinite(v).all() for v in kept['model'].values()
                                          if v.is_floating_point())


def test_checkpoint_loader_refuses_in_one_sentence(data_dir, tmp_path):
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "out"}', '--max_iters=20',
        '--taper_end=20', '--lr_decay_iters=20')
    with pytest.raises(ValueError, match="arch='llama', not arch='gpt2'"):
        GPT.from_checkpoint(str(tmp_path / 'out' / 'ckpt.pt'), arch='gpt2')
    (tmp_path / 'junk.pt').write_bytes(b'not a checkpoint')
    with pytest.raises(ValueError, match='could not be read'):
        GPT.from_checkpoint(str(tmp_path / 'junk.pt'))


def test_a_log_interval_past_the_run_is_said_by_train_and_plot(data_dir, tmp_path):
    """--log_interval at or past max_iters is a valid run whose log holds one training row, step 0's: train.py
    says so as it starts, and plot.py, which draws that run's curve as one point, says so too; a run whose
    interval leaves two rows gets neither note."""
    short = ['--max_iters=8', '--warmup_iters=2', '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8',
             '--eval_interval=4']
    out = run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "one"}', *short,
              '--log_interval=8').stdout
    assert 'note: log_interval=8 is not below max_iters=8, so the log holds the training loss of step 0 alone' in out
    rows = [json.loads(line) for line in open(tmp_path / 'one' / 'log.jsonl')]
    assert [row['iter'] for row in rows if 'lr' in row] == [0]  # what the note says, read from the log itself
    said = run('plot.py', str(tmp_path / 'one'), f'--out_dir={tmp_path / "plots"}').stdout
    assert "'s log holds one training row (iter 0), so its training curve is a single point" in said
    out = run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "two"}', *short,
              '--log_interval=7').stdout
    assert 'log_interval=7' not in out
    assert 'single point' not in run('plot.py', str(tmp_path / 'two'), f'--out_dir={tmp_path / "plots2"}').stdout


def test_a_resume_with_another_batch_size_says_the_evaluations_change(data_dir, tmp_path):
    """A resume that keeps the step's batch with --batch_size=4 --gradient_accumulation_steps=2 (a run of
    batch_size 8) is valid, but each evaluation then takes eval_iters batches of 4: the note says how many
    sequences val_loss averages now and then, and the --eval_iters that keeps the run's number."""
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=12', '--stop_iter=6',
        '--taper_end=10', '--lr_decay_iters=12', '--eval_interval=6', '--eval_iters=2')
    kept = tmp_path / 'kept'  # the run at iter 6, for the advice followed
    shutil.copytree(out, kept)
    said = run('train.py', '--init_from=resume', f'--out_dir={out}', '--device=cpu', '--batch_size=4',
               '--gradient_accumulation_steps=2').stdout
    assert ("note: each evaluation averages eval_iters=2 batches of batch_size=4, so val_loss from here on is taken "
            "over 8 sequences, not the run's 16: --eval_iters=4 keeps that") in said
    again = run('train.py', '--init_from=resume', f'--out_dir={kept}', '--device=cpu', '--batch_size=4',
                '--gradient_accumulation_steps=2', '--eval_iters=4').stdout
    assert 'each evaluation averages' not in again and 'eval_iters 2 -> 4' in again, again


def test_settings_the_run_never_reads_are_said(data_dir, tmp_path):
    """A flag whose setting this run ignores (the W&B project without --wandb_log, a FakeLN setting without
    --fakeln, --compile under TORCHDYNAMO_DISABLE=1, --dtype=bfloat16 on the CPU) is named in a note,
    not dropped without a word; a run that uses them gets none."""
    args = [*TINY, f'--data_dir={data_dir}', '--eval_only']
    out = run('train.py', *args, f'--out_dir={tmp_path / "a"}', '--wandb_project=mine', '--fakeln_sigma=pretrained').stdout
    assert "note: fakeln_sigma='pretrained', wandb_project='mine' has no effect in this run" in out
    assert 'wandb_log=False' in out and 'has no effect' not in run('train.py', *args, f'--out_dir={tmp_path / "b"}').stdout
    base = run('train.py', *args, f'--out_dir={tmp_path / "d"}', '--taper=none', '--aux_loss=none', '--ema_rate=0.5',
               '--taper_start=1', '--taper_end=40').stdout  # a Baseline calibrates nothing: its EMAs never run
    assert "note: taper_start=1, ema_rate=0.5, taper_end=40 has no effect in this run" in base
    short = run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "c"}', '--max_iters=12',
                '--taper_end=10', '--eval_interval=12').stdout  # lr_decay_iters stays at 40: the decay is cut short
    assert 'note: the cosine decay runs to lr_decay_iters=40, past max_iters=12' in short
    off = run('train.py', *args, f'--out_dir={tmp_path / "e"}', '--compile=True', env={'TORCHDYNAMO_DISABLE': '1'}).stdout
    assert 'note: --compile=True has no effect: TORCHDYNAMO_DISABLE=1 in the environment' in off
    cpu = run('train.py', *args, f'--out_dir={tmp_path / "f"}', '--dtype=bfloat16').stdout  # TINY: --device=cpu
    assert 'note: --dtype=bfloat16 autocasts on CUDA only, so on the CPU the run trains in float32' in cpu
    assert 'autocasts on CUDA only' not in run('train.py', *args, f'--out_dir={tmp_path / "g"}').stdout  # the default


def test_resume_drops_a_torn_last_log_line_with_a_warning(data_dir, tmp_path):
    """A kill while a log row is being written leaves half a line: the resume warns and drops it."""
    common = [*TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path}', '--max_iters=20', '--taper_end=20',
              '--lr_decay_iters=20']
    run('train.py', *common, '--stop_iter=12')
    with open(tmp_path / 'log.jsonl', 'a') as f:
        f.write('{"iter": 13, "lr": 0.00')
    (tmp_path / 'ckpt.pt.tmp').write_bytes(b'half a save')  # a save killed mid-write
    proc = run('train.py', *common, '--init_from=resume')
    assert 'dropped the torn last line' in proc.stdout
    assert not (tmp_path / 'ckpt.pt.tmp').exists()
    train_rows, _ = read_log(tmp_path)
    assert [r['iter'] for r in train_rows] == list(range(0, 20, 4))


def test_config_files_parse_and_read_like_the_paper():
    """Every TinyStories config of the paper exists and sets the paper's row (App. C)."""
    steps = {64: 500_000, 128: 500_000, 256: 750_000, 512: 1_000_000}
    for d, n in steps.items():
        for name, taper in (('baseline', 'none'), ('taper_internal', 'internal'), ('taper_all', 'all')):
            cfg = resolve([str(ROOT / 'config' / f'{name}_{d}.py')])
            assert (cfg['n_embd'], cfg['max_iters'], cfg['taper']) == (d, n, taper)
            assert cfg['warmup_iters'] == n // 20 and cfg['learning_rate'] == 3e-4
            assert cfg['batch_size'] * cfg['gradient_accumulation_steps'] == 16
            assert cfg['ema_rate'] == 0.01 and cfg['aux_loss'] == ('none' if taper == 'none' else 'fixed')
            if taper != 'none':
                assert (cfg['taper_start'], cfg['taper_end']) == (n // 20, n)


def test_a_gpt2_layout_export_of_a_small_vocabulary_carries_its_tokenizers_ids_without_warnings(data_dir, tmp_path):
    """An All-TaperLN GPT-2-layout model trained from scratch on TinyStories (512 pieces) exports with its
    SentencePiece tokenizer's BOS and EOS ids (1 and 2, from the data's meta.json) in the HF config, and
    prints nothing on stderr: GPT2Config's own 50256 never enters a 512-token model (transformers warns).
    Without its tokenizer files, the export is not taken for GPT-2's own tokens."""
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--arch=gpt2', '--norm=layernorm',
        '--taper=all', '--max_iters=8', '--warmup_iters=2', '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8',
        '--eval_interval=4')
    proc = run('fold.py', f'--out_dir={out}', f"--export_hf={tmp_path / 'hf'}", fresh=True)
    assert proc.stderr.strip() == '', proc.stderr
    meta = json.load(open(data_dir / 'meta.json'))
    config = json.load(open(tmp_path / 'hf' / 'config.json'))
    assert (config['bos_token_id'], config['eos_token_id']) == (meta['bos_id'], meta['eos_id']) == (1, 2)
    for name in os.listdir(tmp_path / 'hf'):  # its tokenizer lost: GPT-2's own BPE cannot stand in for 512 pieces
        if name.startswith('tokenizer') or name == 'special_tokens_map.json':
            os.remove(tmp_path / 'hf' / name)
    proc = run('sample.py', f"--init_from={tmp_path / 'hf'}", '--device=cpu', '--max_new_tokens=2', check=False)
    assert proc.returncode == 1 and proc.stderr.count('\n') == 1 and \
        "is an export of a run trained on its own 512-token vocabulary, and holds none of its tokenizer files" \
        in proc.stderr, proc.stderr


def test_plot_makes_the_papers_figures(runs, tmp_path):
    import plot
    written = plot.main([str(runs / name) for name in SETTINGS] + ['--out_dir', str(tmp_path)])
    assert {Path(p).name for p in written} == {'loss.png', 'logit_norm.png', 'grad_norms.png'}
    assert all(os.path.getsize(p) > 10_000 for p in written)


def test_plot_keeps_every_val_loss_after_the_first_tenth_inside_the_loss_axes(runs, tmp_path, monkeypatch):
    """Fig. 1a zooms past the first tenth of training; a val loss past it lies inside the axes even
    where it is far above the training curve (a short run at a high learning rate), not cut off."""
    import plot
    high = tmp_path / 'high'
    shutil.copytree(runs / 'baseline', high)
    rows = [json.loads(line) for line in open(high / 'log.jsonl')]
    top = max(r['loss'] for r in rows if 'lr' in r)
    rows = [r | {'val_loss': top + 1.0 + r['iter'] / 1000} if 'val_loss' in r else r for r in rows]
    (high / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    limits = {}
    monkeypatch.setattr(plot, 'save', lambda figures, out_dir: limits.update(
        {name: fig.axes[0].get_ylim() for name, fig in figures.items()}))
    plot.main([str(high), '--out_dir', str(tmp_path / 'figs')])
    last = max(r['iter'] for r in rows)
    shown = [r['val_loss'] for r in rows if 'val_loss' in r and r['iter'] >= 0.1 * last]
    lo, hi = limits['loss.png']
    assert shown and all(lo <= v <= hi for v in shown), (lo, hi, shown)


def test_plot_names_fakeln_and_dyt_runs_by_their_method(runs, tmp_path, monkeypatch):
    """A FakeLN fine-tune (taper 'none', every LayerNorm removed) is named FakeLN and drawn dashed, as
    a run without a final norm; a DyT run is named DyT and drawn solid; neither is called Baseline. The
    runs here are the tiny Baseline's logs under those configs (config.json alone: no checkpoint)."""
    import plot
    for k, (name, change) in enumerate((('fakeln', dict(fakeln=True, aux_loss='baroni', arch='gpt2', norm='layernorm')),
                                        ('dyt', dict(norm='dyt')))):
        os.makedirs(tmp_path / name)
        rows = [json.loads(line) for line in open(runs / 'baseline' / 'log.jsonl')]  # another run's curve
        (tmp_path / name / 'log.jsonl').write_text(''.join(json.dumps(r | {'loss': r['loss'] + 0.01 * (k + 1)}) + '\n'
                                                           for r in rows))
        config = json.load(open(runs / 'baseline' / 'config.json')) | change
        json.dump(config, open(tmp_path / name / 'config.json', 'w'))
    lines = {}
    monkeypatch.setattr(plot, 'save', lambda figures, out_dir: lines.update(
        {name: {l.get_label(): l.get_linestyle() for l in fig.axes[0].get_lines() if l.get_label()[0] not in '_v'}
         for name, fig in figures.items()}))
    plot.main([str(runs / 'baseline'), str(tmp_path / 'fakeln'), str(tmp_path / 'dyt'), str(runs / 'all_aux'),
               '--out_dir', str(tmp_path / 'figs')])
    assert lines['loss.png'] == {'Baseline': '-', 'FakeLN (+Baroni aux)': '--', 'DyT': '-', 'All-Taper (+aux)': '--'}


def test_plot_draws_seeds_that_ran_differently_or_stopped_early_as_one_setting_and_says_so(runs, tmp_path, monkeypatch,
                                                                                             capsys):
    """Seeds of one setting are one curve even when they ran differently but trained the same (activation
    checkpointing, the log interval: how a run ran, not what it trained); a seed stopped early cuts the
    setting's median to the steps all seeds logged, and plot.py says so."""
    import plot
    rows = [json.loads(line) for line in open(runs / 'internal_aux' / 'log.jsonl')]
    config = json.load(open(runs / 'internal_aux' / 'config.json'))
    for seed, change, kept in ((2, dict(grad_checkpoint=True, log_interval=2), rows),
                               (3, {}, [r for r in rows if r['iter'] <= 20])):  # stopped at iter 20
        os.makedirs(tmp_path / f's{seed}')
        json.dump(config | change | {'seed': seed}, open(tmp_path / f's{seed}' / 'config.json', 'w'))
        (tmp_path / f's{seed}' / 'log.jsonl').write_text(''.join(json.dumps(r | {'loss': r['loss'] + 0.01 * seed}) + '\n'
                                                                  for r in kept))
    legends = {}
    monkeypatch.setattr(plot, 'save', lambda figures, out_dir: legends.update(
        {name: [l.get_label() for l in fig.axes[0].get_lines() if l.get_label()[0] not in '_v']
         for name, fig in figures.items()}))
    plot.main([str(runs / 'internal_aux'), str(tmp_path / 's2'), str(tmp_path / 's3'), '--out_dir', str(tmp_path / 'f')])
    assert legends['loss.png'] == ['Internal-Taper (+aux) (3 seeds)']
    last = [r for r in rows if 'lr' in r][-1]['iter']  # the last training row (evaluation rows carry no lr)
    assert f"note: the 3 seeds of 'Internal-Taper (+aux)' end at different steps ({last}, {last}, 20): its median and " \
           f"band are drawn over the steps they all logged, to iter 20" in capsys.readouterr().out


def test_plot_keeps_the_loss_axes_on_the_curves_when_a_val_loss_blows_up(runs, tmp_path, monkeypatch, capsys):
    """A norm-free model's val loss can blow up on a rare window (1e7 nats in the committed ablation runs):
    the loss axes stay on the training curves, the point is drawn on the top edge, and plot.py says so."""
    import plot
    blown = tmp_path / 'blown'
    shutil.copytree(runs / 'all_aux', blown)
    rows = [json.loads(line) for line in open(blown / 'log.jsonl')]
    at = [r['iter'] for r in rows if 'val_loss' in r][-1]
    rows = [r | {'val_loss': 1e7} if 'val_loss' in r and r['iter'] == at else r for r in rows]
    (blown / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    limits = {}
    monkeypatch.setattr(plot, 'save', lambda figures, out_dir: limits.update(
        {name: fig.axes[0].get_ylim() for name, fig in figures.items()}))
    plot.main([str(blown), '--out_dir', str(tmp_path / 'figs')])
    top = max(r['loss'] for r in rows if 'lr' in r)
    assert limits['loss.png'][1] < top + 5
    said = capsys.readouterr().out  # (the tiny run's own g = 0 score mid-taper, 723 nats, is another such point)
    assert re.search(rf"note: 'All-Taper \(\+aux\)' has \d val loss\(es\) far above its training curve \(up to 1e\+07, "
                     rf"at iter [\d, ]*\b{at}\): drawn as triangles on the top edge of loss.png", said), said


def test_plot_draws_an_infinite_loss_as_a_gap_without_warnings(runs, tmp_path):
    """train.py logs a non-finite loss as it is (JSON's Infinity); plot.py draws the seeds' band
    around it, and prints nothing on stderr: the figure, not numpy's warnings, shows it."""
    seed = tmp_path / 'seed2'
    shutil.copytree(runs / 'baseline', seed)
    rows = [json.loads(line) for line in open(seed / 'log.jsonl')]
    first = next(r for r in rows if 'lr' in r and r['iter'] > 0)
    first['loss'] = float('inf')
    (seed / 'log.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    proc = run('plot.py', str(runs / 'baseline'), str(seed), f'--out_dir={tmp_path / "figs"}')
    assert proc.stderr.strip() == '' and (tmp_path / 'figs' / 'loss.png').is_file()


def test_plot_says_when_two_seeds_of_a_setting_share_their_seed(runs, tmp_path):
    """Runs of one setting are drawn as its seeds (the median and band over them); two with the same
    seed are one seed counted twice, and plot.py says so."""
    twin = tmp_path / 'twin'  # the same seed, on other data: other losses
    shutil.copytree(runs / 'baseline', twin)
    rows = [json.loads(line) for line in open(twin / 'log.jsonl')]
    (twin / 'log.jsonl').write_text(''.join(json.dumps(r | {'loss': r['loss'] + 0.01}) + '\n' for r in rows))
    seed = json.load(open(twin / 'config.json'))['seed']
    proc = run('plot.py', str(runs / 'baseline'), str(twin), f'--out_dir={tmp_path / "figs"}')
    assert f"have the same seed ({seed})" in proc.stdout
    proc = run('plot.py', str(runs / 'baseline'), str(twin), f'--out_dir={tmp_path / "figs2"}', '--labels=a,b')
    assert 'note:' not in proc.stdout  # two labels: two settings, no band over them


def test_plot_says_when_runs_on_one_axis_count_different_tokens(runs, tmp_path):
    """A loss in nats per token compares runs of one tokenizer only: plot.py notes a run whose data is
    another tokenizer's (the tokenizer its data folder's meta.json names, or without one its vocabulary),
    and says nothing of runs of one tokenizer, a model padded to a larger vocabulary among them."""
    other = tmp_path / 'other'  # the same run, as if trained on GPT-2 tokens
    shutil.copytree(runs / 'baseline', other, ignore=shutil.ignore_patterns('*.pt'))  # its log, as assets/runs keep
    config = json.load(open(other / 'config.json'))
    (other / 'data').mkdir()
    (other / 'data' / 'meta.json').write_text(json.dumps({'tokenizer_name': 'gpt2', 'vocab_size': config['vocab_size']}))
    json.dump(config | {'data_dir': str(other / 'data')}, open(other / 'config.json', 'w'))
    rows = [json.loads(line) for line in open(other / 'log.jsonl')]
    (other / 'log.jsonl').write_text(''.join(json.dumps(r | {'loss': r['loss'] + 0.01}) + '\n' for r in rows))
    both = [str(runs / 'baseline'), str(other), '--labels=a,b']
    said = run('plot.py', *both, f'--out_dir={tmp_path / "figs"}').stdout
    assert said.count('note:') == 1 and 'tokenizer gpt2) measure their loss in the tokens of different tokenizers' in said
    padded = config | {'vocab_size': 2 * config['vocab_size']}  # the same data, a model with unused rows
    json.dump(padded, open(other / 'config.json', 'w'))
    said = run('plot.py', *both, f'--out_dir={tmp_path / "figs2"}').stdout
    assert 'note:' not in said, said
    json.dump(padded | {'data_dir': str(tmp_path / 'gone')}, open(other / 'config.json', 'w'))  # its data unknown
    said = run('plot.py', *both, f'--out_dir={tmp_path / "figs2"}').stdout
    assert f"(vocab_size {2 * config['vocab_size']}) measure their loss" in said, said
    said = run('plot.py', str(runs / 'baseline'), str(runs / 'internal_aux'), f'--out_dir={tmp_path / "figs3"}').stdout
    assert 'note:' not in said



def hashes(folder):
    """The sha256 of every file in folder, hidden ones too, by name."""
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in os.listdir(folder)}


def test_plot_that_cannot_write_its_last_figure_keeps_the_earlier_ones(runs, tmp_path):
    """plot.py replaces its three figures together or not at all: a write that fails part-way (here the
    shell's file-size limit, ulimit -f, between the first two figures and the larger grad_norms.png, drawn
    last; a full disk alike) stops with one sentence that names the figure, and every earlier figure is as
    it was, byte for byte, with no file of the plot left beside them."""
    import resource
    import plot
    figs, probe = tmp_path / 'figs', tmp_path / 'probe'
    plot.main([str(runs / 'baseline'), '--out_dir', str(figs)])  # the earlier figures
    both = [str(runs / 'baseline'), str(runs / 'all_aux')]
    plot.main([*both, '--out_dir', str(probe)])  # the figures that will fail, for their sizes
    size = {name: os.path.getsize(probe / name) for name in os.listdir(probe)}
    first = max(size['loss.png'], size['logit_norm.png'])
    limit = (first + size['grad_norms.png']) // 2
    assert first < limit < size['grad_norms.png'], size
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    before = hashes(figs)
    proc = subprocess.run([sys.executable, str(ROOT / 'plot.py'), *both, f'--out_dir={figs}'], capture_output=True,
                          text=True, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard)))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"cannot write {figs / 'grad_norms.png'} (the file-size limit of this shell") and \
        lines[0].endswith(f"the earlier figures in {figs} are kept as they were"), lines[0]
    assert hashes(figs) == before


def test_plot_refuses_an_earlier_figure_it_cannot_replace_before_it_replaces_any(runs, tmp_path):
    """An earlier figure that cannot be replaced (immutable, chattr +i, which binds root too; for a user
    other than root, read-only) stops plot.py before it writes anything, with one sentence that names it:
    the figures drawn before it are not replaced without it, and every file is as it was."""
    import plot
    figs = tmp_path / 'figs'
    plot.main([str(runs / 'baseline'), '--out_dir', str(figs)])
    before = hashes(figs)
    last = figs / 'grad_norms.png'  # written last: the others would be replaced by then
    if subprocess.run(['chattr', '+i', str(last)], capture_output=True).returncode == 0:
        undo = lambda: subprocess.run(['chattr', '-i', str(last)], check=True)
    elif os.geteuid() != 0:
        last.chmod(0o444)
        undo = lambda: last.chmod(0o644)
    else:
        pytest.skip("needs chattr +i (root and a file system that keeps the attribute): root may write a "
                    "read-only file")
    try:
        proc = run('plot.py', str(runs / 'baseline'), str(runs / 'all_aux'), f'--out_dir={figs}', check=False)
    finally:
        undo()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"{last} does not open for writing (") and "nothing was written" in lines[0], lines[0]
    assert hashes(figs) == before


def test_plot_stopped_part_way_leaves_one_whole_set_of_figures(runs, tmp_path, monkeypatch):
    """Ctrl-C while plot.py writes its figures aside leaves the earlier figures as they were, with no file
    of the plot left; one that comes as it renames them into place waits for the last rename: the folder
    holds one plot's set, never a mix of two plots' figures."""
    import signal
    import matplotlib.figure
    import plot
    figs = tmp_path / 'figs'
    plot.main([str(runs / 'baseline'), '--out_dir', str(figs)])
    before = hashes(figs)
    savefig, replace = matplotlib.figure.Figure.savefig, os.replace

    def interrupted(fig, path, **kwargs):  # Ctrl-C as the last figure is written, its file begun
        savefig(fig, path, **kwargs)
        if 'grad_norms' in str(path):
            raise KeyboardInterrupt

    def interrupting(src, dst):  # Ctrl-C right after the first rename
        replace(src, dst)
        renamed.append(dst)
        if len(renamed) == 1:
            os.kill(os.getpid(), signal.SIGINT)

    both = [str(runs / 'baseline'), str(runs / 'all_aux'), '--out_dir', str(figs)]
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C's own, whatever pytest's is
    try:
        with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
            patch.setattr(matplotlib.figure.Figure, 'savefig', interrupted)
            plot.main(both)
        assert hashes(figs) == before
        renamed = []
        with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
            patch.setattr(os, 'replace', interrupting)
            plot.main(both)
    finally:
        signal.signal(signal.SIGINT, handler)
    after = hashes(figs)
    assert len(renamed) == 3 and after.keys() == before.keys() and all(after[n] != before[n] for n in before), after


def test_one_plot_at_a_time_writes_a_folder_of_figures_and_a_running_run_is_plotted(runs, tmp_path):
    """Two plot.py into one folder of figures at once would rename their figures over each other's: one
    that finds the folder held (a lock on the folder itself, as a prepare script holds its data folder)
    stops with one sentence and writes nothing. A run's own folder, which its train.py holds while it
    trains, is plotted into all the same (plotting a run as it trains), and plot.py takes no lock there
    that a resume would meet; a running plot.py's hidden files are never taken for a killed one's."""
    import fcntl
    import plot
    figs, run_dir = tmp_path / 'figs', tmp_path / 'run'
    plot.main([str(runs / 'baseline'), '--out_dir', str(figs)])
    shutil.copytree(runs / 'baseline', run_dir, ignore=shutil.ignore_patterns('*.pt'))
    before = hashes(figs)
    fd = os.open(figs, os.O_RDONLY)  # the other plot.py, holding the folder
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        proc = run('plot.py', str(run_dir), str(runs / 'all_aux'), f'--out_dir={figs}', check=False)
    finally:
        os.close(fd)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0] == f"another plot.py is writing into {figs} right now: wait for it to end, then run this again"
    assert hashes(figs) == before
    fd = os.open(run_dir, os.O_RDONLY)  # its train.py, training
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    live = run_dir / f'.loss.png.{os.getpid()}.plot-tmp'  # a running plot.py's (this process's id) file
    live.write_bytes(b'drawing')
    try:
        proc = run('plot.py', str(run_dir), str(runs / 'all_aux'), f'--out_dir={run_dir}', check=False)
    finally:
        os.close(fd)
    assert proc.returncode == 0 and (run_dir / 'loss.png').is_file(), proc.stderr
    assert live.read_bytes() == b'drawing'


def test_plot_under_a_home_that_cannot_hold_matplotlibs_cache_says_nothing_of_it(runs, tmp_path):
    """A home matplotlib cannot write its config and font cache into (HOME a file here; a read-only home
    alike) is no mistake of the user's: plot.py draws, with nothing on stderr (matplotlib itself would warn
    in two lines and use a temporary folder), and leaves no temporary folder of its own behind."""
    home = tmp_path / 'home'
    home.write_text('not a folder')
    temp = tmp_path / 'tmp'
    temp.mkdir()
    proc = run('plot.py', str(runs / 'baseline'), f'--out_dir={tmp_path / "figs"}',
               env={'HOME': str(home), 'XDG_CONFIG_HOME': '', 'XDG_CACHE_HOME': '', 'MPLCONFIGDIR': '',
                    'TMPDIR': str(temp)})
    assert proc.stderr == '' and (tmp_path / 'figs' / 'loss.png').is_file()
    assert list(temp.iterdir()) == []


# --- fold.py, sample.py, bench.py ------------------------------------------------------------------

@pytest.mark.parametrize('name', ['internal_aux', 'all_aux'])
def test_fold_script_on_a_trained_run(runs, name):
    """fold.py writes a folded checkpoint beside the trained one, prints |delta logits| < 1e-5, and
    the folded checkpoint loads through the same loader."""
    proc = run('fold.py', f'--out_dir={runs / name}')
    diff = float(re.search(r'\| = (\S+) on ', proc.stdout).group(1))
    scale = float(re.search(r'max \|logits\| (\S+), float32', proc.stdout).group(1))
    assert diff < 1e-5 * max(1.0, scale), proc.stdout  # float32 rounding, relative to the logits
    folded = GPT.from_checkpoint(str(runs / name / 'ckpt_folded.pt'))
    assert folded.config.folded and folded.tapered_norms() == []


def test_fold_script_refuses_a_baseline(runs):
    proc = run('fold.py', f'--out_dir={runs / "baseline"}', check=False)
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr
    assert 'no tapered norm' in proc.stderr.strip().splitlines()[-1]


def test_sample_script_decodes_with_the_runs_tokenizer(runs):
    """sample.py prints text from a checkpoint and from its folded version; greedy decoding gives the
    same text from both (the folded model is the g = 0 model). --dtype=bfloat16 on the CPU says it
    samples in float32, and does. A temperature whose logits overflow (1e-40) is greedy decoding, its limit."""
    run('fold.py', f'--out_dir={runs / "internal_aux"}')
    common = [f'--out_dir={runs / "internal_aux"}', '--device=cpu', '--num_samples=2',
              '--max_new_tokens=20', '--temperature=0', '--start=Once upon a time']
    plain = run('sample.py', *common).stdout
    folded = run('sample.py', *common, '--ckpt=ckpt_folded.pt').stdout
    texts = [t.strip() for t in plain.split('---------------') if t.strip()]
    assert len(texts) == 2 and all(t.split('\n')[-1].startswith('Once upon a time') for t in texts)
    assert len(texts[0]) > len('Once upon a time') + 10
    assert folded.replace('sampling the tapered model at g = 0\n', '') == \
        plain.replace('sampling the tapered model at g = 0\n', '')
    note = 'note: --dtype=bfloat16 autocasts on CUDA only, so on cpu the samples are drawn in float32\n'
    bf16 = run('sample.py', *common, '--dtype=bfloat16').stdout  # said, and drawn as said: in float32
    assert note in bf16 and bf16.replace(note, '') == plain and 'autocasts' not in plain
    # a temperature so small that logits / temperature overflows samples its limit, greedy decoding
    tiny = run('sample.py', *[a for a in common if not a.startswith(('--temperature', '--num_samples'))],
               '--temperature=1e-40', '--num_samples=1').stdout
    first = plain.split('---------------')[0].replace(plain.split('\n')[0] + '\n', '', 1) \
        if plain.startswith('note:') else plain.split('---------------')[0]  # greedy's note on identical samples
    assert tiny == first + '---------------\n', (tiny, plain)
    sampled = run('sample.py', f'--out_dir={runs / "internal_aux"}', '--device=cpu', '--num_samples=1',
                  '--max_new_tokens=10', '--top_k=5', '--start=FILE:' + str(SHARED / 'tinystories' / 'valid_sample.txt'),
)
    assert 'exceed the model\'s context of 64: each new token is predicted from the last 64' in sampled.stdout


def test_a_prompt_files_byte_order_mark_is_not_part_of_the_prompt(runs, tmp_path):
    """A prompt file an editor saved with a UTF-8 byte-order mark prompts the model as the same text
    without it: greedy samples from both files are the same, and the mark is not printed."""
    for name, data in (('plain.txt', b'Once upon a time'), ('bom.txt', b'\xef\xbb\xbfOnce upon a time')):
        (tmp_path / name).write_bytes(data)
    common = [f'--out_dir={runs / "baseline"}', '--device=cpu', '--num_samples=1', '--max_new_tokens=8',
              '--temperature=0']
    plain, bom = (run('sample.py', *common, f'--start=FILE:{tmp_path / name}').stdout for name in ('plain.txt', 'bom.txt'))
    assert bom == plain and '\ufeff' not in bom and 'Once upon a time' in bom


def test_bench_script_runs_and_its_json_parses():
    proc = run('bench.py', '--device=cpu', '--n_layer=2', '--n_embd=64', '--n_head=4', '--vocab_size=100',
               '--batch_size=2', '--prompt_len=16', '--max_new_tokens=8', '--repeats=1')
    rows = json.loads(proc.stdout.strip().splitlines()[-1])['rows']
    assert {r['variant'] for r in rows} == {'baseline', 'dyt', 'unfused', 'fused'}
    assert all(r['mode'] == 'eager' and r['batch_size'] == 2 and r['prompt_len'] == 16 and r['tok_per_s'] > 0
               for r in rows)
    fused_only = run('bench.py', '--fused', '--device=cpu', '--n_layer=2', '--n_embd=64', '--n_head=4',
                     '--vocab_size=100', '--batch_size=1', '--prompt_len=16', '--max_new_tokens=4', '--repeats=1')
    assert {r['variant'] for r in json.loads(fused_only.stdout.strip().splitlines()[-1])['rows']} == \
        {'baseline', 'fused'}


def test_bench_train_runs_and_its_json_parses():
    """bench.py --train on a tiny shape: one timed optimizer step per variant, every phase of both
    tapers, DyT, and Baseline as the unit of the ratio."""
    proc = run('bench.py', '--train', '--device=cpu', '--n_layer=2', '--n_embd=32', '--n_head=4',
               '--vocab_size=64', '--block_size=32', '--batch_size=2', '--repeats=1')
    rows = json.loads(proc.stdout.strip().splitlines()[-1])['rows']
    assert [r['variant'] for r in rows] == ['baseline'] + [f"{taper}+aux {phase}" for taper in ('internal', 'all')
                                                           for phase in ('calibrating', 'g=0.5', 'g=0')] + ['dyt']
    assert all(r['mode'] == 'eager' and r['batch_size'] == 2 and r['block_size'] == 32 and r['tok_per_s'] > 0
               and r['ratio'] > 0 for r in rows)
    assert rows[0]['ratio'] == 1.0
    refused = run('bench.py', '--train', '--fused', '--device=cpu', check=False)
    assert refused.returncode != 0 and 'Traceback' not in refused.stderr and '--train' in refused.stderr


def test_sample_script_from_an_hf_gpt2_directory(tmp_path):
    """--init_from takes an HF GPT-2 name or save_pretrained directory and decodes with tiktoken's
    GPT-2 BPE (offline: the tiktoken cache in ../shared/data)."""
    require_shared()
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=64)).save_pretrained(tmp_path)
    proc = run('sample.py', f'--init_from={tmp_path}', '--device=cpu', '--num_samples=1',
               '--max_new_tokens=8', '--start=hello world')
    assert proc.stdout.startswith('hello world') and len(proc.stdout.split('---')[0]) > len('hello world')


# --- GPT-2 fine-tuning: prepare_owt.py, the four protocols, fold, evaluate.py ------------------------

@pytest.fixture(scope='module')
def owt_dir(tmp_path_factory):
    """prepare_owt.py on the 1,000 local OpenWebText documents, plus two small Pile files of 1024-token
    rows (the hub's format) cut from tokenized OWT text."""
    require_shared()
    import tiktoken
    root = tmp_path_factory.mktemp('owt')
    enc = tiktoken.get_encoding('gpt2')
    docs = [json.loads(line)['text'] for line in open(SHARED / 'openwebtext' / 'sample.jsonl')][-60:]
    stream = [t for d in docs for t in enc.encode_ordinary(d) + [enc.eot_token]]
    for name, rows in (('pile', 6), ('pile_filtered', 4)):
        with open(root / f'{name}.jsonl', 'w') as f:
            for r in range(rows):
                f.write(json.dumps({'input_ids': stream[r * 1024:(r + 1) * 1024]}) + '\n')
    out = root / 'data'
    import prepare_owt
    prepare_owt.main(['--input_file', str(SHARED / 'openwebtext' / 'sample.jsonl'), '--val_fraction', '0.05',
                      '--out_dir', str(out), '--num_proc', '2', '--pile_file', str(root / 'pile.jsonl'),
                      '--pile_filtered_file', str(root / 'pile_filtered.jsonl')])
    return out


def test_prepare_owt(owt_dir):
    """GPT-2 BPE with an end-of-text token after each document; the val split is train_test_split's;
    the Pile rows are kept as they are."""
    import tiktoken
    meta = json.load(open(owt_dir / 'meta.json'))
    assert meta['vocab_size'] == 50257 and meta['eot_token'] == 50256 and meta['dtype'] == 'uint16'
    val = np.memmap(owt_dir / 'val.bin', dtype=np.uint16, mode='r')
    assert (val == 50256).sum() == 50 and val[-1] == 50256  # 5% of 1,000 documents
    assert 'the' in tiktoken.get_encoding('gpt2').decode(val[:200].tolist())
    assert len(np.memmap(owt_dir / 'pile.bin', dtype=np.uint16, mode='r')) == 6 * 1024


@pytest.fixture(scope='module')
def tiny_gpt2(tmp_path_factory):
    """A small random GPT-2 with the real 50,257-token vocabulary, as save_pretrained writes it."""
    from transformers import GPT2Config, GPT2LMHeadModel
    path = tmp_path_factory.mktemp('tiny-gpt2-50k')
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=128)).save_pretrained(path)
    return path


# The paper's S configs on a scaled-down schedule: 2 layers, 16 steps, FakeLN removals 2..13.
FINETUNE_TINY = ['--device=cpu', '--n_layer=2', '--n_head=2', '--n_embd=32', '--block_size=64', '--batch_size=4',
                 '--gradient_accumulation_steps=2', '--max_iters=16', '--warmup_iters=2', '--lr_decay_iters=16',
                 '--learning_rate=1e-3', '--min_lr=1e-4', '--taper_start=3', '--taper_end=12',
                 '--fakeln_start=(2,6,9,13)', '--fakeln_gap=(1,1,1)',
                 '--eval_interval=8', '--eval_iters=2', '--log_interval=2', '--dtype=float32']


@pytest.fixture(scope='module')
def finetuned(owt_dir, tiny_gpt2, tmp_path_factory):
    root = tmp_path_factory.mktemp('finetune')
    run_pairwise(*[('train.py', ROOT / 'config' / f'finetune_gpt2_s_{proto}.py', *FINETUNE_TINY,
                    *(['--grad_checkpoint'] if proto == 'alltaper' else []),
                    f'--init_from={tiny_gpt2}', f'--data_dir={owt_dir}', f'--out_dir={root / proto}')
                   for proto in ('vanilla', 'fakeln', 'internaltaper', 'alltaper')])
    return root


@pytest.mark.parametrize('proto', ['vanilla', 'fakeln', 'internaltaper', 'alltaper'])
def test_finetuning_protocols_reach_a_layernorm_free_model(finetuned, proto):
    """Each protocol of Table 3 fine-tunes from HF weights: FakeLN removes ln_2, ln_1 (Q/K),
    ln_1 (V) layer by layer and then ln_f at the configured steps; the TaperLN gate reaches 0; the
    result folds with fold.py without changing its logits."""
    train_rows, evals = read_log(finetuned / proto)
    assert train_rows[-1]['loss'] < train_rows[0]['loss']
    model = GPT.from_checkpoint(str(finetuned / proto / 'ckpt.pt'))
    if proto == 'vanilla':
        assert model.tapered_norms() == [] and model.fakelns() == []
        return
    if proto == 'fakeln':
        steps = {name: m.removed_at.tolist() for name, m in model.named_modules() if hasattr(m, 'removed_at')}
        expected = {'transformer.ln_f': [13]}
        for i in range(2):  # ln_1: the Q/K path, then the V path
            expected.update({f'transformer.h.{i}.ln_2': [2 + i], f'transformer.h.{i}.ln_1': [6 + i, 9 + i]})
        assert steps == expected
        assert [r['removed'] for r in train_rows] == [0, 1, 2, 3, 4, 6, 6, 7]  # iters 0, 2, ..., 14
        assert model.config.aux_loss == 'baroni'
    else:
        assert evals[-1]['eval_gate'] == 0.0 and model.gate.item() == 0.0
    proc = run('fold.py', f'--out_dir={finetuned / proto}')
    scale = float(re.search(r'max \|logits\| (\S+), float32', proc.stdout).group(1))
    assert float(re.search(r'\| = (\S+) on ', proc.stdout).group(1)) < 1e-5 * max(1.0, scale)


# The scaled-down FakeLN schedule removes ln_2 at 2-3, ln_1 (Q/K) at 6-7, ln_1 (V) at 9-10, ln_f at 13.
def test_resume_between_and_after_fakeln_removals_continues_the_same_run_bitwise(finetuned, owt_dir, tiny_gpt2,
                                                                                  tmp_path):
    """A FakeLN fine-tune (shuffled blocks, dropout, the live sigma EMA) stopped between two removals
    (iter 7), resumed, stopped again after the last (iter 14) and resumed, is the run that never stopped:
    each frozen sigma_avg, removal step and sigma EMA comes back, and so do the block order and the
    dropout masks."""
    common = [ROOT / 'config' / 'finetune_gpt2_s_fakeln.py', *FINETUNE_TINY, f'--init_from={tiny_gpt2}',
              f'--data_dir={owt_dir}', f'--out_dir={tmp_path}']

    def removed():
        return [r for m in GPT.from_checkpoint(str(tmp_path / 'ckpt.pt')).fakelns() for r in m.removed]
    run('train.py', *common, '--stop_iter=7')  # one thread, as the fixture's straight run: bitwise needs it
    assert 0 < sum(removed()) < len(removed())
    # The blocks layout's epoch order counts the run's blocks and sequences per step: neither may change.
    before = {f: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()}
    for change, said in ((['--block_size=32'], 'block_size 64 -> 32 in'),
                         (['--batch_size=2', '--gradient_accumulation_steps=2'],
                          'the global batch 8 -> 4 sequences (batch_size x gradient_accumulation_steps) in')):
        proc = run('train.py', *common, '--init_from=resume', *change, check=False)
        assert proc.returncode == 1 and proc.stderr.count('\n') == 1, proc.stderr
        assert f"cannot resume: {said} data_layout='blocks', whose epoch order counts the run's 64-token blocks, 8 a " \
               f"step, would skip some blocks of the epoch under way and read others twice" in proc.stderr, proc.stderr
    assert {f: f.read_bytes() for f in tmp_path.iterdir() if f.is_file()} == before
    run('train.py', *common, '--init_from=resume', '--stop_iter=14')
    assert all(removed())
    run('train.py', *common, '--init_from=resume')
    assert_same_run(finetuned / 'fakeln', tmp_path)


def test_fakeln_with_baronis_pretrained_sigma_removes_every_layernorm_then_folds_and_exports(
        owt_dir, tiny_gpt2, tmp_path):
    """The S FakeLN config with --fakeln_sigma=pretrained (Baroni et al.'s default) on local tiny GPT-2
    weights: every LayerNorm is removed on schedule with the sigma the pretrained model gives on the
    first step's batch (generate_std_dict.py's statistic, taken from transformers' own GPT2LMHeadModel),
    both ln_1 paths with the same; fold.py folds the run and exports it, and transformers' logits on
    the export are the run's."""
    from transformers import GPT2LMHeadModel
    common = [ROOT / 'config' / 'finetune_gpt2_s_fakeln.py', *FINETUNE_TINY, f'--init_from={tiny_gpt2}',
              f'--data_dir={owt_dir}']
    run('train.py', *common, '--fakeln_sigma=pretrained', f'--out_dir={tmp_path / "run"}')
    model = GPT.from_checkpoint(str(tmp_path / 'run' / 'ckpt.pt')).eval()
    assert model.config.fakeln_sigma == 'pretrained' and all(all(m.removed) for m in model.fakelns())
    first_step = train_namespace(*common, f'--out_dir={tmp_path / "probe"}', '--eval_only')['get_step_batches'](0)
    expected = pretrained_layernorm_std(GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval(), [x for x, _ in first_step])
    assert len(expected) == 5  # ln_1, ln_2 of two blocks, ln_f
    for name, sigma in expected.items():
        assert model.get_submodule(name).sigma_avg.tolist() == pytest.approx([sigma] * (1 + name.endswith('ln_1')),
                                                                             rel=1e-5), name
    run('fold.py', f'--out_dir={tmp_path / "run"}', f'--export_hf={tmp_path / "hf"}')
    idx = first_step[0][0]
    with torch.no_grad():
        ours = model(idx)[0]
        theirs = GPT2LMHeadModel.from_pretrained(tmp_path / 'hf').eval()(idx).logits
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-5 * ours.abs().max().item())


def test_evaluate_script_prints_table3(finetuned, owt_dir):
    """evaluate.py scores OWT-val, Pile and Pile-filtered as the mean CE over 1024-token chunks (1023
    predictions each, end-of-text targets included), in full batches only, as Baroni et al.'s
    evaluation does; a folded checkpoint scores what the g = 0 model does. The reference is
    transformers' GPT2LMHeadModel on the same chunks, in float32."""
    from transformers import GPT2LMHeadModel
    from hf import export_hf
    common = [f'--data_dir={owt_dir}', '--device=cpu', '--max_chunks=3', '--batch_size=2']
    plain = run('evaluate.py', f'--out_dir={finetuned / "internaltaper"}', *common)
    folded = run('evaluate.py', f'--out_dir={finetuned / "internaltaper"}', '--ckpt=ckpt_folded.pt', *common)
    a, b = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (plain, folded))
    assert a['label'].startswith('Internal-TaperLN')
    assert a['chunks'] == {'owt': 2, 'pile': 2, 'pile_filtered': 2}  # 3 chunks: one batch of 2, one left out
    for key in ('owt', 'pile', 'pile_filtered'):
        assert 5 < a[key] < 12 and a[key] == pytest.approx(b[key], abs=1e-4)
    cpu_bf16 = run('evaluate.py', f'--out_dir={finetuned / "internaltaper"}', *common, '--dtype=bfloat16')
    assert 'autocasts on CUDA only' in cpu_bf16.stdout  # and the CPU scores what it said: float32
    assert json.loads(cpu_bf16.stdout.strip().splitlines()[-1])['owt'] == a['owt']
    # an All-TaperLN model exports to transformers; score its chunks there as Baroni's code does
    ours, ours_folded = (json.loads(run('evaluate.py', f'--out_dir={finetuned / "alltaper"}', *common, *ckpt)
                                    .stdout.strip().splitlines()[-1]) for ckpt in ([], ['--ckpt=ckpt_folded.pt']))
    model = GPT.from_checkpoint(str(finetuned / 'alltaper' / 'ckpt.pt'))
    export_hf(model, fold_model(model), finetuned / 'alltaper-hf')
    hf = GPT2LMHeadModel.from_pretrained(finetuned / 'alltaper-hf').eval()
    T = model.config.block_size  # the tiny GPT-2's context, shorter than 1024: chunks of T
    for key, file in (('owt', 'val.bin'), ('pile', 'pile.bin')):
        chunks = torch.from_numpy(np.memmap(owt_dir / file, dtype=np.uint16, mode='r')[:2 * T].astype(np.int64))
        with torch.no_grad():
            reference = hf(chunks.view(2, T), labels=chunks.view(2, T)).loss.item()
        assert ours[key] == pytest.approx(reference, rel=1e-5)
        assert ours_folded[key] == pytest.approx(reference, rel=1e-5)  # no ln_f left, no error either


def test_finetune_configs_follow_baronis_released_runs():
    """Where App. D is silent the GPT-2 configs take Baroni et al.'s released settings: AdamW betas
    (0.9, 0.999), dropout 0.1, shuffled 1024-token blocks, end-of-text targets masked, FakeLN momentum
    0.9 / 0.9 / 0.9^(28/32) / 0.9^(18/32), FakeLN's gamma weight-decayed, and a 15-step warmup for the
    L rows taken from Baroni (Vanilla, FakeLN); the TaperLN rows keep App. D's, TinyStories App. C's."""
    momentum = {'s': 0.9, 'm': 0.9, 'l': 0.912, 'xl': 0.942}
    warmup = {'s': 25, 'm': 10, 'l': 30, 'xl': 20}
    for size in momentum:
        for proto in ('vanilla', 'fakeln', 'internaltaper', 'alltaper'):
            cfg = resolve([str(ROOT / 'config' / f'finetune_gpt2_{size}_{proto}.py')])
            assert (cfg['beta1'], cfg['beta2'], cfg['dropout']) == (0.9, 0.999, 0.1)
            assert (cfg['data_layout'], cfg['mask_eot_targets'], cfg['block_size']) == ('blocks', True, 1024)
            assert cfg['warmup_iters'] == (15 if size == 'l' and proto in ('vanilla', 'fakeln') else warmup[size])
            assert cfg['decay_fakeln_weight'] == (proto == 'fakeln')
            if proto == 'fakeln':
                assert cfg['fakeln_momentum'] == pytest.approx(momentum[size], abs=5e-4)
                assert cfg['fakeln_sigma'] == 'live'
    defaults = resolve([])
    assert (defaults['beta2'], defaults['dropout'], defaults['data_layout'], defaults['mask_eot_targets']) == \
        (0.95, 0.0, 'random', False)


def test_block_layout_reads_each_block_once_per_epoch_and_masks_end_of_text(owt_dir, tiny_gpt2, tmp_path):
    """data_layout='blocks' (App. D): the training stream is cut into non-overlapping blocks; an epoch
    visits each once, in a shuffled order; a block predicts its own tokens 2..T; with mask_eot_targets
    end-of-text targets are -1, left out of the loss."""
    script = train_namespace(ROOT / 'config' / 'finetune_gpt2_s_vanilla.py', *FINETUNE_TINY, f'--init_from={tiny_gpt2}',
                             f'--data_dir={owt_dir}', f'--out_dir={tmp_path}', '--batch_size=64',
                             '--gradient_accumulation_steps=2', '--eval_only')
    T = 64
    data = np.memmap(owt_dir / 'train.bin', dtype=np.uint16, mode='r').astype(np.int64)
    index = {data[i:i + T].tobytes(): i // T for i in range(0, len(data) - T + 1, T)}
    per_step = 128
    steps = len(index) // per_step
    seen, masked = [], 0
    for it in range(steps):
        for x, y in script['get_step_batches'](it):
            expected = torch.cat([x[:, 1:], torch.full((len(x), 1), -1)], dim=1)
            expected[expected == 50256] = -1
            assert torch.equal(y, expected)
            masked += int((x[:, 1:] == 50256).sum())
            seen += [index[row.numpy().tobytes()] for row in x]  # a KeyError: not a block
    assert len(set(seen)) == len(seen) == steps * per_step  # no block twice within the epoch
    assert seen != sorted(seen) and masked > 0  # shuffled; end-of-text targets occurred


def test_reproduce_script_end_to_end(tmp_path, capsys):
    """reproduce.py on both local TinyStories samples, pooled and split, with a shortened schedule:
    every setting trains, the tapered ones fold without changing their validation loss, the All-Taper
    ones are also folded with --reset_unseen and scored, the diagnostic, the decoding benchmark and
    the figures are written. The data folder is prepared with the vocabulary the runs train with, and the
    scripts' notes on their inputs reach the user."""
    require_shared()
    out = run('reproduce.py', '--input_file', f"{SHARED / 'tinystories' / 'train_sample.txt'},"
              f"{SHARED / 'tinystories' / 'valid_sample.txt'}", '--val_fraction=0.1', f'--data_dir={tmp_path / "data"}',
              f'--out_root={tmp_path / "runs"}', f'--assets={tmp_path / "assets"}', '--val_windows=8', '--jobs=2', '--seeds=1,2', '--ablation_seeds=1',
              '--settings=baseline,internal,all,all-noaux,all-notail',
              '--bench_prompt=16', '--bench_new=8', '--', '--vocab_size=1024', '--n_layer=2', '--block_size=64', '--max_iters=24',
              '--warmup_iters=8', '--taper_start=8', '--taper_end=20', '--lr_decay_iters=30', '--eval_interval=12',
              '--eval_iters=2', '--log_interval=4', '--learning_rate=1e-3').stdout
    results = json.load(open(tmp_path / 'assets' / 'results.json'))
    assert set(results['settings']) == {'baseline', 'internal', 'all', 'all-noaux', 'all-notail'}
    taper_end = {name: json.load(open(tmp_path / 'runs' / f'{name}-s1' / 'config.json'))['taper_end']
                 for name in ('all', 'all-notail')}
    assert taper_end == {'all': 20, 'all-notail': 24}  # the no-tail ablation tapers to the last step
    assert results['settings']['baseline']['median'] > 0 and '| Baseline |' in out
    for row in results['settings'].values():  # clean windows hold only tokens seen in training
        assert 0 <= row['excluded'] <= 8 * len(results['seeds']) and row['non_finite'] >= 0
        assert (row['clean_mean'] is None) == (row['mean'] is None)
    assert '[2/5] Internal-Taper (+aux), seed' in out  # progress, setting by setting
    # train.py's note on the schedule (the decay runs past max_iters) reaches the user, once for all eight runs
    assert out.count('train.py note: the cosine decay runs to lr_decay_iters=30, past max_iters=24') == 1, out
    assert 'has no effect in this run' not in out  # the taper flags after --, which the Baseline runs ignore
    seeds_trained = {name: len(row['val_ce']) for name, row in results['settings'].items()}
    assert seeds_trained == {'baseline': 2, 'internal': 2, 'all': 2, 'all-noaux': 1, 'all-notail': 1}  # ablations: seed 1
    assert results['settings']['baseline']['clean_mean_std'] is not None and '| All-Taper (no aux) (1 seed) |' in out
    meta = json.load(open(tmp_path / 'data' / 'meta.json'))
    assert meta['vocab_size'] == 1024  # the vocabulary given after --, not reproduce.py's default
    assert results['data']['epochs'] == pytest.approx(24 * 16 * 64 / meta['train_tokens'])
    assert meta['val_tokens'] < meta['train_tokens'] / 5  # a tenth of the pooled stories held out
    assert set(results['reset_unseen']) == {'all', 'all-noaux', 'all-notail'} and (tmp_path / 'assets' / 'diagnose.txt').exists()
    table = (tmp_path / 'assets' / 'results.md').read_text()  # the Markdown the README's Results quote
    assert '| Internal-Taper (+aux) |' in table and '--reset_unseen' in table and table.strip() in out
    for rows in results['reset_unseen'].values():  # clean windows hold no reset token: unchanged
        assert all(r['after']['clean_mean'] == pytest.approx(r['before']['clean_mean'], rel=1e-6) for r in rows)
    for fold in sum(results['fold'].values(), []):  # float32 rounding relative to the logits; exact in float64
        assert fold['max_logit_diff'] < 1e-5 * max(1.0, fold['max_logit'])
        assert fold['max_logit_diff_float64'] < 1e-10 * max(1.0, fold['max_logit'])
        assert fold['val_ce_folded'] == pytest.approx(fold['val_ce'], rel=1e-6, abs=1e-5)
    assert {r['variant'] for r in results['bench']} == {'baseline', 'fused'}
    # paired gaps, written out from the per-seed scores: same seed, setting minus Baseline
    base = {r['seed']: r['clean_mean'] for r in results['settings']['baseline']['val_ce']}
    d = [r['clean_mean'] - base[r['seed']] for r in results['settings']['all']['val_ce']]
    paired = results['settings']['all']['paired']['clean_mean']
    assert paired['seeds'] == 2 and paired['nats'] == pytest.approx(sum(d) / 2, rel=1e-12)
    assert paired['nats_sd'] == pytest.approx(abs(d[0] - d[1]) / 2 ** 0.5, rel=1e-9)
    assert paired['signs'] == ''.join('+' if x > 0 else '-' for x in d) and '| setting | seeds |' in table
    # every run's log is kept beside the results, and the figures redraw from those copies alone
    for name, seeds in seeds_trained.items():
        for seed in range(1, seeds + 1):
            kept = tmp_path / 'assets' / 'runs' / f'{name}-s{seed}'
            assert (kept / 'log.jsonl').read_bytes() == (tmp_path / 'runs' / f'{name}-s{seed}' / 'log.jsonl').read_bytes()
    redrawn = run('plot.py', *sorted((tmp_path / 'assets' / 'runs').iterdir()), f'--out_dir={tmp_path / "redrawn"}')
    assert redrawn.stdout.count('wrote') == 3 and (tmp_path / 'assets' / 'ablations_loss.png').exists()
    whole = run('plot.py', tmp_path / 'runs', f'--out_dir={tmp_path / "redrawn"}', check=False)  # out_root itself
    assert whole.returncode == 1 and f"holds 8 run(s) in its folders (all-noaux-s1, all-notail-s1, all-s1, ...): pass " \
        f"the runs, e.g. python plot.py {tmp_path / 'runs' / '*'}." in whole.stderr, whole.stderr
    assert all((tmp_path / 'assets' / f).stat().st_size > 10_000 for f in ('loss.png', 'logit_norm.png', 'grad_norms.png'))
    # a run's log removed since: its kept copy is drawn, and that is said
    import types
    import reproduce
    (tmp_path / 'runs' / 'internal-s2' / 'log.jsonl').unlink()
    runs = {name: [str(tmp_path / 'runs' / f'{name}-s{seed}') for seed in range(1, n + 1)] for name, n in seeds_trained.items()}
    said = reproduce.plot_all(types.SimpleNamespace(assets=str(tmp_path / 'assets')),
                              {name: reproduce.SETTINGS[name] for name in runs}, runs)
    assert said.count('wrote') == 6
    assert (f"note: {tmp_path / 'runs' / 'internal-s2'} has no log.jsonl now, so the figures draw "
            f"{tmp_path / 'assets' / 'runs' / 'internal-s2' / 'log.jsonl'}, the copy") in capsys.readouterr().out


def test_fig2_gradient_norms_split_the_attention_rows_by_head_count_under_grouped_query_attention(data_dir, tmp_path):
    """Fig. 2's per-type gradient norms for a grouped-query model (4 query heads, 2 key/value heads of
    16 features): c_attn's rows are 64 of q, then 32 of k and 32 of v, and train.py's grad_q, grad_k
    and grad_v are the norms of those rows' gradients, averaged over the blocks."""
    ns = train_namespace(*TINY, '--n_kv_head=2', '--taper=none', '--aux_loss=none', f'--data_dir={data_dir}',
                         f'--out_dir={tmp_path}', '--eval_only')
    model = ns['raw_model']
    X, Y = ns['get_step_batches'](0)[0]
    model(X, Y)[1].backward()
    grads = [b.attn.c_attn.weight.grad for b in model.transformer.h]
    assert all(g.shape[0] == 64 + 32 + 32 for g in grads)
    expect = {name: sum(float(g[rows].norm()) for g in grads) / len(grads)
              for name, rows in (('grad_q', slice(0, 64)), ('grad_k', slice(64, 96)), ('grad_v', slice(96, 128)))}
    logged = ns['grad_norms_by_type']()
    assert {k: logged[k] for k in expect} == pytest.approx(expect, rel=1e-6)
