"""
The scripts, end to end on real TinyStories text (../shared/data): data preparation, training in
every setting of the paper, exact resume, DDP, the errors a user can cause, and the figures.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import prepare_tinystories
from model import GPT

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent / 'shared' / 'data'
os.environ.setdefault('TIKTOKEN_CACHE_DIR', str(SHARED / 'tiktoken'))  # GPT-2 BPE offline
TINY = ['--device=cpu', '--vocab_size=512', '--n_layer=2', '--n_head=4', '--n_embd=64',
        '--block_size=64', '--batch_size=8', '--max_iters=40', '--warmup_iters=8', '--taper_start=8',
        '--taper_end=32', '--lr_decay_iters=40', '--eval_interval=20', '--eval_iters=4',
        '--log_interval=4', '--learning_rate=3e-3']


def run(script, *args, torchrun=0, check=True):
    launcher = [sys.executable]
    if torchrun:
        launcher += ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={torchrun}']
    proc = subprocess.run(launcher + [str(ROOT / script), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def train_defaults():
    """train.py's defaults: the block between its two rulers, run on its own."""
    ruler = '# ' + '-' * 77
    namespace = {}
    exec((ROOT / 'train.py').read_text().split(ruler)[1], namespace)
    return {k: v for k, v in namespace.items() if not k.startswith('_')}


def read_log(out_dir):
    rows = [json.loads(line) for line in open(Path(out_dir) / 'log.jsonl')]
    return [r for r in rows if 'lr' in r], [r for r in rows if 'val_loss' in r]


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
    """prepare_tinystories.py on the local sample, with a 512-token vocab."""
    out = tmp_path_factory.mktemp('tinystories512')
    prepare_tinystories.main(['--input_file', str(SHARED / 'tinystories' / 'train_sample.txt'),
                              '--val_file', str(SHARED / 'tinystories' / 'valid_sample.txt'),
                              '--vocab_size', '512', '--out_dir', str(out), '--num_proc', '2'])
    return out


def test_prepare_tinystories(data_dir, capsys):
    import sentencepiece as spm
    meta = json.load(open(data_dir / 'meta.json'))
    assert meta['vocab_size'] == 512 and meta['bos_id'] == 1
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


def test_resume_continues_the_same_run_bitwise(data_dir, tmp_path):
    """20 steps, resume, 20 steps = 40 straight steps: identical weights, optimizer and log."""
    straight, split = tmp_path / 'straight', tmp_path / 'split'
    common = [*TINY, f'--data_dir={data_dir}', '--taper=all', '--aux_loss=fixed']
    run('train.py', *common, f'--out_dir={straight}')
    run('train.py', *common, f'--out_dir={split}', '--max_iters=20')  # same schedules: ends at 20
    run('train.py', *common, f'--out_dir={split}', '--init_from=resume')
    a = torch.load(straight / 'ckpt.pt', weights_only=True)
    b = torch.load(split / 'ckpt.pt', weights_only=True)
    assert a['iter_num'] == b['iter_num'] == 40
    for key in a['model']:
        assert torch.equal(a['model'][key], b['model'][key]), key
    state_a, state_b = a['optimizer']['state'], b['optimizer']['state']
    assert state_a.keys() == state_b.keys()
    for name in state_a:
        assert all(torch.equal(state_a[name][k], state_b[name][k]) for k in state_a[name]), name
    (train_a, evals_a), (train_b, evals_b) = read_log(straight), read_log(split)
    assert [r['iter'] for r in train_a] == [r['iter'] for r in train_b]  # the log continues, no repeats
    assert [r['loss'] for r in train_a] == [r['loss'] for r in train_b]
    assert [r['val_loss'] for r in evals_a] == [r['val_loss'] for r in evals_b]


def test_ddp_and_fsdp_match_one_process(data_dir, tmp_path):
    """torchrun with 2 gloo ranks, each drawing its own half of the batch, follows the loss curve of
    one process with the same global batch (2 micro-batches of accumulation), replicated (DDP) or
    sharded (FSDP2); the FSDP run's checkpoint is gathered whole and loads like any other."""
    common = [*TINY, f'--data_dir={data_dir}', '--taper=internal', '--aux_loss=fixed',
              '--gradient_accumulation_steps=2', '--max_iters=24']
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


