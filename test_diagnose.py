"""
diagnose.py finds where a norm-free model fails: with one embedding row inflated, for a token never
seen in training, the report must point at that token and show the residual stream growing through
the layers at its position.
"""

import contextlib
import io
import json
import os
from dataclasses import asdict

import numpy as np
import pytest
import torch

import diagnose
from conftest import run
from fold import fold_model, reset_unseen_embeddings
from model import GPT, GPTConfig

V, K, T = 256, 77, 64  # vocabulary, the inflated token, window length


def norm_free_model_with_an_inflated_row(scale=30.0):
    """An All-Taper model at g = 0 (no norm anywhere), whose embedding row K is scale times too large."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=V, n_layer=4, n_head=4, n_embd=64, block_size=T, taper='all',
                          aux_loss='fixed'))
    for _ in range(3):  # calibrate c at g = 1
        model(torch.randint(0, V, (4, T)), torch.randint(0, V, (4, T)))
        model.step_emas()
    model.start_taper()
    model.set_gate(0.0)
    with torch.no_grad():
        model.transformer.wte.weight[K] *= scale
    return model.eval()


def token_files():
    """Training tokens without K; validation windows with K once, in window 5 at position 10."""
    rng = np.random.default_rng(0)
    train = rng.integers(0, V, 20_000).astype(np.uint16)
    train[train == K] = 0
    val = rng.integers(0, V, T * 20 + 1).astype(np.uint16)
    val[val == K] = 1
    val[T * 5 + 10] = K
    return train, val


def test_diagnostic_points_at_the_inflated_unseen_token():
    model = norm_free_model_with_an_inflated_row().double()
    train, val = token_files()
    report = diagnose.diagnose(model, val, np.bincount(train, minlength=V), window=T, max_windows=20)
    # the per-window cross-entropy, written out: -log softmax(logits)[target], averaged over the window
    with torch.no_grad():
        idx = torch.from_numpy(val[:20 * T + 1].astype(np.int64))
        x, y = idx[:-1].view(20, T), idx[1:].view(20, T)
        logits = model(x)[0]
        logp = logits - logits.logsumexp(dim=-1, keepdim=True)
        ce = -logp.gather(-1, y[..., None])[..., 0].mean(dim=1).numpy()
    # float64 on both sides, but two code paths: equal to rounding, relative to the value's scale
    assert report['median'] == pytest.approx(np.median(ce), rel=1e-12)
    assert report['outliers'] == 1 and report['unseen_tokens'] == 1
    worst = report['worst'][0]
    assert worst['window'] == 5 and worst['ce'] == pytest.approx(ce[5], rel=1e-12) and worst['suspect'] == K
    # it stands out on every count: its norm, its absence from training, and the counterfactual, whose
    # CE is the window's re-scored with K's input row set to the mean seen row (written out here)
    with torch.no_grad():
        mean_row = model.transformer.wte.weight[torch.from_numpy(np.bincount(train, minlength=V) > 0)].mean(dim=0)
        x5 = torch.from_numpy(val[5 * T:6 * T].astype(np.int64))
        emb = model.transformer.wte.weight[x5].clone()
        emb[x5 == K] = mean_row
        hook = model.transformer.wte.register_forward_hook(lambda m, a, out: emb[None])
        logits = model(x5[None])[0][0]
        hook.remove()
        cf = -(logits - logits.logsumexp(-1, keepdim=True)).gather(-1, y[5][:, None]).mean().item()
    assert [t['reset_ce'] for t in worst['tokens'] if t['id'] == K][0] == pytest.approx(cf, rel=1e-9)
    assert cf < 2 * report['median'] and len(worst['reasons']) == 3
    assert worst['growth_block'] == 1 and report['weight_block'] is None  # it grows from block 1 on
    top = worst['tokens'][0]
    assert top['id'] == K and top['position'] == 10 and top['train_count'] == 0
    assert top['embedding_norm_ratio'] > 10
    norms = worst['residual_norm']  # embedding, then after each of the 4 blocks
    assert len(norms) == 5 and all(b > a for a, b in zip(norms, norms[1:])) and norms[-1] > 1e4 * norms[0]


def test_a_healthy_model_has_no_suspect_and_no_flagged_block():
    """The same model without the inflated row: no window stands out, so no token is named, and no
    block grows the residual beyond its usual."""
    model = norm_free_model_with_an_inflated_row(scale=1.0).double()
    train, val = token_files()
    report = diagnose.diagnose(model, val, np.bincount(train, minlength=V), window=T, max_windows=20)
    assert report['outliers'] == 0 and report['weight_block'] is None
    assert all(w['suspect'] is None and not w['stands_out'] and w['growth_block'] is None for w in report['worst'])


def test_a_blown_up_weight_is_named_as_its_block_and_blames_no_token():
    """Block 2's MLP output matrix 1000x too large: every window grows there, so the report names
    block 2 from the residual norms (its growth at a typical position, written out here) and no token."""
    model = norm_free_model_with_an_inflated_row(scale=1.0).double()
    with torch.no_grad():
        model.transformer.h[2].mlp.w2.weight *= 1000
    train, val = token_files()
    report = diagnose.diagnose(model, val, np.bincount(train, minlength=V), window=T, max_windows=20)
    assert report['weight_block'] == 2 and all(w['suspect'] is None for w in report['worst'])
    outs = []
    hooks = [b.register_forward_hook(lambda m, a, out: outs.append((a[0].norm(dim=-1), out.norm(dim=-1))))
             for b in model.transformer.h]
    with torch.no_grad():
        model(torch.from_numpy(val[:20 * T].astype(np.int64)).view(20, T))
    for h in hooks:
        h.remove()
    growth = [float((after / before).median()) for before, after in outs]
    assert growth[2] > 10 * float(np.median(growth)) and max(growth[:2]) < 10 * float(np.median(growth))


def test_diagnose_script_reports_on_a_checkpoint(tmp_path):
    """The command on a checkpoint whose config names its data folder: the JSON line points at K,
    the report names it in words, and the residual plot is written."""
    model = norm_free_model_with_an_inflated_row()
    train, val = token_files()
    train.tofile(tmp_path / 'train.bin')
    val.tofile(tmp_path / 'val.bin')
    torch.save(dict(model=model.state_dict(), model_args=asdict(model.config),
                    config=dict(data_dir=str(tmp_path)), tokenizer=None), tmp_path / 'ckpt.pt')
    proc = run('diagnose.py', f'--out_dir={tmp_path}', '--window=64', f'--plot={tmp_path / "residual.png"}')
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report['worst'][0]['suspect'] == K
    assert f'suspect token {K}' in proc.stdout and '0 times in training' in proc.stdout
    assert (tmp_path / 'residual.png').stat().st_size > 5_000
    folded = run('fold.py', f'--out_dir={tmp_path}', '--reset_unseen')  # the mitigation, from the command line
    assert 'reset the input embeddings of 1 tokens' in folded.stdout
    proc = run('diagnose.py', f'--out_dir={tmp_path}', '--ckpt=ckpt_folded.pt', '--window=64')
    assert json.loads(proc.stdout.strip().splitlines()[-1])['outliers'] == 0


def test_resetting_unseen_embeddings_removes_the_blow_up_and_nothing_else():
    """The mitigation: in a folded All-Taper model (its head untied), the input rows of tokens absent
    from training are set to the mean seen row. The exploding window comes back to the typical loss;
    every window without such a token keeps its logits exactly. A tied model is refused."""
    model = norm_free_model_with_an_inflated_row().double()
    train, val = token_files()
    counts = np.bincount(train, minlength=V)
    with pytest.raises(ValueError, match='tied'):
        reset_unseen_embeddings(model, counts)
    folded = fold_model(model)
    idx = torch.stack([diagnose.window_tokens(val, w, T) for w in range(20)])[:, :-1]
    before = folded(idx)[0]
    assert reset_unseen_embeddings(folded, counts) == 1
    seen_rows = model.transformer.wte.weight[torch.from_numpy(counts > 0)]
    assert torch.equal(folded.transformer.wte.weight[K], seen_rows.mean(dim=0))
    after = folded(idx)[0]
    untouched = [w for w in range(20) if w != 5]
    assert torch.equal(before[untouched], after[untouched])
    report = diagnose.diagnose(folded, val, counts, window=T, max_windows=20)
    assert report['outliers'] == 0 and report['non_finite'] == 0


def test_reproduction_docs_are_what_reproduce_py_wrote():
    """Every table row of the results in docs/reproduction.md and the README is a line of
    assets/results.md, which reproduce.py wrote, and the diagnostic's report shown there is
    assets/diagnose.txt's."""
    from conftest import ROOT
    doc = (ROOT / 'docs' / 'reproduction.md').read_text()
    results = doc[:doc.index('# Where a norm-free model fails')]
    readme = (ROOT / 'README.md').read_text()
    written = set((ROOT / 'assets' / 'results.md').read_text().splitlines())
    rows = [line for line in results.splitlines() if line.startswith('| ')]
    assert len(rows) > 10 and [row for row in rows if row not in written] == []
    section = readme[readme.index('## CPU-scale results'):readme.index('## Your own Llama model')]
    readme_rows = [line for line in section.splitlines() if line.startswith('| ')]
    assert len(readme_rows) >= 4 and [row for row in readme_rows if row not in written] == []
    report = [line for line in results.split('```text')[1].split('```')[0].splitlines() if line.strip()]
    assert report and set(report) <= set((ROOT / 'assets' / 'diagnose.txt').read_text().splitlines())
    # the training-loss gaps shown are what the snippet beside them prints from the committed logs
    snippet, after = results.split('```python\n')[1].split('```\n', 1)
    shown = after.split('```\n')[1]  # the next fenced block: its output
    printed = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(printed):
            exec(snippet, {})
    finally:
        os.chdir(cwd)
    assert printed.getvalue().splitlines() == shown.splitlines()[1:]  # after its header line


