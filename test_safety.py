"""
A run never loses work: a checkpoint is only replaced by a state that trains, a run that fails or is
refused leaves out_dir byte for byte as it was (or as of its last checkpoint), and a resume may not
move the schedule of the run it continues.
"""

import hashlib
import json
import math
import os
import re
import shutil

import pytest

from conftest import TINY, run

BASE = [*TINY, '--stop_iter=20']
SETTINGS = {  # the run up to iter 20, then a wreck at iter 20 right before a save at iter 21
    'baseline': ['--taper=none', '--aux_loss=none'],
    'mid-taper': [],  # Internal-Taper (+aux): g = 0.43 at iter 21
    'fakeln': ['--arch=gpt2', '--norm=layernorm', '--taper=none', '--aux_loss=none', '--fakeln',
               '--fakeln_start=12,14,16,18', '--fakeln_gap=1,1,1'],  # every LayerNorm removed by iter 19
}


def digest(folder):
    return {f: hashlib.sha256(open(os.path.join(folder, f), 'rb').read()).hexdigest()
            for f in sorted(os.listdir(folder)) if os.path.isfile(os.path.join(folder, f))}


def rows(out):
    return [json.loads(line) for line in open(os.path.join(out, 'log.jsonl'))]


@pytest.mark.parametrize('setting', SETTINGS)
def test_a_wreck_right_before_a_save_never_replaces_the_checkpoint(data_dir, tmp_path, setting):
    """A resume whose one step at a huge learning rate wrecks the weights, with a checkpoint due right
    after it: the run stops, the checkpoint, log and config on disk are the ones from before, and that
    checkpoint resumes at a sane learning rate and trains to the end with finite losses."""
    out = tmp_path / 'run'
    args = [*BASE, *SETTINGS[setting], f'--data_dir={data_dir}', f'--out_dir={out}']
    run('train.py', *args)
    before = digest(out)
    for lr in ('1e6', '0.3'):
        proc = run('train.py', *args, '--init_from=resume', f'--learning_rate={lr}', '--eval_interval=21',
                   '--log_interval=100', '--stop_iter=21', check=False)
        if proc.returncode == 0:  # the state after this step trains: it is a good checkpoint
            resumed = run('train.py', *args, '--init_from=resume', '--stop_iter=0', check=False)
            assert resumed.returncode == 0, (lr, resumed.stderr[-2000:])
            shutil.rmtree(out)
            run('train.py', *args)
            continue
        assert 'the last good checkpoint' in proc.stderr and '(iter 20), is kept' in proc.stderr, proc.stderr
        assert 'Traceback' not in proc.stderr
        assert digest(out) == before, lr  # ckpt.pt, log.jsonl and config.json byte for byte
    sane = run('train.py', *args, '--init_from=resume', '--stop_iter=0')
    assert sane.returncode == 0
    losses = [r['loss'] for r in rows(out)]
    assert rows(out)[-1]['iter'] == 40 and all(math.isfinite(x) for x in losses)


def test_a_run_that_fails_before_its_first_checkpoint_leaves_out_dir_as_it_was(data_dir, tmp_path):
    """A scratch run that diverges before its first checkpoint writes nothing; an --overwrite run that
    does so gives the old run's files back; a resume that does so truncates nothing."""
    args = [*TINY, f'--data_dir={data_dir}']
    fresh = tmp_path / 'fresh'
    proc = run('train.py', *args, f'--out_dir={fresh}', '--learning_rate=1e6', '--warmup_iters=0',
               '--taper=none', '--aux_loss=none', check=False)
    assert proc.returncode == 1 and 'no checkpoint was written' in proc.stderr, proc.stderr
    assert not fresh.exists()
    old = tmp_path / 'old'
    run('train.py', *args, f'--out_dir={old}', '--taper=none', '--aux_loss=none')
    (old / 'ckpt_folded.pt').write_bytes(b'a file of the old run')
    before = digest(old)
    proc = run('train.py', *args, f'--out_dir={old}', '--overwrite', '--learning_rate=1e6', '--warmup_iters=0',
               '--taper=none', '--aux_loss=none', check=False)
    assert proc.returncode == 1 and digest(old) == before and not (old / '.replaced').exists()
    # the same --overwrite, healthy: the old run's files go, its folded checkpoint with them
    run('train.py', *args, f'--out_dir={old}', '--overwrite', '--max_iters=20', '--lr_decay_iters=20',
        '--taper_end=20', '--eval_interval=10')
    assert sorted(digest(old)) == ['ckpt.pt', 'config.json', 'log.jsonl'] and rows(old)[-1]['iter'] == 20


@pytest.mark.parametrize('change', ['--taper_start=12', '--taper_end=36', '--stop_iter=20'])
def test_a_resume_may_not_move_the_schedule_silently(data_dir, tmp_path, change):
    """Moving taper_start or taper_end under a run in progress would make the gate jump; ending the
    run where the checkpoint already is would train nothing. Both are refused before anything is
    written; --reschedule accepts a new taper_end knowingly, but never a taper_start the run has
    passed (c and gammatilde were calibrated there), and given with nothing to move it is said to do nothing."""
    out = tmp_path / 'run'
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}']
    run('train.py', *args, '--stop_iter=20')
    before = digest(out)
    proc = run('train.py', *args, '--init_from=resume', change, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and digest(out) == before, proc.stderr
    expect = {'--stop_iter=20': 'nothing to train', '--taper_start=12': 'the taper has started'}
    assert expect.get(change, 'changes the schedule') in lines[0]
    if change == '--taper_start=12':  # the taper started at 8: c and gammatilde are calibrated, no moving it
        proc = run('train.py', *args, '--init_from=resume', change, '--reschedule', check=False)
        assert proc.returncode == 1 and 'the taper has started' in proc.stderr and digest(out) == before
    elif change != '--stop_iter=20':
        proc = run('train.py', *args, '--init_from=resume', change, '--reschedule')
        assert rows(out)[-1]['iter'] == 40 and '--reschedule changes nothing' not in proc.stderr
    else:  # --reschedule with nothing to move is refused, as the schedule meant was not read
        proc = run('train.py', *args, '--init_from=resume', '--reschedule', '--stop_iter=24', check=False)
        assert proc.returncode == 1 and digest(out) == before and proc.stderr.strip().endswith(
            'no flag moves taper_start or taper_end of the run in progress at iter 20: pass the new taper_start or '
            'taper_end with it, or drop it'), proc.stderr
        held = json.loads((out / 'config.json').read_text())  # the new taper_end written into config.json by hand
        (out / 'config.json').write_text(json.dumps(held | {'taper_end': 36}, indent=1))
        before = digest(out)
        proc = run('train.py', *args, '--init_from=resume', '--reschedule', check=False)
        assert proc.returncode == 1 and digest(out) == before, proc.stderr
        advice = proc.stderr.strip().rpartition(': pass ')[2].split()
        assert "(config.json's taper_end=36 is not read" in proc.stderr and advice == ['--taper_end=36', '--reschedule']
        run('train.py', *args, '--init_from=resume', *advice)  # the advice, followed
        assert rows(out)[-1]['iter'] == 40 and json.loads((out / 'config.json').read_text())['taper_end'] == 36


def test_a_resume_may_not_move_a_fakeln_removal_that_has_happened_or_into_the_past(data_dir, tmp_path):
    """A FakeLN run checkpointed at iter 16 has removed ln_2 (steps 12, 13), ln_1's Q/K path (14, 15) and
    layer 0's V path (16: a step's removals come before its checkpoint) of its two layers. A resume that
    moves one of those, or a removal still ahead to iter 16 or before, is refused even with --reschedule,
    naming the LayerNorm and both steps, and nothing is written; removals ahead of the run moved to later
    steps are taken with --reschedule, and the model records each removal at its new step."""
    out = tmp_path / 'run'
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}', *SETTINGS['fakeln']]
    run('train.py', *args, '--stop_iter=16')
    before = digest(out)
    for change, said in (('--fakeln_start=13,14,16,18', 'moves the removal of h.0.ln_2 from step 12 to 13'),
                         ('--fakeln_start=12,14,17,18', 'h.0.ln_1 (V) from step 16 to 17'),  # at 16: before the save
                         ('--fakeln_gap=1,1,0', 'moves the removal of h.1.ln_1 (V) from step 17 to 16'),
                         ('--fakeln_start=12,14,16,15', 'moves the removal of ln_f from step 18 to 15')):
        proc = run('train.py', *args, '--init_from=resume', change, '--reschedule', check=False)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and said in lines[0] and digest(out) == before, proc.stderr
        assert 'and the run is at iter 16' in lines[0]
    run('train.py', *args, '--init_from=resume', '--fakeln_start=12,14,16,19', '--fakeln_gap=1,1,2', '--reschedule')
    from model import GPT
    model = GPT.from_checkpoint(str(out / 'ckpt.pt'))
    steps = {name: m.removed_at.tolist() for name, m in model.named_modules() if hasattr(m, 'removed_at')}
    assert steps == {'transformer.h.0.ln_2': [12], 'transformer.h.1.ln_2': [13], 'transformer.h.0.ln_1': [14, 16],
                     'transformer.h.1.ln_1': [15, 18], 'transformer.ln_f': [19]}  # the moved ones at their new steps


