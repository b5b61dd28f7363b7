"""
gpu_check.py's orchestration on the CPU, at toy size: its steps run the real scripts, read their
results into the report, record a failing step and go on to the next. On a GPU the same steps run
the CUDA paths.
"""

import json
import re
import subprocess
import sys

import pytest
import torch

from conftest import ROOT  # run as a script, conftest says how to run the tests


def gpu_check(*args):
    return subprocess.run([sys.executable, str(ROOT / 'gpu_check.py'), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.skipif(torch.cuda.is_available(), reason='this machine has CUDA')
def test_without_cuda_it_stops_with_one_sentence():
    proc = gpu_check()
    assert proc.returncode == 1 and proc.stderr.strip().count('\n') == 0
    assert 'CUDA is not available' in proc.stderr


def test_steps_run_the_scripts_and_a_failure_does_not_stop_the_rest(tmp_path):
    steps = 'data,train_eager,bench,finetune_alltaper,fold_alltaper'  # ddp, fsdp: as test_train's torchrun tests
    proc = gpu_check('--device=cpu', f'--out_dir={tmp_path}', f'--only={steps}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = {r['step']: r for r in json.load(open(tmp_path / 'report.json'))['steps']}
    assert list(report) == steps.split(',') and all(r['ok'] for r in report.values())
    train = report['train_eager']['metrics']
    assert train['loss_last'] < train['loss_first'] and train['gates'][0] == 0.0 and train['plan_gb'] > 0
    assert train['tok_per_s'] > 0
    bench = report['bench']['metrics']['table']
    assert bench[0]['mode'] == 'eager' and {'baseline', 'unfused', 'fused'} <= bench[0].keys()
    fold = report['fold_alltaper']['metrics']
    assert fold['ce_folded'] == pytest.approx(fold['ce'], rel=1e-5)  # float32 on the CPU
    md = (tmp_path / 'report.md').read_text()
    assert '| fold_alltaper | ok |' in md and '## Decoding (bench.py)' in md

    # every script now runs out of time: both steps fail, are recorded, and the others' results stay
    proc = gpu_check('--device=cpu', f'--out_dir={tmp_path}', '--only=train_eager,fold_alltaper', '--timeout=1')
    assert proc.returncode == 1 and 'failed: train_eager, fold_alltaper' in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]  # one sentence, the first failure's own
    assert len(lines) == 1 and lines[0].startswith('2 of 5 steps failed, first train_eager: `train.py` ran past '
                                                   '--timeout=1 s and was stopped: raise --timeout'), proc.stderr
    again = {r['step']: r for r in json.load(open(tmp_path / 'report.json'))['steps']}
    assert list(again) == steps.split(',')
    assert [s for s, r in again.items() if not r['ok']] == ['train_eager', 'fold_alltaper']
    assert 'ran past --timeout=1 s and was stopped: raise --timeout' in again['fold_alltaper']['error']
    assert 'traceback' not in again['fold_alltaper'] and again['bench'] == report['bench']


def test_a_failed_step_is_reported_by_the_sentence_on_stderr_not_the_last_log_row():
    """A script says why it stopped on stderr; its stdout's last line is only its last log row (the
    first GPU run's report showed `iter 80 lr ...` for a diverged run)."""
    script = ("import sys; sys.argv = ['gpu_check.py', '--device=cpu']; import gpu_check\n"
              "try:\n"
              "    gpu_check.sh('-c', 'import sys; print(\"iter 80 loss 3.19\"); sys.exit(\"the model diverged\")')\n"
              "except gpu_check.StepFailed as e:\n"
              "    print(e)\n")
    proc = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith('exited with 1: the model diverged'), proc.stdout


def test_the_help_names_every_step_by_the_name_only_takes():
    """--help's table of steps uses the names --only takes (it once said 'finetune', 'fold' and
    'distributed', which --only refuses)."""
    import ast
    tree = ast.parse((ROOT / 'gpu_check.py').read_text())
    steps = next(ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', None) == 'STEPS')
    table = ast.get_docstring(tree).split('\n\n')[3]
    named = set(re.findall(r'^  (\w+(?:, \w+)*)', table, re.M))
    assert {s for line in named for s in line.split(', ')} | {'data'} == set(steps)