def test_every_figure_of_the_results_redraws_from_the_committed_logs(tmp_path):
    """plot.py draws the figures of docs/reproduction.md again from assets/runs, the copies of the
    runs' logs that reproduce.py keeps in the repository, with the commands the docs give."""
    from conftest import ROOT
    runs = sorted((ROOT / 'assets' / 'runs').iterdir())
    paper = [r for r in runs if r.name.rsplit('-s', 1)[0] in ('baseline', 'internal', 'all')]
    assert len(paper) == 9 and len(runs) > len(paper)
    assert run('plot.py', *paper, f'--out_dir={tmp_path}').stdout.count('wrote') == 3
    assert run('plot.py', *runs, f'--out_dir={tmp_path}', '--prefix=ablations_').stdout.count('wrote') == 3
    doc = (ROOT / 'docs' / 'reproduction.md').read_text()
    for figure in ('loss', 'logit_norm', 'grad_norms', 'ablations_loss', 'ablations_logit_norm', 'ablations_grad_norms'):
        assert (tmp_path / f'{figure}.png').stat().st_size > 10_000 and f'(../assets/{figure}.png)' in doc


def brute_force_confidence(model, val, n):
    """prelogit_confidence written out in numpy float64: z from the model, then CE on a dense grid of
    temperatures, with and without every z rescaled to the mean RMS."""
    with torch.no_grad():
        idx = torch.from_numpy(val[:n * T + 1].astype(np.int64))
        x, y = idx[:-1].view(n, T), idx[1:].view(n, T).numpy()
        z = model.transformer.ln_f(model.trunk(x)).double().numpy()
    W = model.lm_head.weight.detach().double().numpy()
    rms = np.sqrt((z ** 2).mean(-1, keepdims=True))

    def ce(logits, t):
        logits = t * logits
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -np.take_along_axis(logp, y[..., None], -1).mean()
    grid = np.arange(0.25, 4.0, 0.005)
    logits, logits_one_rms = z @ W.T, (z / rms * rms.mean()) @ W.T
    return dict(cv=rms.std(ddof=1) / rms.mean(), ce=ce(logits, 1.0), ce_tempered=min(ce(logits, t) for t in grid),
                ce_one_rms=min(ce(logits_one_rms, t) for t in grid))