def test_a_resume_continues_the_run_with_its_own_config(data_dir, tmp_path):
    """--init_from=resume --out_dir=<run> alone continues the run as it was configured: the same weights,
    bit for bit, as the run resumed with its full command line. A flag given on the resume changes
    that one setting, and says so; a changed learning-rate schedule also says the learning rate at the
    resume step before and after."""
    args = [*TINY, f'--data_dir={data_dir}']
    for name in ('bare', 'full'):
        run('train.py', *args, f'--out_dir={tmp_path / name}', '--stop_iter=20')
    run('train.py', '--init_from=resume', f'--out_dir={tmp_path / "bare"}')
    run('train.py', *args, '--init_from=resume', f'--out_dir={tmp_path / "full"}')
    import torch
    bare, full = (torch.load(tmp_path / name / 'ckpt.pt', weights_only=True) for name in ('bare', 'full'))
    assert bare['iter_num'] == full['iter_num'] == 40
    assert all(torch.equal(bare['model'][k], full['model'][k]) for k in full['model'])
    timeless = [[{k: v for k, v in r.items() if k != 'tok_per_s'} for r in rows(tmp_path / name)] for name in ('bare', 'full')]
    assert timeless[0] == timeless[1]
    proc = run('train.py', '--init_from=resume', f'--out_dir={tmp_path / "bare"}', '--max_iters=44',
               '--lr_decay_iters=44')
    assert 'resuming with changed settings: max_iters 40 -> 44, lr_decay_iters 40 -> 44' in proc.stdout
    import math  # the finished run's learning rate, 0 at its end, climbs back up the longer cosine: said
    lr = 0.5 * (1 + math.cos(math.pi * (40 - 8) / (44 - 8))) * 3e-3
    assert f"note: the learning rate at iter 40 goes from 0 (the checkpoint's schedule) to {lr:.3g}" in proc.stdout
    assert rows(tmp_path / 'bare')[-1]['iter'] == 44
    assert 'config.json gives' not in proc.stdout  # its own copy, unedited
    config = json.load(open(tmp_path / 'bare' / 'config.json'))  # edited by hand: it changes nothing, and is said
    json.dump(config | {'n_layer': 3, 'learning_rate': 1.0}, open(tmp_path / 'bare' / 'config.json', 'w'))
    proc = run('train.py', '--init_from=resume', f'--out_dir={tmp_path / "bare"}', '--max_iters=48',
               '--lr_decay_iters=48')
    assert ("config.json gives n_layer=3 (the checkpoint 2), learning_rate=1.0 (the checkpoint 0.003): a resume takes "
            "the checkpoint's config") in proc.stdout  # every edit named
    assert json.load(open(tmp_path / 'bare' / 'config.json'))['n_layer'] == 2  # rewritten from the checkpoint



def test_a_resume_takes_the_optimizer_groups_of_its_config_and_keeps_each_parameters_moments(data_dir, tmp_path):
    """AdamW on a resume: which parameters decay and the hyper-parameters are the config's, which a resume
    may change (--decay_fakeln_weight moves FakeLN's gamma out of the decayed group, --weight_decay and
    --beta2 change), while every parameter keeps the moments the checkpoint saved for it; the resumed
    run then trains to the end."""
    import torch
    from conftest import train_namespace
    out = tmp_path / 'run'
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}', *SETTINGS['fakeln']]
    run('train.py', *args, '--weight_decay=0.1', '--decay_fakeln_weight', '--stop_iter=16')
    saved = torch.load(out / 'ckpt.pt', weights_only=True)['optimizer']['state']
    ns = train_namespace('--init_from=resume', f'--out_dir={out}', '--decay_fakeln_weight=False',
                         '--weight_decay=0.2', '--beta2=0.95', '--eval_only')
    optimizer, model = ns['optimizer'], ns['raw_model']
    gains = {id(m.weight) for m in model.fakelns()}
    group = {id(p): g for g in optimizer.param_groups for p in g['params']}
    for name, p in model.named_parameters():
        assert group[id(p)]['weight_decay'] == (0.2 if p.dim() >= 2 else 0.0), name  # FakeLN's gamma: 1-D
        assert group[id(p)]['betas'] == (0.9, 0.95)
        assert all(torch.equal(optimizer.state[p][k], v) for k, v in saved[name].items()), name
    assert gains and len(optimizer.param_groups) == 2
    proc = run('train.py', '--init_from=resume', f'--out_dir={out}', '--decay_fakeln_weight=False')
    assert 'decay_fakeln_weight True -> False' in proc.stdout and rows(out)[-1]['iter'] == 40