def test_user_errors_give_one_sentence(data_dir, tmp_path):
    """A typo in a config key, a missing data folder, a NaN loss and an incompatible checkpoint each
    stop with one line that says what to do; the last good checkpoint survives the NaN."""
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "out"}', '--max_iters=20')
    cases = [
        ([f'--data_dir={data_dir}', '--learing_rate=1e-3'], "unknown config key 'learing_rate'",
         "did you mean 'learning_rate'"),
        (['--data_dir=' + str(tmp_path / 'nodata')], 'not found', 'prepare_tinystories.py'),
        ([f'--data_dir={data_dir}', '--init_from=resume', '--learning_rate=1e30'], 'training loss is nan',
         'out/ckpt.pt (iter 20), is kept'),
    ]
    for args, *phrases in cases:
        proc = run('train.py', *TINY, f'--out_dir={tmp_path / "out"}', *args, check=False)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr
        assert all(p in last for p in phrases), last
    kept = torch.load(tmp_path / 'out' / 'ckpt.pt', weights_only=True)
    assert kept['iter_num'] == 20 and all(torch.isfinite(v).all() for v in kept['model'].values()
                                          if v.is_floating_point())
    proc = run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={tmp_path / "out"}',
               '--init_from=resume', '--n_embd=32', check=False)
    assert 'cannot resume' in proc.stderr and 'n_embd=64' in proc.stderr and 'Traceback' not in proc.stderr
    with pytest.raises(ValueError, match="arch='llama', not arch='gpt2'"):
        GPT.from_checkpoint(str(tmp_path / 'out' / 'ckpt.pt'), arch='gpt2')
    (tmp_path / 'junk.pt').write_bytes(b'not a checkpoint')
    with pytest.raises(ValueError, match='could not be read'):
        GPT.from_checkpoint(str(tmp_path / 'junk.pt'))


def test_config_files_parse_and_read_like_the_paper():
    """Every TinyStories config of the paper exists and sets the paper's row (App. C)."""
    from configurator import configure
    steps = {64: 500_000, 128: 500_000, 256: 750_000, 512: 1_000_000}
    for d, n in steps.items():
        for name, taper in (('baseline', 'none'), ('taper_internal', 'internal'), ('taper_all', 'all')):
            cfg = configure(train_defaults(), [str(ROOT / 'config' / f'{name}_{d}.py')])
            assert (cfg['n_embd'], cfg['max_iters'], cfg['taper']) == (d, n, taper)
            assert cfg['warmup_iters'] == n // 20 and cfg['learning_rate'] == 3e-4
            assert cfg['batch_size'] * cfg['gradient_accumulation_steps'] == 16
            assert cfg['ema_rate'] == 0.01 and cfg['aux_loss'] == ('none' if taper == 'none' else 'fixed')
            if taper != 'none':
                assert (cfg['taper_start'], cfg['taper_end']) == (n // 20, n)


def test_plot_makes_the_papers_figures(runs, tmp_path):
    import plot
    written = plot.main([str(runs / name) for name in SETTINGS] + ['--out_dir', str(tmp_path)])
    assert {Path(p).name for p in written} == {'loss.png', 'logit_norm.png', 'grad_norms.png'}
    assert all(os.path.getsize(p) > 10_000 for p in written)


# --- fold.py, sample.py, bench.py ------------------------------------------------------------------

@pytest.mark.parametrize('name', ['internal_aux', 'all_aux'])
def test_fold_script_on_a_trained_run(runs, name):
    """fold.py writes a folded checkpoint beside the trained one, prints |delta logits| < 1e-5, and
    the folded checkpoint loads through the same loader."""
    proc = run('fold.py', f'--out_dir={runs / name}')
    diff = float(re.search(r'\| = (\S+) on ', proc.stdout).group(1))
    assert diff < 1e-5, proc.stdout
    folded = GPT.from_checkpoint(str(runs / name / 'ckpt_folded.pt'))
    assert folded.config.folded and folded.tapered_norms() == []


def test_fold_script_refuses_a_baseline(runs):
    proc = run('fold.py', f'--out_dir={runs / "baseline"}', check=False)
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr
    assert 'no tapered norm' in proc.stderr.strip().splitlines()[-1]


def test_sample_script_decodes_with_the_runs_tokenizer(runs):
    """sample.py prints text from a checkpoint and from its folded version; greedy decoding gives the
    same text from both (the folded model is the g = 0 model)."""
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
    sampled = run('sample.py', f'--out_dir={runs / "internal_aux"}', '--device=cpu', '--num_samples=1',
                  '--max_new_tokens=10', '--top_k=5', '--start=FILE:' + str(SHARED / 'tinystories' / 'valid_sample.txt'),
                  check=False)
    assert sampled.returncode != 0 and 'shorten --start' in sampled.stderr  # a prompt beyond the context


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
    assert meta['vocab_size'] == 50257 and meta['eot_token'] == 50256
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
                 '--fakeln_start=(2,6,9,13)', '--fakeln_gap=(1,1,1)', '--fakeln_eot_end=14',
                 '--eval_interval=8', '--eval_iters=2', '--log_interval=2', '--dtype=float32']