def half_predictable(n, seed):
    """A token stream in which each token below V/2 is followed by the next id, and any other by a
    random one: a model can be sure of half its predictions and must guess the rest."""
    rng = np.random.default_rng(seed)
    s = np.zeros(n, np.int64)
    for i in range(1, n):
        s[i] = s[i - 1] + 1 if s[i - 1] < V // 2 - 1 else rng.integers(0, V)
    return s


def trained_norm_free_model(steps=80):
    """A tiny All-Taper model trained at g = 0 (no norm, no scale loss) on half_predictable text."""
    torch.manual_seed(0)
    np.random.seed(0)
    train = half_predictable(40_000, 0)
    model = GPT(GPTConfig(vocab_size=V, n_layer=2, n_head=4, n_embd=64, block_size=T, taper='all', aux_loss='none'))

    def batch():
        x = torch.from_numpy(np.stack([train[j:j + T + 1] for j in np.random.randint(0, len(train) - T - 1, 16)]))
        return x[:, :-1], x[:, 1:]
    for _ in range(3):  # calibrate c at g = 1, then train norm-free
        model(*batch())
        model.step_emas()
    model.start_taper()
    model.set_gate(0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(steps):
        loss = model(*batch())[1]
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return model.eval().double()


@pytest.mark.parametrize('taper', ['none', 'all'])
def test_prelogit_confidence_is_the_formula_and_zero_behind_a_final_norm(taper):
    """What the length of the head's input is worth (diagnose.prelogit_confidence, used by reproduce.py)
    equals the formula brute-forced in numpy; behind a final norm (Baseline) the length is one for every
    token (cv ~ 0) and taking it away costs nothing; a norm-free model trained where half its
    predictions are sure puts its confidence in that length, and loses CE without it."""
    if taper == 'none':
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=V, n_layer=2, n_head=4, n_embd=64, block_size=T)).eval().double()
        _, val = token_files()
    else:
        model, val = trained_norm_free_model(), half_predictable(8 * T + 1, 1).astype(np.uint16)
    got = diagnose.prelogit_confidence(model, val, T, 8, batch_size=3)
    want = brute_force_confidence(model, val, 8)
    for key in ('cv', 'ce', 'ce_tempered', 'ce_one_rms'):
        assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-5), key
    if taper == 'none':
        assert got['cv'] < 1e-2 and got['ce_one_rms'] == pytest.approx(got['ce_tempered'], rel=1e-6)
    else:
        assert got['cv'] > 0.1 and got['ce_one_rms'] > got['ce_tempered'] + 0.05