@pytest.mark.parametrize('stop', ['SIGTERM', 'SIGUSR1', 'SIGHUP', 'SIGXCPU'])
def test_a_scheduler_kill_rolls_back_like_ctrl_c(data_dir, tmp_path, stop):
    """SIGTERM (a cluster's time limit), SIGUSR1 (SLURM's warning that it is near), SIGHUP (the terminal
    closed) or SIGXCPU (ulimit -t ran out) after the first checkpoint: one sentence naming the kept
    checkpoint and why the run stopped, out_dir as of that checkpoint, and the resume finishes the run."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT
    out = tmp_path / 'run'
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=400', '--lr_decay_iters=400',
            '--taper_end=300', '--eval_interval=20']
    proc = subprocess.Popen([sys.executable, str(ROOT / 'train.py'), *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=heeds_ctrl_c)
    while not (out / 'ckpt.pt').exists() or len(rows(out)) < 8:  # past the first checkpoint (iter 20)
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    proc.send_signal(getattr(signal, stop))
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'is as of its last checkpoint' in lines[0], err
    assert {'SIGTERM': 'SIGTERM', 'SIGUSR1': 'SIGUSR1', 'SIGHUP': 'terminal closed', 'SIGXCPU': 'ulimit -t'}[stop] in err
    import torch
    kept = torch.load(out / 'ckpt.pt', weights_only=True)['iter_num']
    assert max(r['iter'] for r in rows(out)) <= kept  # the log rolled back to its commit
    run('train.py', '--init_from=resume', f'--out_dir={out}', '--stop_iter=60')
    assert rows(out)[-1]['iter'] == 60


def test_a_run_killed_outright_before_its_first_checkpoint_gets_its_predecessor_back(data_dir, tmp_path):
    """--overwrite moves the old run aside until the new run's first checkpoint; a SIGKILL in between
    leaves it in .replaced, and the next start puts it back before anything else, and says so."""
    out = tmp_path / 'run'
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}']
    run('train.py', *args, '--stop_iter=20')
    before = digest(out)
    (out / '.replaced').mkdir()
    for name in before:
        os.replace(out / name, out / '.replaced' / name)
    (out / 'config.json').write_text('{"init_from": "scratch", "taper": "internal", "out_dir": "x"}')
    (out / 'log.jsonl').write_text('')  # what the killed run had written
    proc = run('train.py', *args, check=False)
    assert 'restored the run' in proc.stdout and 'already holds a run' in proc.stderr
    assert digest(out) == before and not (out / '.replaced').exists()


def test_a_resume_applies_changed_optimizer_settings(data_dir, tmp_path):
    """AdamW's weight decay and betas are the resumed run's flags, not the checkpoint's: a resume that
    changes them (and says so) trains with the new values, which the next checkpoint holds."""
    import torch
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--stop_iter=20')
    proc = run('train.py', '--init_from=resume', f'--out_dir={out}', '--weight_decay=0.1', '--beta2=0.99')
    assert 'weight_decay 0.0 -> 0.1' in proc.stdout
    groups = torch.load(out / 'ckpt.pt', weights_only=True)['optimizer']['param_groups']
    assert groups[0]['weight_decay'] == 0.1 and groups[1]['weight_decay'] == 0.0
    assert all(tuple(g['betas']) == (0.9, 0.99) for g in groups)


def test_a_folded_checkpoint_older_than_its_run_is_noted(tmp_path):
    """sample.py, evaluate.py and diagnose.py print model.folded_note before using a folded checkpoint
    whose run has trained on since the fold (a note, not a refusal: the older model is still valid)."""
    import torch
    from model import folded_note
    torch.save({'iter_num': 40, 'model': {}}, tmp_path / 'ckpt.pt')
    folded = {'folded_from': str(tmp_path / 'ckpt.pt'), 'iter_num': 20}
    assert 'folded from iter 20' in folded_note(folded) and 'trained to iter 40' in folded_note(folded)
    assert folded_note(folded | {'iter_num': 40}) is None  # folded from the run's last checkpoint
    assert folded_note(folded | {'folded_from': str(tmp_path / 'gone.pt')}) is None
    # copied into another run's folder: the run beside it is another model, whatever its iter
    other = tmp_path / 'other'
    other.mkdir()
    args = dict(n_layer=2, taper='all')
    torch.save({'iter_num': 40, 'model': {}, 'model_args': args | {'taper': 'internal'}, 'config': {'seed': 1}},
               other / 'ckpt.pt')
    copied = folded | {'model_args': args | {'folded': True}, 'config': {'seed': 1}}
    note = folded_note(copied, str(other / 'ckpt_folded.pt'))
    assert 'was not folded from the run beside it' in note and str(tmp_path / 'ckpt.pt') in note
    torch.save({'iter_num': 20, 'model': {}, 'model_args': args, 'config': {'seed': 1}}, other / 'ckpt.pt')
    assert 'beside it' not in folded_note(copied, str(other / 'ckpt_folded.pt'))  # the same model: a copied run


def test_a_stage_of_a_reproduction_that_stops_is_said_once(data_dir, tmp_path):
    """reproduce.py passes on the sentence of a script it runs that stopped: once, not as
    'plot.py stopped: plot.py stopped: ...' (here plot.py under a file-size limit below its figure's size)."""
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=4', '--lr_decay_iters=4',
        '--warmup_iters=1', '--taper_start=1', '--taper_end=3', '--eval_interval=4')
    script = ("import resource, reproduce\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (10240, 10240))\n"
              f"reproduce.run('plot.py', {str(out)!r}, '--out_dir', {str(tmp_path / 'figs')!r})\n")
    proc = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith('plot.py stopped: ') and 'the file-size limit' in last and \
        last.count('stopped:') == 1, proc.stderr[-2000:]


def test_a_file_size_limit_is_named_and_loses_nothing(data_dir, tmp_path):
    """Under a shell's file-size limit (ulimit -f) smaller than a checkpoint, the write fails: train.py
    and fold.py name the limit and how to raise it (not a read-only file), and keep every file as it was."""
    import resource
    import subprocess
    import sys
    from conftest import ROOT
    half, full = tmp_path / 'half', tmp_path / 'full'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={half}', '--taper=internal', '--stop_iter=20')
    shutil.copytree(half, full)
    run('train.py', '--init_from=resume', f'--out_dir={full}', '--device=cpu')  # to g = 0: it folds
    before = {f: f.read_bytes() for folder in (half, full) for f in folder.iterdir()}
    limit = 300 * 1024  # below both checkpoints' sizes, above every other file's

    def limited(*args):
        return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    for proc in (limited('train.py', '--init_from=resume', f'--out_dir={half}', '--device=cpu', '--stop_iter=24'),
                 limited('fold.py', f'--out_dir={full}')):
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
        assert 'the file-size limit of this shell (ulimit -f) is 300 KB' in last and 'ulimit -f unlimited' in last
    assert {f: f.read_bytes() for folder in (half, full) for f in folder.iterdir()} == before


def test_a_run_whose_folder_changed_after_its_checks_stops_before_writing(data_dir, tmp_path):
    """A scratch run checks that out_dir holds no run, then spends its first evaluation and step before
    writing: a job submitted twice, whose other copy wrote its run meanwhile and ended, would replace that
    run. The folder is checked again at the first write: the run stops, and the other run's files stay."""
    import signal
    import subprocess
    import sys
    from conftest import ROOT

    def meanwhile(out_dir, files, *args):
        """train.py into out_dir, paused once its checks are done (the banner), while files are written."""
        proc = subprocess.Popen([sys.executable, 'train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out_dir}',
                                 '--eval_iters=100', *args], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        while line and 'parameters' not in line:  # its checks are done; its iter-0 evaluation begins
            line = proc.stdout.readline()
        os.kill(proc.pid, signal.SIGSTOP)
        out_dir.mkdir(exist_ok=True)
        for name, data in files.items():
            (out_dir / name).write_bytes(data)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=600)
        return proc.returncode, err

    out = tmp_path / 'run'
    other = {'ckpt.pt': b'the other run', 'log.jsonl': b'{"iter": 0}\n', 'config.json': b'{}'}
    code, err = meanwhile(out, other)
    assert code != 0 and 'Traceback' not in err, err[-2000:]
    assert f"ckpt.pt, config.json, log.jsonl in {out} changed after this run's checks" in err.strip().splitlines()[-1]
    assert {f.name: f.read_bytes() for f in out.iterdir()} == other
    # A figure plot.py writes beside the run meanwhile is not the run's: the run goes on, and it stays.
    beside = tmp_path / 'beside'
    code, err = meanwhile(beside, {'loss.png': b'a figure'}, '--max_iters=2', '--warmup_iters=1', '--taper_start=1',
                          '--taper_end=2', '--lr_decay_iters=2', '--eval_interval=2')
    assert code == 0 and (beside / 'loss.png').read_bytes() == b'a figure', err[-2000:]