@pytest.fixture(scope='module')
def finetuned(owt_dir, tiny_gpt2, tmp_path_factory):
    root = tmp_path_factory.mktemp('finetune')
    for proto in ('vanilla', 'fakeln', 'internaltaper', 'alltaper'):
        extra = ['--grad_checkpoint'] if proto == 'alltaper' else []
        run('train.py', ROOT / 'config' / f'finetune_gpt2_s_{proto}.py', *FINETUNE_TINY, *extra,
            f'--init_from={tiny_gpt2}', f'--data_dir={owt_dir}', f'--out_dir={root / proto}')
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
        steps = {name: m.removed_at.item() for name, m in model.named_modules() if hasattr(m, 'removed_at')}
        expected = {'transformer.ln_f': 13}
        for i in range(2):
            expected.update({f'transformer.h.{i}.ln_2': 2 + i, f'transformer.h.{i}.ln_1': 6 + i,
                             f'transformer.h.{i}.ln_1v': 9 + i})
        assert steps == expected
        assert [r['removed'] for r in train_rows] == [0, 1, 2, 3, 4, 6, 6, 7]  # iters 0, 2, ..., 14
        assert model.config.aux_loss == 'baroni'
    else:
        assert evals[-1]['eval_gate'] == 0.0 and model.gate.item() == 0.0
    proc = run('fold.py', f'--out_dir={finetuned / proto}')
    assert float(re.search(r'\| = (\S+) on ', proc.stdout).group(1)) < 1e-5


def test_evaluate_script_prints_table3(finetuned, owt_dir):
    """evaluate.py scores OWT-val, Pile and Pile-filtered as the mean CE over 1024-token chunks; a
    folded checkpoint scores what the g = 0 model does."""
    common = [f'--data_dir={owt_dir}', '--device=cpu', '--max_chunks=3', '--batch_size=2']
    plain = run('evaluate.py', f'--out_dir={finetuned / "internaltaper"}', *common)
    folded = run('evaluate.py', f'--out_dir={finetuned / "internaltaper"}', '--ckpt=ckpt_folded.pt', *common)
    a, b = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (plain, folded))
    assert a['label'].startswith('Internal-TaperLN') and a['chunks'] == {'owt': 3, 'pile': 3, 'pile_filtered': 3}
    for key in ('owt', 'pile', 'pile_filtered'):
        assert 5 < a[key] < 12 and a[key] == pytest.approx(b[key], abs=1e-4)


def test_reproduce_script_end_to_end(tmp_path):
    """reproduce.py on the local TinyStories sample with a shortened schedule: every setting trains,
    the tapered ones fold without changing their validation loss, the decoding benchmark and the
    figures are written."""
    out = run('reproduce.py', '--input_file', SHARED / 'tinystories' / 'train_sample.txt',
              '--val_file', SHARED / 'tinystories' / 'valid_sample.txt', f'--data_dir={tmp_path / "data"}',
              f'--out_root={tmp_path / "runs"}', f'--assets={tmp_path / "assets"}', '--val_windows=8',
              '--bench_prompt=16', '--bench_new=8', '--', '--n_layer=2', '--block_size=64', '--max_iters=24',
              '--warmup_iters=8', '--taper_start=8', '--taper_end=24', '--lr_decay_iters=24', '--eval_interval=12',
              '--eval_iters=2', '--log_interval=4', '--learning_rate=1e-3').stdout
    results = json.load(open(tmp_path / 'assets' / 'results.json'))
    assert set(results['settings']) == {'baseline', 'internal', 'all', 'all-noaux'}
    assert results['settings']['baseline']['median'] > 0 and '| Baseline |' in out
    for fold in results['fold'].values():  # float32 rounding relative to the logits; exact in float64
        assert fold['max_logit_diff'] < 1e-5 * max(1.0, fold['max_logit'])
        assert fold['max_logit_diff_float64'] < 1e-10 * max(1.0, fold['max_logit'])
        assert fold['val_ce_folded'] == pytest.approx(fold['val_ce'], rel=1e-6, abs=1e-5)
    assert {r['variant'] for r in results['bench']} == {'baseline', 'fused'}
    assert all((tmp_path / 'assets' / f).stat().st_size > 10_000 for f in ('loss.png', 'logit_norm.png', 'grad_norms.png'))