def test_one_prepare_at_a_time_writes_a_data_folder(data_dir, tmp_path):
    """A prepare script beside another one writing the same folder stops with one sentence before
    it writes (two terminals, one folder), and a folder filled by another process between a prepare's
    checks and its first write is refused rather than written over under the old checks."""
    import fcntl
    from configurator import FolderLock
    from conftest import SHARED
    folder = tmp_path / 'data'
    shutil.copytree(data_dir, folder)
    before = {f: (folder / f).read_bytes() for f in os.listdir(folder)}
    fd = os.open(folder, os.O_RDONLY)  # the other prepare, holding the folder
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        for script, args in (('prepare_tinystories.py', [f"--input_file={SHARED / 'tinystories' / 'valid_sample.txt'}",
                                                         '--vocab_size=300']),
                             ('prepare_owt.py', [f"--input_file={SHARED / 'openwebtext' / 'sample.jsonl'}",
                                                 '--skip_pile'])):
            proc = run(script, *args, f'--out_dir={folder}', check=False)
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
            assert f'another {script} is writing into {folder}' in lines[-1], lines
    finally:
        os.close(fd)
    assert {f: (folder / f).read_bytes() for f in os.listdir(folder)} == before
    late = tmp_path / 'late'
    lock = FolderLock(str(late), 'prepare_tinystories.py')  # its checks see no folder
    os.makedirs(late)
    (late / 'train.bin').write_bytes(b'\0\0')  # another process's, meanwhile
    with pytest.raises(SystemExit, match='another process wrote into'):
        lock.hold()


def heeds_ctrl_c():
    """In a child about to start a script: the default actions of Ctrl-C and SIGHUP, which a shell that
    started the test run in the background (`cmd &`), or nohup, set to ignored, and the child would
    inherit."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize('how', ['SIGINT', 'SIGTERM', 'SIGUSR1', 'SIGXCPU'])
def test_ctrl_c_in_a_script_is_one_line(data_dir, tmp_path, how):
    """Ctrl-C (SIGINT), a scheduler's SIGTERM or SIGUSR1, or the SIGXCPU of a CPU-time limit in a script
    that does not train, here sample.py mid-output, stops it with one line on stderr through the scripts'
    shared hook: not a KeyboardInterrupt traceback, and not the signal's silent death."""
    import signal
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=4', '--lr_decay_iters=4',
        '--warmup_iters=1', '--taper_start=1', '--taper_end=3', '--eval_interval=4')
    proc = subprocess.Popen([sys.executable, '-u', 'sample.py', f'--out_dir={out}', '--device=cpu', '--num_samples=1000',
                             '--max_new_tokens=60'], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=heeds_ctrl_c)
    while '---' not in proc.stdout.readline():  # its first sample is out; the rest fill an unread pipe: it waits
        pass
    proc.send_signal(getattr(signal, how))
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    said = {'SIGINT': 'interrupted (Ctrl-C)', 'SIGTERM': 'terminated (SIGTERM)',
            'SIGUSR1': "SIGUSR1 (a scheduler's warning that the job's time is up?)",
            'SIGXCPU': 'the CPU-time limit (ulimit -t) ran out (SIGXCPU)'}[how]
    assert proc.returncode != 0 and lines == [f"sample.py stopped: {said}"], err[-2000:]


@pytest.mark.parametrize('how', ['Ctrl-C to the job', 'kill -9'])
def test_a_prepare_stopped_while_its_workers_tokenize_leaves_none_behind(tmp_path, how):
    """prepare_tinystories.py tokenizes in worker processes (datasets' map). Ctrl-C from the terminal reaches
    the whole job: it stops with its own one line, not a traceback per worker. kill -9 of the script alone
    takes its workers with it, where they had lived on holding the data folder's lock, so that every rerun
    was told to wait for them. Either way no worker is left, and the same command then finishes the folder."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT, SHARED
    text = tmp_path / 'stories.txt'
    text.write_text(open(SHARED / 'tinystories' / 'train_sample.txt', encoding='utf-8').read() * 6, encoding='utf-8')
    command = [sys.executable, 'prepare_tinystories.py', f'--input_file={text}', '--vocab_size=512', '--num_proc=2',
               f"--val_file={SHARED / 'tinystories' / 'valid_sample.txt'}", f"--out_dir={tmp_path / 'data'}"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: (heeds_ctrl_c(), os.setpgrp()))  # a job of its own, as a shell makes
    group = lambda: subprocess.run(['pgrep', '-g', str(proc.pid)], capture_output=True, text=True).stdout.split()
    for _ in range(1200):  # its workers are up: the vocabulary is written, and they tokenize
        if len(group()) > 1 or proc.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(0.5)
    assert proc.poll() is None and len(group()) > 1, "the prepare ended before its workers could be stopped"
    if how == 'kill -9':
        proc.kill()
    else:
        os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    if how != 'kill -9':
        assert proc.returncode != 0 and lines == ['prepare_tinystories.py stopped: interrupted (Ctrl-C)'], err[-3000:]
    for _ in range(100):  # every worker of the job gone
        left = group()
        if not left:
            break
        time.sleep(0.1)
    assert not left, f"workers left behind: {left}"
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and (tmp_path / 'data' / 'meta.json').is_file(), again.stderr[-2000:]


def test_a_datasets_cache_that_cannot_be_written_is_one_sentence(tmp_path):
    """HF_DATASETS_CACHE naming a folder that exists but cannot be written (chattr +i: root too; a read-only
    mount) stops a prepare script with one sentence before datasets tries its lock file there (a filelock
    PermissionError traceback)."""
    import subprocess
    from conftest import SHARED
    cache = tmp_path / 'cache'
    cache.mkdir()
    if subprocess.run(['chattr', '+i', str(cache)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system that keeps the attribute)")
    try:
        proc = run('prepare_owt.py', f"--input_file={SHARED / 'openwebtext' / 'sample.jsonl'}", '--skip_pile',
                   f"--out_dir={tmp_path / 'data'}", check=False, env={'HF_DATASETS_CACHE': str(cache)})
    finally:
        subprocess.run(['chattr', '-i', str(cache)], check=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith(f'HF_DATASETS_CACHE={cache} cannot be '
                                                                            f'written'), proc.stderr[-2000:]
    assert not (tmp_path / 'data').exists()


def test_a_resume_in_a_folder_that_cannot_be_written_says_to_copy_the_run(data_dir, tmp_path):
    """A run's folder that cannot be written (a read-only mount; chattr +i here) cannot take the resumed
    run's checkpoints: the sentence says to copy the run elsewhere and resume the copy, not to choose another
    folder (which holds no checkpoint); the copy, resumed as said, trains."""
    import subprocess
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--stop_iter=8')
    if subprocess.run(['chattr', '+i', str(out)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system that keeps the attribute)")
    try:
        proc = run('train.py', '--init_from=resume', f'--out_dir={out}', check=False)
    finally:
        subprocess.run(['chattr', '-i', str(out)], check=True)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "copy the run's folder to a place you may write" in lines[0]
    copy, flag = re.search(r"`cp -r (\S+) (\S+)`, then --out_dir=(\S+)\)", lines[0]).groups()[1:]
    assert flag == copy
    copy = tmp_path / 'copied'  # the advice's own place is the system's temporary folder: here, one of the test's
    subprocess.run(['cp', '-r', str(out), str(copy)], check=True)
    run('train.py', '--init_from=resume', f'--out_dir={copy}', '--stop_iter=12')


def test_a_signal_after_a_scripts_last_line_changes_nothing():
    """A signal that arrives as the interpreter exits, the script's work done, runs its handler inside an
    exit callback: it says nothing and raises nothing there (which Python would print as a traceback),
    while the same signal under the script's own code stops it."""
    import subprocess
    import sys
    from conftest import ROOT
    script = ("import atexit, signal, sys, configurator\n"
              "atexit.register(lambda: configurator.stopped(signal.SIGTERM, sys._getframe()))\n"
              "try:\n"
              "    configurator.stopped(signal.SIGTERM, sys._getframe())\n"
              "except configurator.Stopped as e:\n"
              "    print('stopped:', e)\n")
    proc = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == '', proc.stderr
    assert proc.stdout == 'stopped: terminated (SIGTERM)\n'
    # After the last exit callback the interpreter puts back each handled signal's default action (a
    # SIGXCPU would then kill it without a word): a script's signals are ignored by then.
    script = ("import atexit, os, signal, sys\n"
              "atexit.register(lambda: print(signal.getsignal(signal.SIGXCPU) == signal.SIG_IGN))  # runs last\n"
              "sys.modules['__main__'].__file__ = os.path.join(os.getcwd(), 'a_script.py')  # one of the repository's\n"
              "import configurator\n"
              "print(signal.getsignal(signal.SIGXCPU) is configurator.stopped)\n")
    proc = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, 'True\nTrue\n', ''), proc.stderr


@pytest.mark.parametrize('how', ['SIGTERM', 'SIGINT'])
def test_a_stopped_reproduction_stops_its_runs_and_starts_no_more(data_dir, tmp_path, how):
    """A scheduler's SIGTERM, or a Ctrl-C sent to reproduce.py alone, stops the training run under way
    (Ctrl-C: it keeps its last checkpoint) and starts none of the queued ones; one line says so."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT
    runs = tmp_path / 'runs'
    proc = subprocess.Popen([sys.executable, 'reproduce.py', f'--data_dir={data_dir}', f'--out_root={runs}',
                             '--bench_prompt=16', '--bench_new=8',
                             '--seeds=1', '--settings=baseline,internal', '--', '--vocab_size=512', '--n_layer=2',
                             '--block_size=64', '--max_iters=100000', '--lr_decay_iters=100000', '--warmup_iters=8',
                             '--taper_start=8', '--taper_end=90000', '--eval_interval=20', '--eval_iters=2'],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=heeds_ctrl_c)
    line = proc.stdout.readline()
    while line and 'iter ' not in line:  # the first run is training
        line = proc.stdout.readline()
    proc.send_signal(getattr(signal, how))
    out, err = proc.communicate(timeout=300)
    time.sleep(1)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode != 0 and lines == ["reproduce.py stopped: interrupted while training; the runs under way stopped at their "
                                              "last checkpoint, and the same command goes on from there"], err[-2000:]
    assert 'internal' not in out and not (runs / 'internal-s1').exists()  # the queued run never started
    still = [p for p in os.listdir('/proc') if p.isdigit() and str(runs) in open(f'/proc/{p}/cmdline', 'rb').read()
             .decode(errors='replace')]
    assert still == []  # no training run left behind


def test_a_reproduction_stopped_before_training_says_what_it_was_doing(tmp_path):
    """A stop of reproduce.py while it prepares its data names that stage, not runs that never started,
    and leaves no data folder half-written: the same command starts it again."""
    import signal
    import subprocess
    import sys
    from conftest import ROOT, SHARED, require_shared
    require_shared()
    proc = subprocess.Popen([sys.executable, 'reproduce.py', f"--input_file={SHARED / 'tinystories' / 'train_sample.txt'}",
                             f'--data_dir={tmp_path / "data"}', f'--out_root={tmp_path / "runs"}', '--seeds=1',
                             '--settings=baseline,internal', '--', '--vocab_size=512'],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=heeds_ctrl_c)
    line = proc.stdout.readline()
    while line and 'prepare_tinystories.py' not in line:  # preparing the data
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode != 0 and lines == ["reproduce.py stopped: interrupted while preparing the data; the "
                                              "finished runs are kept, and the same command goes on from there"], err
    assert not (tmp_path / 'runs').exists() and not (tmp_path / 'data' / 'val.bin').exists()


def test_one_fold_at_a_time_folds_a_checkpoint(data_dir, tmp_path):
    """A fold.py beside another one folding the same checkpoint stops with one sentence before it writes
    (both would write the same staging file; the loser blamed permissions). Its staging names are its
    own: a user's folder 'export.tmp' beside the export 'export' is left alone."""
    import fcntl
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--taper=all')
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    fd = os.open(out / 'ckpt.pt', os.O_RDONLY)  # the other fold, under way
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        proc = run('fold.py', f'--out_dir={out}', check=False)
    finally:
        os.close(fd)
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert f"another fold.py is folding {out / 'ckpt.pt'} right now" in proc.stderr.strip().splitlines()[-1]
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    run('fold.py', f'--out_dir={out}')  # once the other has ended
    export = tmp_path / 'export'
    (tmp_path / 'export.tmp').mkdir()  # the user's own folder, of the name a staging folder once had
    (tmp_path / 'export.tmp' / 'notes.txt').write_text('mine')
    staging = tmp_path / '.export.fold-tmp'  # the other fold, exporting into the same folder
    staging.mkdir()
    (staging / 'config.json').write_text('{"model_type": "llama"}')
    fd = os.open(staging, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        proc = run('fold.py', f'--out_dir={out}', '--out=ckpt_folded_2.pt', f'--export_hf={export}', check=False)
    finally:
        os.close(fd)
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert f'another fold.py is exporting into {export} right now' in proc.stderr.strip().splitlines()[-1]
    assert (staging / 'config.json').read_text() == '{"model_type": "llama"}' and not export.exists()
    shutil.rmtree(staging)
    run('fold.py', f'--out_dir={out}', '--out=ckpt_folded_2.pt', f'--export_hf={export}')
    assert (tmp_path / 'export.tmp' / 'notes.txt').read_text() == 'mine'  # a user's folder, never taken for staging
    assert sorted(f.name for f in tmp_path.iterdir()) == ['export', 'export.tmp', 'run']  # no staging left
    (export / 'notes.txt').write_text('the user\'s, put there since')  # an export folder is never replaced with it
    before = {f.name: f.read_bytes() for f in export.iterdir()}
    proc = run('fold.py', f'--out_dir={out}', '--out=ckpt_folded_2.pt', f'--export_hf={export}', check=False)
    assert proc.returncode != 0 and 'holds notes.txt, which the export does not write' in proc.stderr
    assert {f.name: f.read_bytes() for f in export.iterdir()} == before


def test_a_second_train_py_in_a_running_runs_folder_stops(data_dir, tmp_path):
    """One train.py at a time in out_dir: a job submitted twice (a resume, or an --overwrite) beside a
    run in progress stops with one sentence, and the running one goes on to its own end."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT
    out = tmp_path / 'run'
    first = subprocess.Popen([sys.executable, 'train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}',
                              '--max_iters=100000', '--lr_decay_iters=100000', '--taper_end=90000'],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # its first checkpoint, at iter 20
            if (out / 'ckpt.pt').exists() or first.poll() is not None:
                break
            time.sleep(0.2)
        seconds = [run('train.py', '--init_from=resume', f'--out_dir={out}', '--device=cpu', '--stop_iter=60',
                       check=False),  # bounded: were it let in, it would end soon and say nothing of the other
                   run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--overwrite', check=False)]
        assert first.poll() is None, first.stderr.read()
    finally:
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    for second in seconds:
        assert second.returncode != 0 and 'Traceback' not in second.stderr
        assert f'another train.py is running in {out}' in second.stderr.strip().splitlines()[-1]
    assert 'interrupted at iter' in err  # the first was stopped by the test, not by the others


@pytest.mark.parametrize('stdout', ['closed', 'full'])
def test_a_run_whose_output_fails_goes_on_training(data_dir, tmp_path, stdout):
    """`train.py | head` closes the pipe, and /dev/full fails every write: the run is not its printing,
    so it trains to its end and keeps its checkpoint and log, with one note on stderr."""
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / 'run'
    target = subprocess.PIPE if stdout == 'closed' else open('/dev/full', 'w')
    proc = subprocess.Popen([sys.executable, 'train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}',
                             '--log_interval=1'], cwd=ROOT, stdout=target, stderr=subprocess.PIPE, text=True)
    if stdout == 'closed':
        proc.stdout.readline()  # the reader takes one line, as `head -1` does, and goes
        proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, err[-2000:]
    assert f"standard output {'closed' if stdout == 'closed' else 'failed (No space left on device)'}, so it goes on " \
           f"without printing: the run folder's log.jsonl keeps every row" in err
    rows = [json.loads(line) for line in open(out / 'log.jsonl')]
    assert rows[-1]['iter'] == 40 and 'val_loss' in rows[-1]


def test_a_killed_reproduction_leaves_no_run_training(data_dir, tmp_path):
    """kill -9 of reproduce.py, which no handler sees: the training run it started stops with it (the
    kernel's signal on its parent's death), rather than training on unseen."""
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT
    runs = tmp_path / 'runs'
    proc = subprocess.Popen([sys.executable, 'reproduce.py', f'--data_dir={data_dir}', f'--out_root={runs}',
                             '--bench_prompt=16', '--bench_new=8', '--seeds=1', '--settings=baseline,internal', '--',
                             '--vocab_size=512', '--n_layer=2', '--block_size=64', '--max_iters=100000',
                             '--lr_decay_iters=100000', '--warmup_iters=8', '--taper_start=8', '--taper_end=90000',
                             '--eval_interval=20', '--eval_iters=2'],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    while line and 'iter ' not in line:  # the first run is training
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    def training():
        return [p for p in os.listdir('/proc') if p.isdigit() and os.path.exists(f'/proc/{p}/cmdline') and
                str(runs) in open(f'/proc/{p}/cmdline', 'rb').read().decode(errors='replace')]
    for _ in range(600):
        if not training():
            break
        time.sleep(0.1)
    assert training() == []


def test_a_divergence_names_the_taper_when_g_0_was_already_broken(data_dir, tmp_path):
    """The advice after a divergence follows its cause. A model whose g = 0 evaluation was already
    non-finite (d = 512 and 8 layers, tapered over two steps) diverges as g reaches 0, at any learning
    rate: the advice is a longer taper. A learning rate too high for a model still at g = 0.5, whose
    g = 0 evaluations were finite, gets the advice to lower it."""
    common = ['--device=cpu', f'--data_dir={data_dir}', '--max_iters=4', '--eval_interval=2', '--eval_iters=1',
              '--log_interval=1', '--batch_size=2', '--block_size=32', '--warmup_iters=1', '--lr_decay_iters=4',
              '--taper_start=1', '--taper_end=3']
    broken = run('train.py', 'config/taper_all_512.py', *common, f'--out_dir={tmp_path / "wide"}', check=False)
    assert broken.returncode == 1 and 'a later taper_end gives it time' in broken.stderr, broken.stderr[-2000:]
    assert 'try a lower learning_rate' not in broken.stderr
    rate = run('train.py', *common, '--vocab_size=512', '--n_layer=2', '--n_head=4', '--n_embd=64', '--taper=all',
               '--learning_rate=0.1', '--batch_size=8', '--block_size=64', f'--out_dir={tmp_path / "fast"}', check=False)
    assert rate.returncode == 1 and 'try a lower learning_rate' in rate.stderr, rate.stderr[-2000:]


@pytest.mark.parametrize('change', ['folder renamed', 'folder removed', 'log removed', 'log emptied'])
def test_a_run_folder_changed_under_a_running_run_is_named(data_dir, tmp_path, change):
    """Another terminal renames or deletes the run folder, or deletes its log, while the run trains: the
    run stops at its next log write with one sentence (never a traceback from its roll-back), and a
    renamed run, or one whose log went, resumes from its last checkpoint."""
    import shutil
    import signal
    import subprocess
    import sys
    import time
    from conftest import ROOT
    out = tmp_path / 'run'
    proc = subprocess.Popen([sys.executable, str(ROOT / 'train.py'), *TINY, f'--data_dir={data_dir}', f'--out_dir={out}',
                             '--max_iters=400', '--lr_decay_iters=400', '--taper_end=300', '--eval_interval=20'],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while not (out / 'ckpt.pt').exists() or len(rows(out)) < 8:  # past the first checkpoint (iter 20)
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.2)
    proc.send_signal(signal.SIGSTOP)  # the change lands between two of its writes
    moved = tmp_path / 'moved'
    {'folder renamed': lambda: out.rename(moved), 'folder removed': lambda: shutil.rmtree(out),
     'log removed': lambda: (out / 'log.jsonl').unlink(), 'log emptied': lambda: (out / 'log.jsonl').write_text('')}[change]()
    proc.send_signal(signal.SIGCONT)
    err = proc.communicate(timeout=120)[1]
    lines = err.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in err, err
    assert {'log removed': 'was removed while the run trained', 'log emptied': 'was cut short while the run trained'}.get(
        change, f'{out} is gone') in lines[0]
    if change != 'folder removed':
        folder = moved if change == 'folder renamed' else out
        if change == 'log emptied':  # as the sentence says
            (out / 'log.jsonl').rename(tmp_path / 'what_was_left.jsonl')
        run('train.py', '--init_from=resume', f'--out_dir={folder}', '--stop_iter=60')
        assert rows(folder)[-1]['iter'] == 60


def test_a_script_whose_output_fails_keeps_its_files_or_says_so(data_dir, tmp_path):
    """Standard output on a full device: a script whose work is files (fold.py here) writes them all, with
    one note; a script whose work is what it prints (sample.py) stops with one sentence naming standard
    output, never a full disk it does not write to."""
    import subprocess
    import sys
    from conftest import ROOT
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=4', '--lr_decay_iters=4',
        '--warmup_iters=1', '--taper_start=1', '--taper_end=3', '--eval_interval=4')
    for script, args in (('fold.py', [f'--out_dir={out}']), ('sample.py', [f'--out_dir={out}', '--device=cpu'])):
        with open('/dev/full', 'w') as full:
            proc = subprocess.run([sys.executable, script, *args], cwd=ROOT, stdout=full, stderr=subprocess.PIPE,
                                  text=True, timeout=300)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and 'Traceback' not in proc.stderr and 'disk is full' not in proc.stderr, proc.stderr
        if script == 'fold.py':
            assert proc.returncode == 0 and (out / 'ckpt_folded.pt').exists()
            assert "standard output failed (No space left on device), so it goes on" in lines[0]
        else:
            assert proc.returncode == 1 and lines[0].startswith('sample.py stopped: its standard output failed')


def test_a_folder_in_use_is_refused_by_fold_train_and_gpu_check(data_dir, tmp_path):
    """fold.py into a run folder where a train.py is training (it holds the folder's lock: here this test
    holds it, as train.py does), or gpu_check.py into a folder another check is writing: one sentence,
    nothing written. A fold written elsewhere goes on beside the running run. While a fold.py folds a
    run's checkpoint (it holds the file's lock: here this test does, and a second fold.py is refused by
    it), train.py neither writes a new run over that run nor resumes it."""
    import fcntl
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=4', '--lr_decay_iters=4',
        '--warmup_iters=1', '--taper_start=1', '--taper_end=3', '--eval_interval=4')
    (tmp_path / 'check').mkdir()
    before = sorted(os.listdir(out))
    for folder in (out, tmp_path / 'check'):
        fd = os.open(folder, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            proc = run(*(('fold.py', f'--out_dir={out}') if folder == out else
                         ('gpu_check.py', '--device=cpu', '--only=data', f'--out_dir={folder}')), check=False, fresh=True)
            elsewhere = run('fold.py', f'--out_dir={out}', f'--out={tmp_path / "folded.pt"}') if folder == out else None
        finally:
            os.close(fd)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 1 and len(lines) == 1, proc.stderr
        assert ('a train.py is training in' if folder == out else 'another gpu_check.py is writing into') in lines[0]
        assert elsewhere is None or (tmp_path / 'folded.pt').exists()
    assert sorted(os.listdir(out)) == before and os.listdir(tmp_path / 'check') == []
    (tmp_path / 'starting').mkdir()  # a run there has not written its first checkpoint yet
    fd = os.open(tmp_path / 'starting', os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        proc = run('fold.py', f'--out_dir={tmp_path / "starting"}', check=False)
    finally:
        os.close(fd)
    assert proc.returncode == 1 and 'has not written its first checkpoint' in proc.stderr, proc.stderr
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    fd = os.open(out / 'ckpt.pt', os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        procs = [run('fold.py', f'--out_dir={out}', check=False),
                 run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--overwrite', check=False),
                 run('train.py', '--init_from=resume', f'--out_dir={out}', '--max_iters=6', check=False)]
    finally:
        os.close(fd)
    said = ['another fold.py is folding', *[f'a fold.py is folding {out}/ckpt.pt right now: wait for it to end'] * 2]
    for proc, words in zip(procs, said):
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 1 and len(lines) == 1 and words in lines[0], proc.stderr
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before


def test_a_fold_refused_by_an_append_only_folder_is_one_sentence_and_changes_nothing(data_dir, tmp_path):
    """chattr +a: fold.py may create its ckpt_folded.pt.tmp in the run's folder but neither rename nor
    remove it. It stops with the sentence of the failed write (no traceback from its clean-up), and every
    file the folder held before is as it was."""
    import subprocess
    folder = tmp_path / 'run'
    run('train.py', *TINY, '--max_iters=8', '--warmup_iters=2', '--taper_start=2', '--taper_end=6',
        '--lr_decay_iters=8', '--eval_interval=4', f'--data_dir={data_dir}', f'--out_dir={folder}')
    before = {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in os.listdir(folder)}
    if subprocess.run(['chattr', '+a', str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +a is not available here (needs root and a file system that keeps the attribute)")
    try:
        proc = run('fold.py', f'--out_dir={folder}', check=False)
    finally:
        subprocess.run(['chattr', '-a', str(folder)], check=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr
    assert lines[0].startswith(f'cannot write {folder}/ckpt_folded.pt') and 'nothing was changed (only' in lines[0]
    assert {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in before} == before


# --- a full disk while a prepare script writes tokens, and an export whose old folder fold.py may not replace:
# --- one sentence, and every file that was there before is kept byte for byte

def run_broken(breakage, script, *args):
    """script with args in a process of its own, after breakage: Python code that makes a call of the os
    or io layer fail as a machine's does (a test cannot fill a disk or make a file immutable everywhere)."""
    import subprocess
    import sys
    from conftest import ROOT
    code = (f"{breakage}\nimport runpy, sys\nsys.argv[0] = {str(ROOT / script)!r}\n"
            f"runpy.run_path(sys.argv[0], run_name='__main__')\n")
    return subprocess.run([sys.executable, '-c', code, *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


# A disk with FREE bytes left under FOLDER, as the kernel fills one: a short write, then ENOSPC; a reservation
# (posix_fallocate) larger than what is left, ENOSPC. Stores into a memory map are no writes, here as on a real
# disk, where they kill the process with SIGBUS once it has no room for their pages.
FULL_DISK = '''
import builtins, errno, io, os
FOLDER, FREE = {folder!r}, {free}
def full(needed):
    if needed > FREE:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
class Disk(io.FileIO):
    def write(self, b):
        global FREE
        full(1)
        n = super().write(memoryview(b).cast('B')[:FREE])
        FREE -= n
        return n
real_open, real_fallocate = builtins.open, os.posix_fallocate
def on_disk(file, mode='r', *args, **kwargs):
    if isinstance(file, (str, os.PathLike)) and 'b' in mode and set(mode) & set('wax+') and \\
            os.path.abspath(file).startswith(FOLDER + os.sep):
        raw = Disk(file, mode.replace('b', ''))
        return io.BufferedRandom(raw) if '+' in mode else io.BufferedWriter(raw)
    return real_open(file, mode, *args, **kwargs)
def fallocate(fd, offset, length):
    global FREE
    full(length)
    real_fallocate(fd, offset, length)
    FREE -= length
builtins.open, os.posix_fallocate = on_disk, fallocate
'''


@pytest.mark.parametrize('script', ['prepare_tinystories.py', 'prepare_owt.py'])
def test_a_disk_that_fills_while_a_token_file_is_written_is_one_sentence_and_costs_no_file(data_dir, tmp_path, script):
    """The disk fills while a prepare script writes val.bin into a folder it prepared before (16 KB left,
    less than the file): it stops with the one full-disk sentence, no traceback (prepare_tinystories.py
    once died of SIGBUS writing through a memory map), removes its val.bin.tmp, and every file the
    folder held is byte for byte as it was."""
    from conftest import SHARED
    out = tmp_path / 'data'
    if script == 'prepare_tinystories.py':  # as conftest's data_dir was prepared
        shutil.copytree(data_dir, out)
        args = [f"--input_file={SHARED / 'tinystories' / 'train_sample.txt'}",
                f"--val_file={SHARED / 'tinystories' / 'valid_sample.txt'}", '--vocab_size=512']
    else:
        with open(SHARED / 'openwebtext' / 'sample.jsonl') as f:
            (tmp_path / 'docs.jsonl').write_text(''.join(next(f) for _ in range(200)))
        args = [f"--input_file={tmp_path / 'docs.jsonl'}", '--skip_pile', '--val_fraction=0.2']
        run(script, *args, f'--out_dir={out}', '--num_proc=1')
    (out / 'val.bin').unlink()  # the stage the full disk stops
    before = digest(out)
    proc = run_broken(FULL_DISK.format(folder=str(out), free=16 << 10), script, *args, f'--out_dir={out}',
                      '--num_proc=1')
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert lines == [f"{script} stopped: the disk is full: free some space (df -h shows it), or write to a folder "
                     f"on another disk"], proc.stderr[-2000:]
    assert digest(out) == before  # no val.bin.tmp, nor any file changed


@pytest.fixture(scope='module')
def exported(data_dir, tmp_path_factory):
    """An All-Taper run at g = 0 (folder 'run'), folded and exported by fold.py (folder 'export')."""
    root = tmp_path_factory.mktemp('exported')
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root / "run"}', '--taper=all')
    run('fold.py', f'--out_dir={root / "run"}', f'--export_hf={root / "export"}')
    return root


def test_an_export_over_one_with_a_file_fold_may_not_replace_is_refused_and_keeps_it(exported, tmp_path):
    """fold.py --export_hf into its own earlier export, one file of which cannot be replaced (immutable,
    chattr +i, which stops root too; read-only, chmod, for anyone else): refused before anything is written,
    in one sentence that says the old export is kept, with every file of the run and the export as it was
    (the export was once removed file by file up to that one, which alone was left)."""
    import subprocess
    root = tmp_path / 'copy'
    shutil.copytree(exported, root)  # a run copied with its export: fold.py replaces it (the same run_id)
    before = {folder: digest(root / folder) for folder in ('run', 'export')}
    kept = root / 'export' / 'config.json'
    if os.geteuid() != 0:
        kept.chmod(0o444)
    elif subprocess.run(['chattr', '+i', str(kept)], capture_output=True).returncode != 0:
        pytest.skip("root opens a read-only file for writing, and chattr +i is not available here")
    try:
        proc = run('fold.py', f'--out_dir={root / "run"}', f'--export_hf={root / "export"}', check=False)
    finally:
        if os.geteuid() == 0:
            subprocess.run(['chattr', '-i', str(kept)], check=True)
        kept.chmod(0o644)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith(f"export_hf={root / 'export'} cannot be replaced whole: {kept} does not open for "
                               f"writing") and 'the old export there is kept as it was' in lines[0], lines[0]
    assert sorted(os.listdir(root)) == ['export', 'run']  # no staging folder left
    assert {folder: digest(root / folder) for folder in ('run', 'export')} == before


# The first move of a folder onto the export's name fails, as a disk that fills right then makes it fail.
MOVE_FAILS = '''
import errno, os
EXPORT, failed = {export!r}, []
def failing(real):
    def move(src, dst, *args, **kwargs):
        if os.path.abspath(dst) == EXPORT and os.path.isdir(src) and not failed:
            failed.append(src)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), src, None, dst)
        return real(src, dst, *args, **kwargs)
    return move
os.rename, os.replace = failing(os.rename), failing(os.replace)
'''


def test_an_export_whose_move_into_place_fails_keeps_the_old_one(exported, tmp_path):
    """The new export is written whole aside, and its move into the old one's place fails: the old export
    is every byte as it was (it once was removed before the move), the one sentence says it is kept, and
    no staging folder, nor the old export's, is left behind."""
    root = tmp_path / 'copy'
    shutil.copytree(exported, root)
    before = {folder: digest(root / folder) for folder in ('run', 'export')}
    proc = run_broken(MOVE_FAILS.format(export=str(root / 'export')), 'fold.py', f'--out_dir={root / "run"}',
                      '--out=ckpt_folded_2.pt', f'--export_hf={root / "export"}')
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith(f"cannot write {root / 'export'} (the disk is full") and \
        f"the export was not, and the old export in {root / 'export'} is kept as it was" in lines[0], lines[0]
    assert sorted(os.listdir(root)) == ['export', 'run']  # neither the new export's folder nor the old one's aside
    assert digest(root / 'export') == before['export']
    assert {f: h for f, h in digest(root / 'run').items() if f != 'ckpt_folded_2.pt'} == before['run']

# --- a run stopped or failing at its save: the roll-back (train.py) ------------------------------------

SAVE_HOOK = '''
import errno, os, signal, time, builtins
import torch
mode = os.environ['SAVE_HOOK']
real_save, real_open = torch.save, builtins.open
full = []


def save(obj, f, *args, **kwargs):
    if str(f).endswith('ckpt.pt.tmp') and mode == 'signal':  # stopped mid-write: part of the file is there
        with real_open(f, 'wb') as out:
            out.write(b'PK' + bytes(600))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    if str(f).endswith('ckpt.pt.tmp') and mode == 'full':  # the disk fills as the checkpoint is written
        full.append(True)
        raise OSError(errno.ENOSPC, 'No space left on device', str(f))
    return real_save(obj, f, *args, **kwargs)


def open_(file, mode_='r', *args, **kwargs):  # once full, no new file gets a byte
    if full and str(file).endswith('.tmp') and 'w' in mode_:
        raise OSError(errno.ENOSPC, 'No space left on device', str(file))
    return real_open(file, mode_, *args, **kwargs)


torch.save, builtins.open = save, open_
'''


def hooked_env(tmp_path, mode):
    """An environment whose python runs SAVE_HOOK first (sitecustomize): the save of ckpt.pt meets a
    SIGTERM part-way ('signal'), or a disk that fills as it is written ('full')."""
    hook = tmp_path / 'hook'
    hook.mkdir(exist_ok=True)
    (hook / 'sitecustomize.py').write_text(SAVE_HOOK)
    return {'PYTHONPATH': f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", 'SAVE_HOOK': mode}


def folder_bytes(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize('resume', [False, True])
def test_a_stop_while_the_checkpoint_is_written_leaves_the_folder_as_it_says(data_dir, tmp_path, resume):
    """'out_dir is as it was' / 'as of its last checkpoint' hold to the byte after a SIGTERM that lands
    while torch.save writes ckpt.pt.tmp: the half-written .tmp goes with the roll-back, on a scratch
    run's first save and on a resume's next one."""
    out = tmp_path / 'run'
    out.mkdir()
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=8', '--warmup_iters=2',
            '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8', '--eval_interval=4']
    if resume:
        run('train.py', *args, '--stop_iter=4')
    before = folder_bytes(out)
    stopped = run('train.py', *args, *(['--init_from=resume'] if resume else []), check=False,
                  env=hooked_env(tmp_path, 'signal'))
    assert stopped.returncode == 1 and 'Traceback' not in stopped.stderr, stopped.stderr[-2000:]
    said = 'as of its last checkpoint (iter 4)' if resume else 'is as it was'
    assert said in stopped.stderr, stopped.stderr
    assert folder_bytes(out) == before and not (out / 'ckpt.pt.tmp').exists()


def test_a_full_disk_at_the_save_puts_the_log_and_config_back_in_place(data_dir, tmp_path):
    """A resume whose checkpoint meets a full disk says the folder is as of its last checkpoint, and it
    is, to the byte: the log and config.json the resume had rewritten are put back over themselves in
    place (a copy beside them would need the space the disk lacks)."""
    out = tmp_path / 'run'
    args = [*TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--max_iters=8', '--warmup_iters=2',
            '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8', '--eval_interval=4']
    run('train.py', *args, '--stop_iter=4')
    before = folder_bytes(out)
    failed = run('train.py', '--init_from=resume', f'--out_dir={out}', '--device=cpu', check=False,
                 env=hooked_env(tmp_path, 'full'))
    lines = [line for line in failed.stderr.splitlines() if line.strip()]
    assert failed.returncode == 1 and len(lines) == 1 and 'Traceback' not in failed.stderr, failed.stderr[-2000:]
    assert 'the disk is full' in lines[0] and 'as of its last checkpoint (iter 4)' in lines[0], lines
    assert folder_bytes(out) == before


def test_a_divergence_of_the_training_loss_names_the_learning_rate_even_when_g_0_fails_with_it(data_dir, tmp_path):
    """A resume mid-taper at a learning rate far too high, stopped (--stop_iter) at the evaluation where its
    training loss has gone non-finite: the g = 0 evaluation taken then fails with it, and is no evidence
    against the taper, so the advice is the learning rate."""
    out = tmp_path / 'run'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={out}', '--stop_iter=20')
    broken = run('train.py', '--init_from=resume', f'--out_dir={out}', '--device=cpu', '--learning_rate=1e4',
                 '--stop_iter=24', check=False)
    assert broken.returncode == 1 and 'try a lower learning_rate' in broken.stderr, broken.stderr[-2000:]
    assert 'taper_end' not in broken.stderr


def test_a_data_folder_a_prepare_is_writing_is_said_by_every_reader(data_dir, tmp_path):
    """A data folder held by a prepare script's lock (configurator.FolderLock, taken here by a process of its
    own as a prepare stopped with Ctrl-Z holds it) is not read half-written: train.py and diagnose.py
    (evaluate.py reads it the same way, tokens.open_tokens) say that a prepare is writing it, and to wait."""
    import subprocess
    import sys
    held, trained = tmp_path / 'data', tmp_path / 'trained'
    shutil.copytree(data_dir, held)
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={trained}', '--max_iters=4', '--warmup_iters=1',
        '--taper_start=1', '--taper_end=3', '--lr_decay_iters=4', '--eval_interval=4')
    holder = subprocess.Popen([sys.executable, '-c', 'import fcntl, os, sys, time; fd = os.open(sys.argv[1], '
                               'os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); print("held", flush=True); '
                               'time.sleep(120)', str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        for script, args in (('train.py', [*TINY, f'--data_dir={held}', f'--out_dir={tmp_path / "run"}']),
                             ('diagnose.py', [f'--out_dir={trained}', f'--data_dir={held}'])):
            proc = run(script, *args, check=False)
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            assert proc.returncode == 1 and len(lines) == 1, (script, proc.stderr[-2000:])
            assert f'is writing {held} right now: wait for it to end' in lines[0], (script, lines)
        assert not (tmp_path / 'run').exists()
    finally:
        holder.kill()
        holder.wait()
