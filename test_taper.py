"""
Numerical checks of the paper's claims, run against the code in this repository.
Each test names the equation, proposition or equivalence it checks. Run: python -m pytest
"""

import math
from dataclasses import asdict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import pretrained_layernorm_std, train_namespace
from fold import fold_model
from hf import from_pretrained
from model import (GPT, EMA, GPTConfig, LayerNorm, RMSNorm, TaperLN, TaperNorm, fixed_target_loss)

D = 16  # feature width for the single-layer tests


def tiny_config(**kw):
    base = dict(n_layer=2, n_head=4, n_embd=32, vocab_size=64, block_size=32)
    base.update(kw)
    return GPTConfig(**base)


def calibrated(norm, steps=5, scale=3.0):
    """Run a few training-mode forwards at g = 1 so the calibration EMAs have data, then start."""
    norm.train()
    for _ in range(steps):
        norm(scale * torch.randn(4, 8, norm.weight.numel(), dtype=norm.weight.dtype))
        step_layer_emas(norm)
    norm.start_taper()
    return norm


def step_layer_emas(norm):
    """What GPT.step_emas does after each optimizer step, for one stand-alone layer."""
    norm.ema_num.step()
    norm.ema_den.step()


def set_layer_gate(norm, g):
    """What GPT.set_gate does, for one stand-alone layer."""
    norm.gate.fill_(g)
    norm.normalizing = g > 0


def random_affine(norm):
    with torch.no_grad():
        for p in norm.parameters():
            p.copy_(1 + 0.5 * torch.randn_like(p))
    return norm


class OpRecorder(TorchDispatchMode):
    """Records the name of every aten op that runs inside the context."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.__name__)
        return func(*args, **(kwargs or {}))


STATISTIC_OPS = ('sqrt', 'rsqrt', 'pow', 'div', 'norm', 'var', 'std')


def statistic_ops(ops):
    return [op for op in ops if any(s in op for s in STATISTIC_OPS)]


# --- 1. at g = 1 the tapered layers are the plain norms ------------------------------------------

@pytest.mark.parametrize('kind', ['rms', 'ln'])
def test_taper_at_gate_one_is_the_plain_norm(kind):
    """Eq. 3 / App. B at g = 1: TaperNorm = RMSNorm and TaperLN = LayerNorm, before and after taper
    start (F.rms_norm / F.layer_norm as references)."""
    gate = torch.ones(())
    norm = (TaperNorm if kind == 'rms' else TaperLN)(D, gate, bias=True)
    random_affine(norm)
    h = 3 * torch.randn(5, 7, D)

    def reference(x):
        if kind == 'rms':
            return F.rms_norm(x, (D,), norm.weight, norm.eps)
        return F.layer_norm(x, (D,), norm.weight, norm.bias, norm.eps)

    torch.testing.assert_close(norm(h), reference(h), rtol=0, atol=0)
    calibrated(norm)
    with torch.no_grad():
        norm.taper_weight.mul_(2.0)  # a different gammatilde must not matter at g = 1
    torch.testing.assert_close(norm(h), reference(h), rtol=0, atol=1e-6)
    plain = (RMSNorm if kind == 'rms' else LayerNorm)(D)
    plain.load_state_dict({k: v for k, v in norm.state_dict().items() if k in plain.state_dict()})
    torch.testing.assert_close(plain(h), reference(h), rtol=0, atol=0)


@pytest.mark.parametrize('kind', ['rms', 'ln'])
def test_taper_at_intermediate_gate_is_eq3(kind):
    """Eq. 3 (RMS) and App. B (LN) written out by hand, at g = 0.3."""
    norm = calibrated(random_affine((TaperNorm if kind == 'rms' else TaperLN)(D, torch.ones(()))))
    set_layer_gate(norm, 0.3)
    h = 2 * torch.randn(3, 4, D)
    g, c, gamma, gt = 0.3, norm.c, norm.weight, norm.taper_weight
    if kind == 'rms':
        r = torch.sqrt(h.pow(2).mean(-1, keepdim=True) + norm.eps)
        expected = g * h / r * gamma + (1 - g) * c * h * gt
    else:
        hbar = h - h.mean(-1, keepdim=True)
        sigma = torch.sqrt(hbar.pow(2).mean(-1, keepdim=True) + norm.eps)
        expected = norm.bias + g * hbar / sigma * gamma + (1 - g) * c * hbar * gt
    torch.testing.assert_close(norm(h), expected, rtol=1e-5, atol=1e-5)


# --- 2. at g = 0 a tapered layer is a fixed map with no per-token statistic ----------------------

@pytest.mark.parametrize('kind', ['rms', 'ln'])
def test_gate_zero_is_a_fixed_map_without_statistics(kind):
    """Sec. 3.3: TaperNorm(h; 0) = c h D_gammatilde, TaperLN(h; 0) = beta + c (h - mu) D_gammatilde,
    and neither r(h) nor sigma_h is computed (no sqrt, pow, division or norm op runs)."""
    norm = calibrated(random_affine((TaperNorm if kind == 'rms' else TaperLN)(D, torch.ones(()))))
    set_layer_gate(norm, 0.0)
    norm.eval()
    h = 5 * torch.randn(3, 4, D)
    with OpRecorder() as rec:
        y = norm(h)
    assert statistic_ops(rec.ops) == []
    if kind == 'rms':
        expected = norm.c * h * norm.taper_weight
    else:
        expected = norm.bias + norm.c * (h - h.mean(-1, keepdim=True)) * norm.taper_weight
    torch.testing.assert_close(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize('arch,norm', [('llama', 'rmsnorm'), ('gpt2', 'layernorm')])
def test_all_taper_model_at_gate_zero_computes_no_statistic(arch, norm):
    """A whole All-Taper model at g = 0 runs its forward pass without a single per-token statistic,
    while the Internal-Taper model computes exactly one norm: the final one."""
    for taper, expected_norm_ops in (('all', 0), ('internal', 1)):
        torch.manual_seed(0)
        model = GPT(tiny_config(arch=arch, norm=norm, taper=taper))
        model.train()
        idx = torch.randint(0, 64, (2, 16))
        model(idx)
        model.step_emas()
        model.start_taper()
        model.set_gate(0.0)
        model.eval()
        with OpRecorder() as rec:
            model(idx)
        # sdpa's softmax divides internally; count only norm-like ops outside attention
        found = [op for op in statistic_ops(rec.ops) if 'norm' in op or 'sqrt' in op]
        assert len(found) == expected_norm_ops, found


# --- 3. c from the EMAs is the least-squares optimum (eq. 4, App. A.5) ---------------------------

@pytest.mark.parametrize('kind', ['rms', 'ln'])
def test_calibrated_c_is_eq4_with_eps_and_delta(kind):
    """Eq. 4 (App. B for LN) with App. A.5's bias correction, written out here in float64:
    c = a_hat / (b_hat + delta), a = E|hbar D_gamma|^2 / s(h), b = E|hbar D_gamma|^2, with
    s(h) = sqrt(|hbar|^2 / d + eps), hbar = h (RMS) or h - mu_h (LN), and EMA weights
    mu (1 - mu)^(n - k) normalized by 1 - (1 - mu)^n. eps and delta are large enough to matter."""
    torch.manual_seed(0)
    mu, eps, delta = 0.2, 0.5, 0.3
    norm = (TaperNorm if kind == 'rms' else TaperLN)(D, torch.ones(()), ema_rate=mu, eps=eps).double()
    random_affine(norm)
    norm.train()
    stream = [(0.5 + 0.3 * k) * torch.randn(6, 5, D, dtype=torch.float64) + 0.3 * k for k in range(8)]
    for h in stream:
        norm(h)
        step_layer_emas(norm)
    gamma = norm.weight.detach()
    n = len(stream)
    a = b = 0.0
    for k, h in enumerate(stream):
        hbar = h - h.mean(-1, keepdim=True) if kind == 'ln' else h
        s = torch.sqrt((hbar ** 2).mean(-1) + eps)
        energy = ((hbar * gamma) ** 2).sum(-1)
        w = mu * (1 - mu) ** (n - 1 - k)
        a += w * (energy / s).mean().item()
        b += w * energy.mean().item()
    a, b = a / (1 - (1 - mu) ** n), b / (1 - (1 - mu) ** n)
    norm.start_taper(delta=delta)
    assert norm.c.item() == pytest.approx(a / (b + delta), rel=1e-12)
    torch.testing.assert_close(norm.taper_weight, norm.weight, rtol=0, atol=0)  # gamma -> gammatilde


@pytest.mark.parametrize('cls', [RMSNorm, LayerNorm, TaperNorm, TaperLN])
def test_scale_includes_eps_as_torch_norms_do(cls):
    """r(h) = sqrt(mean h^2 + eps) and sigma_h = sqrt(mean (h - mu)^2 + eps), the statistics of
    F.rms_norm and F.layer_norm, on inputs so small that eps dominates them."""
    eps = 1e-5
    norm = (cls(D, torch.ones(()), eps=eps) if cls in (TaperNorm, TaperLN) else cls(D, eps=eps)).double()
    h = 1e-4 * torch.randn(3, 4, D, dtype=torch.float64) + 2e-4
    if cls in (RMSNorm, TaperNorm):
        reference = norm.center(h) / F.rms_norm(h, (D,), None, eps)
        torch.testing.assert_close(norm.center(h), h, rtol=0, atol=0)
    else:
        reference = (h - h.mean(-1, keepdim=True)) / F.layer_norm(h, (D,), None, None, eps)
        torch.testing.assert_close(norm.center(h), h - h.mean(-1, keepdim=True), rtol=1e-12, atol=0)
    torch.testing.assert_close(norm.scale(h).expand_as(h), reference, rtol=1e-9, atol=0)
    assert norm.scale(h).min().item() > 0.9 * eps ** 0.5  # eps dominates: s(h) is about sqrt(eps)


def test_ema_bias_correction():
    """App. A.5: after n steps from s = 0, s / (1 - (1 - mu)^n) is the normalized weighted mean of the
    per-step batch means (the mean over a step's micro-batches)."""
    mu, xs = 0.1, torch.tensor([3.0, -1.0, 4.0, 1.5], dtype=torch.float64)
    ema = EMA(mu).double()
    for x in xs:
        ema.observe(x + 1)  # two micro-batches of one step: their mean is x
        ema.observe(x - 1)
        ema.step()
    w = torch.tensor([mu * (1 - mu) ** (len(xs) - 1 - k) for k in range(len(xs))], dtype=torch.float64)
    assert ema.corrected().item() == pytest.approx((w * xs).sum().item() / w.sum().item(), rel=1e-12)


def test_ema_updates_only_in_training_at_gate_one():
    """Sec. 3.4: the calibration statistics come from training steps while g = 1, and c is frozen."""
    norm = TaperNorm(D, torch.ones(()))
    norm.eval()
    norm(torch.randn(2, 3, D))
    assert norm.ema_num.pending_count.item() == 0
    calibrated(norm)
    c, n = norm.c.clone(), norm.ema_num.n.clone()
    set_layer_gate(norm, 0.5)
    norm.train()
    norm(torch.randn(2, 3, D))
    assert norm.ema_num.pending_count.item() == 0 and norm.ema_num.n.item() == n.item()
    assert norm.c.item() == c.item()
    with pytest.raises(RuntimeError, match='already'):
        norm.start_taper()


# --- 4. Propositions 1-3 ---------------------------------------------------------------------------

@pytest.mark.parametrize('cls', [RMSNorm, LayerNorm])
def test_prop1_final_norm_removes_radial_gradient(cls):
    """Prop. 1: with a 0-homogeneous final norm (eps = 0), <grad_h l(z, y), h> = 0."""
    torch.manual_seed(0)
    norm = random_affine(cls(D, eps=0.0).double())
    W = torch.randn(D, 11, dtype=torch.float64)
    for _ in range(5):
        h = (3 * torch.randn(1, D, dtype=torch.float64)).requires_grad_()
        loss = F.cross_entropy(norm(h) @ W, torch.randint(0, 11, (1,)))
        (grad,) = torch.autograd.grad(loss, h)
        assert abs((grad * h).sum().item()) < 1e-12 * grad.norm().item() * h.norm().item() + 1e-14
        assert grad.norm().item() > 1e-3  # the gradient itself is not zero: it is tangential


def test_prop2_without_final_norm_cross_entropy_pushes_norms_up():
    """Prop. 2 through the model: in an All-Taper model at g = 0 the final map is linear, z = h W_out,
    and the gradient of the model's own loss at its input h satisfies, for every token with margin
    m = z_y - max_{j != y} z_j > 0, <grad_h l, h> <= -(1 - p_y) m < 0: the loss grows |h|."""
    torch.manual_seed(0)
    model = prepared('llama', 'rmsnorm', 'all', 0.0).double()
    model.config.aux_loss = 'none'  # the cross-entropy alone, as in the proposition
    captured = {}

    def keep_input(module, args):
        args[0].retain_grad()
        captured['h'] = args[0]

    idx = torch.randint(0, 64, (4, 16))
    with torch.no_grad():
        targets = model(idx)[0].argmax(-1)  # positive margins
    model.transformer.ln_f.register_forward_pre_hook(keep_input)
    targets[:, ::2] = torch.randint(0, 64, (4, 8))  # and some of each sign
    logits, loss = model(idx, targets)
    loss.backward()
    h, grad = captured['h'].detach(), captured['h'].grad * targets.numel()  # per-token loss gradient
    z = logits.detach()
    z_y = z.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    others = z.scatter(-1, targets.unsqueeze(-1), float('-inf'))
    m = z_y - others.max(-1).values
    p_y = F.softmax(z, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    radial = (grad * h).sum(-1)
    positive = m > 0
    assert 0 < positive.sum() < positive.numel()
    bound = -(1 - p_y[positive]) * m[positive]
    assert (bound < 0).all()
    assert (radial[positive] <= bound + 1e-10 * bound.abs()).all()


@pytest.mark.parametrize('cls', [RMSNorm, LayerNorm])
def test_prop3_fixed_target_loss_is_a_radial_restoring_force(cls):
    """Prop. 3 (and App. A.4 for LN): grad_h lambda (s(h) - s_tgt)^2 = 2 lambda (s - s_tgt)/(d s) hbar,
    which shrinks |h| when s > s_tgt and grows it when s < s_tgt."""
    torch.manual_seed(0)
    norm, lam = cls(D).double(), 0.1
    for s_tgt in (0.5, 10.0):
        h = (2 * torch.randn(1, D, dtype=torch.float64) + 0.7).requires_grad_()
        s = norm.scale(h).squeeze(-1)
        (grad,) = torch.autograd.grad(fixed_target_loss(s, torch.tensor(s_tgt), lam), h)
        hbar = norm.center(h.detach())
        expected = 2 * lam * (s.item() - s_tgt) / (D * s.item()) * hbar
        torch.testing.assert_close(grad, expected, rtol=1e-10, atol=1e-14)
        radial = (grad * h.detach()).sum().item()
        assert (radial > 0) == (s.item() > s_tgt)


# --- 5. arch='gpt2' is HF GPT-2 --------------------------------------------------------------------

@pytest.fixture(scope='module')
def hf_gpt2_dir(tmp_path_factory):
    """A tiny random GPT-2 written with save_pretrained, as a user's local directory would be."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=64, vocab_size=97))
    with torch.no_grad():  # move every weight off its init so a mis-mapped tensor shows
        for p in hf.parameters():
            p.add_(0.1 * torch.randn_like(p))
    path = tmp_path_factory.mktemp('tiny-gpt2')
    hf.save_pretrained(path)
    return path


GPT2_REFUSALS = [  # GPT2Config fields that change the function, each refused by name from the config alone
    dict(activation_function='relu'), dict(scale_attn_weights=False), dict(scale_attn_by_inverse_layer_idx=True),
    dict(n_inner=96), dict(tie_word_embeddings=False), dict(add_cross_attention=True)]


@pytest.mark.parametrize('fields', GPT2_REFUSALS, ids=lambda f: next(iter(f)))
def test_gpt2_variants_that_change_the_function_are_refused_by_name(tmp_path, fields):
    from transformers import GPT2Config
    GPT2Config(n_layer=1, n_head=4, n_embd=32, n_positions=64, vocab_size=97, **fields).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=next(iter(fields))) as e:
        from_pretrained(tmp_path)
    assert str(e.value).count('\n') == 0


def test_gpt2_with_reordered_upcast_attention_loads_exactly(tmp_path):
    """reorder_and_upcast_attn changes where float16 rounds, not the function: transformers' logits in
    float32 are ours, relative to their scale."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=4, n_embd=32, n_positions=64, vocab_size=97,
                                    reorder_and_upcast_attn=True, attn_implementation='eager')).eval()
    hf.save_pretrained(tmp_path)
    idx = torch.randint(0, 97, (2, 40))
    with torch.no_grad():
        theirs = hf(idx).logits
        assert (from_pretrained(tmp_path).eval()(idx)[0] - theirs).abs().max() <= 1e-5 * theirs.abs().max()


def test_gpt2_logits_match_transformers(hf_gpt2_dir):
    """Our arch='gpt2' equals transformers' GPT2LMHeadModel on the same weights (float32)."""
    from transformers import GPT2LMHeadModel
    hf = GPT2LMHeadModel.from_pretrained(hf_gpt2_dir).eval()
    model = from_pretrained(hf_gpt2_dir).eval()
    assert model.config.n_embd == 32 and model.config.block_size == 64
    idx = torch.randint(0, 97, (3, 40))
    with torch.no_grad():
        diff = (model(idx)[0] - hf(idx).logits).abs().max().item()
    print(f"GPT-2 parity: max |logits diff| = {diff:.2e}")
    assert diff < 1e-4


def test_gpt2_taper_takes_gamma_beta_from_hf(hf_gpt2_dir):
    """TaperLN replaces every HF LayerNorm (All-TaperLN) with its gamma and beta, so at g = 1 the
    model is still GPT-2."""
    base = from_pretrained(hf_gpt2_dir).eval()
    tapered = from_pretrained(hf_gpt2_dir, taper='all', aux_loss='fixed').eval()
    assert all(isinstance(m, TaperLN) for m in (tapered.transformer.h[0].ln_1, tapered.transformer.ln_f))
    torch.testing.assert_close(tapered.transformer.h[1].ln_2.bias, base.transformer.h[1].ln_2.bias)
    idx = torch.randint(0, 97, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(tapered(idx)[0], base(idx)[0], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match='shape'):
        from_pretrained(hf_gpt2_dir, n_layer=4)


# --- 6. the KV cache -----------------------------------------------------------------------------

def prepared(arch, norm, taper, gate, seed=0):
    torch.manual_seed(seed)
    model = GPT(tiny_config(arch=arch, norm=norm, taper=taper, aux_loss='fixed' if taper == 'all' else 'none'))
    if taper != 'none':
        model.train()
        for _ in range(3):
            model(torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16)))
            model.step_emas()
        model.start_taper()
        model.set_gate(gate)
        with torch.no_grad():  # let gammatilde drift from gamma as training would
            for m in model.tapered_norms():
                m.taper_weight.mul_(1 + 0.3 * torch.randn_like(m.taper_weight))
    return model.eval()


CACHE_CASES = [(arch, norm, taper, gate)
               for arch in ('llama', 'gpt2') for norm in ('rmsnorm', 'layernorm')
               for taper, gate in (('none', 1.0), ('internal', 0.4), ('internal', 0.0), ('all', 0.0))]


@pytest.mark.parametrize('arch,norm,taper,gate', CACHE_CASES)
def test_kv_cache_equals_full_forward(arch, norm, taper, gate):
    """Decoding token by token through the static cache gives the logits of one full forward."""
    model = prepared(arch, norm, taper, gate)
    idx = torch.randint(0, 64, (2, 20))
    with torch.no_grad():
        full = model(idx)[0]
        model.setup_cache(2, 20)
        prompt = 7
        step = [model.decode(idx[:, :prompt], torch.arange(prompt))]
        for t in range(prompt, 20):
            step.append(model.decode(idx[:, t:t + 1], torch.tensor([t])))
    torch.testing.assert_close(torch.stack(step, 1), full[:, prompt - 1:], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize('arch', ['llama', 'gpt2'])
def test_greedy_generate_equals_argmax_without_cache(arch):
    model = prepared(arch, 'rmsnorm' if arch == 'llama' else 'layernorm', 'internal', 0.0)
    idx = torch.randint(0, 64, (2, 5))
    seq = idx
    with torch.no_grad():
        for _ in range(12):
            seq = torch.cat([seq, model(seq)[0][:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(model.generate(idx, 12, temperature=0), seq)
    assert torch.equal(model.generate(idx, 12, top_k=1), seq)
    # past the context, nanoGPT's rule: each token is the argmax over the last block_size tokens
    L = model.config.block_size
    seq = idx
    with torch.no_grad():
        for _ in range(L + 7):
            seq = torch.cat([seq, model(seq[:, -L:])[0][:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(model.generate(idx, L + 7, temperature=0), seq)


def test_generate_draws_only_the_tokenizers_ids_from_a_larger_embedding():
    """A vocabulary padded past its tokenizer's (nanoGPT's 50304 for GPT-2's 50257): with vocab=V the
    argmax is over the first V logits alone, and sampling, however hot, never draws an id of V or more."""
    model = prepared('llama', 'rmsnorm', 'internal', 0.0)
    V = 24  # of the model's 64 rows
    idx = torch.randint(0, V, (2, 5))
    seq = idx
    with torch.no_grad():
        for _ in range(10):
            seq = torch.cat([seq, model(seq)[0][:, -1, :V].argmax(-1, keepdim=True)], 1)
    assert torch.equal(model.generate(idx, 10, temperature=0, vocab=V), seq)
    torch.manual_seed(0)
    hot = model.generate(idx.repeat(8, 1), 30, temperature=50.0, vocab=V)[:, 5:]
    assert int(hot.max()) < V and len(hot.unique()) > V // 2  # spread over the allowed ids, none past them
    assert int(model.generate(idx.repeat(8, 1), 30, temperature=50.0)[:, 5:].max()) >= V  # unlimited: it would


# --- 7. what trains during tapering ----------------------------------------------------------------

@pytest.mark.parametrize('norm', ['rmsnorm', 'layernorm'])
def test_during_taper_gamma_and_gammatilde_train_c_and_gate_do_not(norm):
    """Sec. 3.3: after taper start both gamma and gammatilde are trainable and get gradients; c, the
    gate and s_tgt are buffers, untouched by the optimizer."""
    model = prepared('llama', norm, 'all', 0.5)
    model.train()
    assert not any(n.endswith(('.c', 'gate', 's_tgt')) for n, _ in model.named_parameters())
    opt = model.configure_optimizers(0.0, 1e-2, (0.9, 0.95), 'cpu')
    frozen = {n: b.clone() for n, b in model.named_buffers() if n.endswith(('.c', 'gate', 's_tgt'))}
    idx = torch.randint(0, 64, (2, 16))
    _, loss = model(idx, idx)
    loss.backward()
    for m in model.tapered_norms():
        assert m.weight.grad.abs().sum() > 0 and m.taper_weight.grad.abs().sum() > 0
    opt.step()
    for n, b in model.named_buffers():
        if n in frozen:
            assert torch.equal(b, frozen[n]), n


# --- 8. the gate schedule g(k), through train.py's own function --------------------------------------

def test_gate_is_one_then_a_half_cosine_to_zero_at_the_exact_steps(tmp_path):
    """Sec. 3.3: g(k) = 1 for k < k_s, 1/2 (1 + cos(pi (k - k_s) / (k_e - k_s))) for k_s <= k < k_e and
    0 from k_e on, written out in float64, against train.py's get_gate (the script run in this process,
    --eval_only, on a throwaway model and random tokens). g(k_s) = 1, so the gate first drops below 1
    at k_s + 1; the half cosine is symmetric, g(k_s + j) + g(k_e - j) = 1, with 1/2 at the midpoint."""
    ks, ke = 5, 17
    np.random.default_rng(0).integers(0, 64, 4096).astype(np.uint16).tofile(tmp_path / 'train.bin')
    (tmp_path / 'val.bin').write_bytes((tmp_path / 'train.bin').read_bytes())
    script = train_namespace('--device=cpu', '--vocab_size=64', '--n_layer=1', '--n_head=2', '--n_embd=16',
                             '--block_size=16', '--batch_size=2', '--eval_iters=1', '--max_iters=30',
                             '--warmup_iters=5', '--lr_decay_iters=30', f'--taper_start={ks}', f'--taper_end={ke}',
                             f'--data_dir={tmp_path}', f'--out_dir={tmp_path / "out"}', '--eval_only')
    steps = range(ke + 5)
    paper = [1.0 if k < ks else 0.0 if k >= ke else 0.5 * (1 + math.cos(math.pi * (k - ks) / (ke - ks)))
             for k in steps]
    gate = [script['get_gate'](k) for k in steps]
    assert gate == pytest.approx(paper, rel=0, abs=1e-15)
    assert min(k for k in steps if gate[k] < 1) == ks + 1 and gate[ks] == 1.0
    assert min(k for k in steps if gate[k] == 0) == ke and all(g == 0 for g in gate[ke:])
    assert all(gate[ks + j] + gate[ke - j] == pytest.approx(1, abs=1e-15) for j in range(ke - ks + 1))
    assert gate[(ks + ke) // 2] == pytest.approx(0.5, abs=1e-15)


# --- the model's own bookkeeping ------------------------------------------------------------------

def test_fixed_target_is_frozen_bias_corrected_ema_of_prelogit_scale():
    """Sec. 3.5: s_tgt = bias-corrected EMA of the batch mean s(h) while g = 1; L_aux is zero until
    taper start and lambda E (s - s_tgt)^2 after; the loss returned is CE + L_aux."""
    torch.manual_seed(0)
    model = GPT(tiny_config(taper='all', aux_loss='fixed', ema_rate=0.3))
    model.train()
    means = []
    for _ in range(4):
        idx = torch.randint(0, 64, (2, 16))
        _, loss, stats = model(idx, idx, return_stats=True)
        model.step_emas()
        assert stats['aux'].item() == 0 and loss.item() == stats['ce'].item()
        means.append(stats['prelogit_scale'].item())
    model.start_taper()
    w = [0.3 * 0.7 ** (3 - k) for k in range(4)]
    assert model.s_tgt.item() == pytest.approx(sum(a * b for a, b in zip(w, means)) / sum(w), rel=1e-5)
    model.set_gate(0.5)
    _, loss, stats = model(idx, idx, return_stats=True)
    s = model.transformer.ln_f.scale(model.trunk(idx)).squeeze(-1)
    assert stats['aux'].item() == pytest.approx(0.1 * (s - model.s_tgt).pow(2).mean().item(), rel=1e-5)
    assert loss.item() == pytest.approx(stats['ce'].item() + stats['aux'].item(), rel=1e-6)
    logits = model(idx)[0]
    assert stats['logit_norm'].item() == pytest.approx(logits.norm(dim=-1).mean().item(), rel=1e-5)


def test_gate_is_one_shared_tensor_across_moves_and_reloads():
    """The gate is one tensor for all tapered layers, also after .to(); a reloaded state dict
    restores the taper phase (c frozen, g = 0 skips the normalized branch)."""
    model = prepared('llama', 'rmsnorm', 'internal', 0.0).double()
    assert all(m.gate is model.gate for m in model.tapered_norms())
    fresh = GPT(model.config).double()
    with pytest.raises(RuntimeError, match='start_taper'):
        fresh.set_gate(0.5)
    fresh.load_state_dict(model.state_dict())
    assert fresh.started and all(not m.calibrating and not m.normalizing for m in fresh.tapered_norms())
    idx = torch.randint(0, 64, (2, 10))
    torch.testing.assert_close(fresh(idx)[0], model(idx)[0], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match='already'):
        fresh.start_taper()


def test_parameter_counts_match_the_paper_sizes():
    """App. C: depth 8, 16 heads, vocab 10k; d = 64/128/256/512 give about 1M/3M/9M/30M."""
    sizes = {64: 1.0e6, 128: 3.0e6, 256: 9.0e6, 512: 30.0e6}
    for d, paper in sizes.items():
        n = GPT(GPTConfig(n_embd=d)).get_num_params()
        assert abs(n - paper) / paper < 0.1, (d, n)


def test_mfu_takes_the_peak_as_an_argument():
    model = GPT(tiny_config())
    assert model.estimate_mfu(1, 1.0, 1e12) == pytest.approx(2 * model.estimate_mfu(1, 1.0, 2e12))


def test_compiled_model_matches_eager_and_gate_changes_do_not_recompile():
    """torch.compile trains like eager mode in every phase: at g = 1 (calibration EMAs observed inside
    the graph, L_aux still zero) and while tapering (the stats must not cut the loss's graph); a new
    gate value is a new tensor value, not a new graph."""
    import copy
    import torch._dynamo
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = GPT(tiny_config(taper='all', aux_loss='fixed')).train()
    model = copy.deepcopy(eager)
    compiled = torch.compile(model)
    idx = torch.randint(0, 64, (2, 16))
    for phase in ('calibrating', 'tapering'):
        _, loss, stats = eager(idx, idx, return_stats=True)
        _, closs, cstats = compiled(idx, idx, return_stats=True)
        loss.backward()
        closs.backward()
        torch.testing.assert_close(closs, loss, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(cstats['ce'], stats['ce'], rtol=1e-5, atol=1e-5)
        for p, q in zip(model.parameters(), eager.parameters()):
            assert (p.grad is None) == (q.grad is None), phase
            if p.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
        if phase == 'calibrating':
            for m in (eager, model):
                m.step_emas()
                m.start_taper()
                m.set_gate(0.5)
            torch.testing.assert_close(model.transformer.ln_f.c, eager.transformer.ln_f.c)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for g in (0.4, 0.1):
            model.set_gate(g)
            compiled(idx, idx, return_stats=True)


# --- folding (Sec. 3.3, App. B) --------------------------------------------------------------------

FOLD_CASES = [('llama', 'rmsnorm', 'internal'), ('llama', 'rmsnorm', 'all'),
              ('gpt2', 'layernorm', 'internal'), ('gpt2', 'layernorm', 'all')]


def tapered_at_zero(arch, norm, taper):
    """A tapered model at g = 0 whose gammatilde and beta have moved away from their start."""
    model = prepared(arch, norm, taper, 0.0)
    with torch.no_grad():
        for m in model.tapered_norms():
            if getattr(m, 'bias', None) is not None:
                m.bias.add_(0.3 * torch.randn_like(m.bias))
    return model


@pytest.mark.parametrize('arch,norm,taper', FOLD_CASES)
def test_folding_does_not_change_the_function(arch, norm, taper):
    """Folding the g = 0 maps into the next linear layers (W D_{c gammatilde}; TaperLN also
    W (I - 11^T/d) and b + W beta) gives the g = 0 model's logits, and the folded model holds no
    per-token normalization in its blocks (All-Taper: none at all)."""
    from fold import fold_model, max_logit_diff
    model = tapered_at_zero(arch, norm, taper)
    folded = fold_model(model)
    assert max_logit_diff(model, folded) < 1e-5
    assert all(isinstance(b.ln_1, torch.nn.Identity) and isinstance(b.ln_2, torch.nn.Identity)
               for b in folded.transformer.h)
    assert folded.tapered_norms() == []
    with OpRecorder() as rec:
        folded(torch.randint(0, 64, (2, 16)))
    found = [op for op in statistic_ops(rec.ops) if 'norm' in op or 'sqrt' in op]
    assert len(found) == (taper == 'internal'), found  # Internal keeps its final norm
    if taper == 'all':
        assert folded.lm_head.weight is not folded.transformer.wte.weight  # the head is untied


@pytest.mark.parametrize('arch,norm,taper', FOLD_CASES)
def test_folded_decoding_equals_gate_zero_decoding(arch, norm, taper):
    """With the KV cache, the folded model decodes exactly as the g = 0 model."""
    from fold import fold_model
    model = tapered_at_zero(arch, norm, taper)
    folded = fold_model(model).eval()
    idx = torch.randint(0, 64, (2, 6))
    assert torch.equal(folded.generate(idx, 20, temperature=0), model.generate(idx, 20, temperature=0))
    model.setup_cache(2, 6)
    folded.setup_cache(2, 6)
    with torch.no_grad():
        torch.testing.assert_close(folded.decode(idx, torch.arange(6)), model.decode(idx, torch.arange(6)),
                                   rtol=1e-5, atol=1e-5)


def test_fold_refuses_what_is_not_a_fixed_map():
    from fold import fold_model
    with pytest.raises(ValueError, match='not 0'):
        fold_model(prepared('llama', 'rmsnorm', 'internal', 0.3))
    with pytest.raises(ValueError, match='Baseline'):
        fold_model(prepared('llama', 'rmsnorm', 'none', 1.0))


def test_folded_all_taper_gpt2_exports_to_transformers(tmp_path):
    """Beyond the paper: an All-TaperLN GPT-2 at g = 0 exported for GPT2LMHeadModel (every LayerNorm a
    fixed affine map through a large eps) gives our logits, relative to their scale."""
    from transformers import GPT2LMHeadModel
    from hf import export_hf
    model = tapered_at_zero('gpt2', 'layernorm', 'all')
    export_hf(model, fold_model(model), tmp_path)
    hf = GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    idx = torch.randint(0, 64, (2, 30))
    with torch.no_grad():
        ours = model(idx)[0]
        assert (hf(idx).logits - ours).abs().max() <= 1e-5 * ours.abs().max()
    with pytest.raises(ValueError, match='All-Taper'):
        internal = tapered_at_zero('gpt2', 'layernorm', 'internal')
        export_hf(internal, fold_model(internal), tmp_path / 'no')


# --- FakeLN (Baroni et al.), the comparison protocol ------------------------------------------------

def ema_written_out(xs, m):
    """The bias-corrected EMA of xs with weight m on the old value: sum_k (1 - m) m^(n-1-k) x_k / (1 - m^n)."""
    n = len(xs)
    return sum((1 - m) * m ** (n - 1 - k) * x for k, x in enumerate(xs)) / (1 - m ** n)


def test_fakeln_is_layernorm_until_removed_then_a_fixed_map():
    """Baroni et al.'s FakeLN: a LayerNorm whose sigma EMA moves on every training forward, with
    weight `momentum` on the old value, by the mean sigma_h over all positions (written out here,
    bias-corrected). ln_1 has two paths, Q/K and V, with one gamma and beta: removing a path freezes
    its own sigma_avg from the EMA at that moment, and that path becomes
    (h - mu)/sigma_avg D_gamma + beta while the other stays LayerNorm. Eval forwards move nothing."""
    from model import FakeLN
    torch.manual_seed(0)
    m, eps = 0.9, 1e-5
    norm = random_affine(FakeLN(D, eps=eps, momentum=m, paths=2).double()).train()
    assert sum(p.numel() for p in norm.parameters()) == 2 * D  # one gamma, one beta
    layer_norm = lambda h: F.layer_norm(h, (D,), norm.weight, norm.bias, eps)
    fixed = lambda h, sigma: (h - h.mean(-1, keepdim=True)) / sigma * norm.weight + norm.bias
    means = []
    sigma_ema = lambda: ema_written_out(means, m)

    def forward(k):
        h = (1 + k) * torch.randn(2, 5, D, dtype=torch.float64)
        h[:, 0] *= 10  # position 0 is averaged in like any other
        means.append(torch.sqrt(h.var(-1, unbiased=False) + eps).mean().item())
        return h, norm(h)

    for k in range(3):
        h, (qk, v) = forward(k)
        torch.testing.assert_close(qk, layer_norm(h))
        torch.testing.assert_close(v, layer_norm(h))
    n = norm.sigma_ema.n.item()
    norm.eval()(h)
    assert norm.sigma_ema.n.item() == n  # statistics come from training forwards only
    norm.train()
    norm.remove(step=3, path=0)
    sigma_qk = sigma_ema()
    assert norm.sigma_avg[0].item() == pytest.approx(sigma_qk, rel=1e-12)
    for k in range(3, 5):  # the V path is still real: the EMA goes on moving
        h, (qk, v) = forward(k)
        torch.testing.assert_close(qk, fixed(h, sigma_qk))
        torch.testing.assert_close(v, layer_norm(h))
    norm.remove(step=5, path=1)
    assert norm.sigma_avg[1].item() == pytest.approx(sigma_ema(), rel=1e-12)
    assert norm.sigma_avg[0].item() == pytest.approx(sigma_qk, rel=1e-12)  # frozen at its removal
    h = torch.randn(2, 5, D, dtype=torch.float64)
    qk, v = norm(h)
    torch.testing.assert_close(qk, fixed(h, sigma_qk))
    torch.testing.assert_close(v, fixed(h, sigma_ema()))


def test_fakeln_live_shared_sigma_ends_both_ln1_paths_with_one_sigma():
    """fakeln_sigma='live_shared', Baroni et al.'s EXP_RECOMPUTE_STD_ON_REAL=1: ln_1's two paths read
    one sigma. Once the Q/K path is removed it follows the live EMA (written out, bias-corrected) on
    every training forward while the V path is still a LayerNorm; when the V path goes, both paths hold
    the EMA's value at that moment and are one map. ('live' keeps the Q/K sigma of its own removal.)"""
    from model import FakeLN
    torch.manual_seed(0)
    m, eps = 0.9, 1e-5
    norm = random_affine(FakeLN(D, eps=eps, momentum=m, paths=2, sigma='live_shared').double()).train()
    fixed = lambda h, sigma: (h - h.mean(-1, keepdim=True)) / sigma * norm.weight + norm.bias
    means = []

    def forward(k):
        h = (1 + k) * torch.randn(2, 5, D, dtype=torch.float64)  # a sigma that moves from step to step
        means.append(torch.sqrt(h.var(-1, unbiased=False) + eps).mean().item())
        return h, norm(h)

    for k in range(3):
        forward(k)
    norm.remove(step=3, path=0)
    for k in range(3, 6):
        h, (qk, v) = forward(k)
        torch.testing.assert_close(qk, fixed(h, ema_written_out(means, m)))
        torch.testing.assert_close(v, F.layer_norm(h, (D,), norm.weight, norm.bias, eps))
    norm.remove(step=6, path=1)
    assert norm.sigma_avg.tolist() == pytest.approx([ema_written_out(means, m)] * 2, rel=1e-12)
    h = torch.randn(2, 5, D, dtype=torch.float64)
    qk, v = norm(h)
    torch.testing.assert_close(qk, v, rtol=0, atol=0)


def test_fakeln_pretrained_sigma_is_the_std_of_each_layernorms_input_in_the_pretrained_model(hf_gpt2_dir):
    """fakeln_sigma='pretrained', Baroni et al.'s default (EXP_RECOMPUTE_STD_ON_REAL=0): before any
    step each FakeLN takes one sigma from the pretrained model, in eval mode: torch's std over every
    element of positions 1.. of its own input, each token centered first (generate_std_dict.py;
    reference: the inputs of transformers' own ln_1, ln_2 and ln_f). Both ln_1 paths use it, and
    training forwards and removals leave it as it is."""
    from transformers import GPT2LMHeadModel
    torch.manual_seed(0)
    batches = [torch.randint(0, 97, (2, 24)) for _ in range(2)]
    expected = pretrained_layernorm_std(GPT2LMHeadModel.from_pretrained(hf_gpt2_dir).eval(), batches)
    model = from_pretrained(hf_gpt2_dir, fakeln=True, fakeln_sigma='pretrained', aux_loss='baroni').train()
    with pytest.raises(RuntimeError, match='measure_pretrained_sigma'):
        model.transformer.ln_f.remove(step=0)
    model.measure_pretrained_sigma(batches)
    assert model.training and len(expected) == 5
    for name, sigma in expected.items():
        assert model.get_submodule(name).sigma_avg.tolist() == pytest.approx([sigma] * (1 + name.endswith('ln_1')),
                                                                             rel=1e-6), name
    measured = [m.sigma_avg.clone() for m in model.fakelns()]
    for step, idx in enumerate(batches * 3):
        model(idx, idx)[1].backward()
        for m in model.fakelns():
            m.remove(step, path=step % len(m.removed))
    assert all(all(m.removed) and torch.equal(m.sigma_avg, s) for m, s in zip(model.fakelns(), measured))


def test_baroni_aux_loss_value_and_gradient_through_the_forward():
    """Baroni et al.'s aux loss (App. D), L = lambda mean_{b,t} (sigma_bt - sigma_hat)^2, on the INPUT h
    of ln_f: sigma_bt = sqrt(mean_i (h_bti - mu_bt)^2 + eps), sigma_hat the mean of sigma over the
    positions that are neither position 0 nor end-of-text (GPT-2 pads with end-of-text), detached.
    Written out in float64 with its gradient in closed form,
        dL/dh_bti = lambda 2 (sigma_bt - sigma_hat) / (B T) (h_bti - mu_bt) / (d sigma_bt),
    and checked against the model's forward and backward, on a batch whose position 0 and end-of-text
    tokens carry outlying sigma, so that counting either in sigma_hat moves the loss."""
    torch.manual_seed(0)
    eot, lam, eps = 63, 0.1, 1e-5
    model = GPT(tiny_config(arch='gpt2', norm='layernorm', fakeln=True, aux_loss='baroni', aux_weight=lam,
                            eot_token=eot)).double().eval()
    with torch.no_grad():
        model.transformer.wte.weight[[0, eot]] *= 40  # the residual streams of these tokens stand out
    idx = torch.randint(1, eot, (3, 24))
    idx[:, 0] = 0
    idx[0, 7] = idx[2, 15] = eot
    inputs = []
    model.transformer.ln_f.register_forward_pre_hook(lambda m, args: inputs.append(args[0]) or args[0].retain_grad())

    def aux_and_grad(mode):  # the loss's aux term, and the gradient of the whole loss on ln_f's input
        model.config.aux_loss = mode
        _, loss, stats = model(idx, idx, return_stats=True)
        loss.backward()
        return stats['aux'].item(), inputs[-1].grad

    value, grad_with = aux_and_grad('baroni')
    grad_aux = grad_with - aux_and_grad('none')[1]  # the CE's gradient is the same in both
    h = inputs[0].detach()
    centered = h - h.mean(-1, keepdim=True)
    sigma = torch.sqrt(centered.pow(2).mean(-1) + eps)
    keep = idx != eot
    keep[:, 0] = False

    def paper(kept):
        return lam * (sigma - sigma[kept].mean()).pow(2).mean().item()

    assert value == pytest.approx(paper(keep), rel=1e-10)
    expected = lam * 2 * (sigma - sigma[keep].mean())[..., None] / sigma.numel() * centered / (h.size(-1) * sigma[..., None])
    torch.testing.assert_close(grad_aux, expected, rtol=1e-8, atol=1e-12 * expected.abs().max().item())
    with_first, with_eot = keep.clone(), keep | (idx == eot)
    with_first[:, 0] = True
    print(f"Baroni aux {value:.6g}; sigma_hat with position 0: {paper(with_first):.6g}, with end-of-text: "
          f"{paper(with_eot):.6g}")
    assert abs(paper(with_first) - value) > 0.02 * value and abs(paper(with_eot) - value) > 0.02 * value


def test_a_scratch_run_takes_its_end_of_text_id_from_its_data(tmp_path):
    """Baroni's aux loss leaves end-of-text positions out of sigma_hat (the test above); a model trained
    from scratch takes that id from its data's meta.json (prepare_owt.py's eot_token), as a fine-tune
    takes its tokenizer's, so that the loss does leave them out. Data without one (TinyStories) has none."""
    import json
    np.random.default_rng(0).integers(0, 64, 4096).astype(np.uint16).tofile(tmp_path / 'train.bin')
    (tmp_path / 'val.bin').write_bytes((tmp_path / 'train.bin').read_bytes())
    common = ['--device=cpu', '--vocab_size=64', '--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16',
              '--batch_size=2', '--eval_iters=1', '--arch=gpt2', '--norm=layernorm', '--taper=none',
              '--aux_loss=baroni', f'--data_dir={tmp_path}', f'--out_dir={tmp_path / "out"}', '--eval_only']
    for meta, eot in ((dict(vocab_size=64, eot_token=63), 63), (dict(vocab_size=64), -1)):
        (tmp_path / 'meta.json').write_text(json.dumps(meta))
        assert train_namespace(*common)['model'].config.eot_token == eot


def test_decay_fakeln_weight_decays_fakelns_gamma_as_baronis_trainer_does():
    """Baroni et al.'s HF Trainer (transformers 4.48) decays every parameter except nn.LayerNorm members
    and names holding "bias"; their FakeLN is no nn.LayerNorm, so its gamma decays. With
    decay_fakeln_weight the decayed set is exactly that, and one AdamW step with zero gradients
    shrinks gamma by (1 - lr wd); without it, gains and biases never decay."""
    model = GPT(tiny_config(arch='gpt2', norm='layernorm', fakeln=True))
    names = {id(p): n for n, p in model.named_parameters()}
    for decay_weight, decayed in ((True, {n for n in names.values() if 'bias' not in n}),
                                  (False, {n for n, p in model.named_parameters() if p.dim() >= 2})):
        optimizer = model.configure_optimizers(0.01, 0.1, (0.9, 0.999), 'cpu', decay_fakeln_weight=decay_weight)
        assert {names[id(p)] for g in optimizer.param_groups if g['weight_decay'] for p in g['params']} == decayed
    gamma = model.transformer.ln_f.weight
    before = gamma.detach().clone()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer = model.configure_optimizers(0.01, 0.1, (0.9, 0.999), 'cpu', decay_fakeln_weight=True)
    optimizer.step()
    torch.testing.assert_close(gamma.detach(), before * (1 - 0.1 * 0.01), rtol=1e-7, atol=0)


def test_fakeln_gpt2_has_gpt2s_parameters_and_its_ema_follows_every_forward(hf_gpt2_dir):
    """A FakeLN GPT-2 has exactly GPT2LMHeadModel's parameters (ln_1's gamma and beta serve both
    paths), and each training forward moves ln_f's sigma EMA once by the mean sigma_h of the
    residual stream it normalizes, over every position, with the configured momentum."""
    from transformers import GPT2LMHeadModel
    hf = GPT2LMHeadModel.from_pretrained(hf_gpt2_dir)
    model = from_pretrained(hf_gpt2_dir, fakeln=True, fakeln_momentum=0.8).train()
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in hf.parameters())
    torch.manual_seed(0)
    means = []
    for _ in range(3):
        idx = torch.randint(0, 97, (2, 16))
        with torch.no_grad():
            h = model.eval().trunk(idx)  # eval mode moves no statistic
            means.append(torch.sqrt(h.var(-1, unbiased=False) + 1e-5).mean().item())
            model.train()(idx)
    ema = model.transformer.ln_f.sigma_ema
    expected = sum(0.2 * 0.8 ** (2 - k) * x for k, x in enumerate(means)) / (1 - 0.8 ** 3)
    assert ema.n.item() == 3
    assert ema.corrected().item() == pytest.approx(expected, rel=1e-6)


def fakeln_removed(hf_dir, remove=(('ln_2', 0), ('ln_1', 0), ('ln_1', 1), ('ln_f', 0))):
    """A FakeLN GPT-2 from HF weights with the named (LayerNorm, path) removed in turn, a few training
    forwards apart, so that ln_1's two paths freeze different sigma_avg."""
    torch.manual_seed(0)
    model = from_pretrained(hf_dir, fakeln=True, aux_loss='baroni').train()
    for step, (name, path) in enumerate([(None, None)] + list(remove)):
        for norm in ([] if name is None else [model.transformer.ln_f] if name == 'ln_f' else
                     [getattr(block, name) for block in model.transformer.h]):
            norm.remove(step=step, path=path)
        for _ in range(2):
            idx = torch.randint(0, 97, (2, 16))
            model(idx, idx)
    return model.eval()


def test_fakeln_gpt2_is_gpt2_before_removal_and_removes_qk_and_v_paths_apart(hf_gpt2_dir):
    """With nothing removed a FakeLN model is HF GPT-2; removing ln_1 on the Q/K path and on the V
    path are two different functions (Baroni et al. remove them at different steps)."""
    from transformers import GPT2LMHeadModel
    hf = GPT2LMHeadModel.from_pretrained(hf_gpt2_dir).eval()
    idx = torch.randint(0, 97, (2, 20))
    with torch.no_grad():
        torch.testing.assert_close(fakeln_removed(hf_gpt2_dir, ())(idx)[0], hf(idx).logits, rtol=0, atol=1e-4)
        qk = fakeln_removed(hf_gpt2_dir, (('ln_1', 0),))(idx)[0]
        v = fakeln_removed(hf_gpt2_dir, (('ln_1', 1),))(idx)[0]
    assert (qk - v).abs().max() > 1e-3


def test_fakeln_checkpoint_of_the_old_layout_is_refused_in_one_sentence():
    """A FakeLN checkpoint with a separate ln_1v module (before ln_1 was shared) does not load; the
    error says so in one sentence."""
    model = GPT(tiny_config(arch='gpt2', norm='layernorm', fakeln=True))
    state = model.state_dict()
    state['transformer.h.0.ln_1v.weight'] = state['transformer.h.0.ln_1.weight']
    with pytest.raises(ValueError, match='older layout') as error:
        GPT.from_checkpoint(dict(model=state, model_args=asdict(model.config)))
    assert '\n' not in str(error.value)


def test_dropout_is_hf_gpt2s_in_training_and_off_in_eval(hf_gpt2_dir):
    """dropout sits where HF GPT-2 puts it (embeddings, attention probabilities, attention and MLP
    outputs): in training mode with the same seed our logits are GPT2LMHeadModel's; in eval mode and
    in generation no dropout runs."""
    from transformers import GPT2LMHeadModel
    hf = GPT2LMHeadModel.from_pretrained(hf_gpt2_dir, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1).train()
    model = from_pretrained(hf_gpt2_dir, dropout=0.1).train()
    idx = torch.randint(0, 97, (3, 40))
    with torch.no_grad():
        torch.manual_seed(1)
        ours = model(idx)[0]
        torch.manual_seed(1)
        theirs = hf(idx).logits
        torch.manual_seed(2)
        other_seed = model(idx)[0]
        scale = theirs.abs().max()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5 * scale)
        assert (ours - other_seed).abs().max() > 0.05 * scale  # dropout did act
        model.eval()
        torch.testing.assert_close(model(idx)[0], hf.eval()(idx).logits, rtol=0, atol=1e-5 * scale)
        greedy = model.generate(idx[:1, :8], 6, temperature=0)
        model.train()  # generate() decodes in eval mode whatever the model's mode
        assert all(torch.equal(model.generate(idx[:1, :8], 6, temperature=0), greedy) for _ in range(2))
        assert model.training


def test_fakeln_model_folds_and_exports_like_all_taperln(hf_gpt2_dir, tmp_path):
    """Once every LayerNorm is removed, FakeLN folds exactly (ln_1 into the Q/K rows of c_attn, its
    V-path copy into the V rows) and exports to transformers' GPT2LMHeadModel."""
    from transformers import GPT2LMHeadModel
    from fold import fold_model, max_logit_diff
    from hf import export_hf
    model = fakeln_removed(hf_gpt2_dir)
    assert all(abs(b.ln_1.sigma_avg[0] - b.ln_1.sigma_avg[1]) > 1e-4 * b.ln_1.sigma_avg[0] for b in model.transformer.h)
    folded = fold_model(model)
    assert max_logit_diff(model, folded) < 1e-5 and folded.fakelns() == []
    export_hf(model, fold_model(model), tmp_path)
    idx = torch.randint(0, 97, (2, 30))
    with torch.no_grad():
        diff = (GPT2LMHeadModel.from_pretrained(tmp_path).eval()(idx).logits - model(idx)[0]).abs().max()
    assert diff < 1e-5
    with pytest.raises(ValueError, match='not every FakeLN'):
        fold_model(fakeln_removed(hf_gpt2_dir, (('ln_2', 0),)))


def test_activation_checkpointing_gives_the_same_gradients_and_statistics():
    """Recomputing blocks in backward changes neither the gradients nor the calibration EMAs (they
    average a step's observations, and a recomputed forward observes the same values again)."""
    import copy
    torch.manual_seed(0)
    plain = GPT(tiny_config(taper='internal', aux_loss='fixed')).train()
    ckpt = copy.deepcopy(plain)
    ckpt.grad_checkpoint = True
    idx = torch.randint(0, 64, (2, 16))
    for model in (plain, ckpt):
        model(idx, idx)[1].backward()
        model.step_emas()
    for p, q in zip(plain.parameters(), ckpt.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-8)
    for a, b in zip(plain.tapered_norms(), ckpt.tapered_norms()):
        torch.testing.assert_close(a.ema_num.value, b.ema_num.value)


def test_fakeln_ema_moves_once_per_forward_under_activation_checkpointing():
    """Activation checkpointing recomputes each block in backward; FakeLN's sigma EMA, which moves
    once per forward, ends where it does without checkpointing, and so do the gradients."""
    import copy
    torch.manual_seed(0)
    plain = GPT(tiny_config(arch='gpt2', norm='layernorm', fakeln=True, dropout=0.1)).train()
    ckpt = copy.deepcopy(plain)
    ckpt.grad_checkpoint = True
    idx = torch.randint(0, 64, (2, 16))
    for model in (plain, ckpt):
        torch.manual_seed(1)
        for _ in range(2):
            model(idx, idx)[1].backward()
    for p, q in zip(plain.parameters(), ckpt.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5 * p.grad.abs().max().item())
    for a, b in zip(plain.fakelns(), ckpt.fakelns()):
        assert a.sigma_ema.n.item() == b.sigma_ema.n.item() == 2
        torch.testing.assert_close(a.sigma_ema.value, b.sigma_ema.value, rtol=1e-6, atol=0)


# --- DyT (Zhu et al. 2025), the comparison: a norm-free elementwise map ------------------------------

@pytest.mark.parametrize('arch', ['llama', 'gpt2'])
def test_dyt_is_gamma_tanh_alpha_h_plus_beta(arch):
    """DyT(h) = gamma * tanh(alpha h) + beta (beta only where the arch has biases), with
    tanh x = 1 - 2 / (exp(2x) + 1) written out in float64, at every place of a DyT model; alpha starts
    at the DyT authors' LLaMA values (0.8 before attention, 0.2 before the MLP and at the end)."""
    torch.manual_seed(0)
    model = GPT(tiny_config(arch=arch, norm='dyt'))
    places = [(b.ln_1, 0.8) for b in model.transformer.h] + [(b.ln_2, 0.2) for b in model.transformer.h] + \
        [(model.transformer.ln_f, 0.2)]
    h = 3 * torch.randn(4, 5, 32)
    for norm, alpha0 in places:
        assert norm.alpha.shape == (1,) and norm.alpha.item() == pytest.approx(alpha0)
        assert torch.equal(norm.weight, torch.ones(32))
        assert (getattr(norm, 'bias', None) is not None) == (arch == 'gpt2')
        with torch.no_grad():  # move every parameter off its init
            for p in norm.parameters():
                p.copy_(p + 0.5 * torch.randn_like(p))
        x = norm.alpha.double() * h.double()
        expected = norm.weight.double() * (1 - 2 / (torch.exp(2 * x) + 1))
        if arch == 'gpt2':
            expected = expected + norm.bias.double()
        torch.testing.assert_close(norm(h).double(), expected, rtol=1e-6, atol=1e-6 * expected.abs().max().item())


@pytest.mark.parametrize('arch', ['llama', 'gpt2'])
def test_dyt_alpha_and_gamma_train(arch):
    """alpha, gamma (and beta) of every DyT layer receive gradients and move with one AdamW step."""
    torch.manual_seed(0)
    model = GPT(tiny_config(arch=arch, norm='dyt')).train()
    optimizer = model.configure_optimizers(0.0, 1e-2, (0.9, 0.95), 'cpu')
    dyt = {n: p for n, p in model.named_parameters() if n.endswith(('alpha', 'ln_1.weight', 'ln_2.weight',
                                                                     'ln_f.weight', 'ln_1.bias', 'ln_2.bias',
                                                                     'ln_f.bias'))}
    assert len(dyt) == 5 * (3 if arch == 'gpt2' else 2)  # 5 layers: alpha, gamma (, beta)
    before = {n: p.detach().clone() for n, p in dyt.items()}
    idx = torch.randint(0, 64, (2, 16))
    model(idx, idx)[1].backward()
    for n, p in dyt.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, n
    optimizer.step()
    for n, p in dyt.items():
        assert not torch.equal(p, before[n]), n


@pytest.mark.parametrize('arch', ['llama', 'gpt2'])
def test_dyt_kv_cache_equals_full_forward(arch):
    """A DyT model decodes token by token through the static cache to the logits of one full forward
    (tolerance relative to the logits' scale: DyT's small alpha keeps them small at init)."""
    torch.manual_seed(0)
    model = GPT(tiny_config(arch=arch, norm='dyt')).eval()
    with torch.no_grad():  # gamma large enough for logits of order one
        model.transformer.ln_f.weight.mul_(50)
    idx = torch.randint(0, 64, (2, 20))
    with torch.no_grad():
        full = model(idx)[0]
        model.setup_cache(2, 20)
        step = [model.decode(idx[:, :7], torch.arange(7))]
        for t in range(7, 20):
            step.append(model.decode(idx[:, t:t + 1], torch.tensor([t])))
    scale = full.abs().max().item()
    assert scale > 0.1
    torch.testing.assert_close(torch.stack(step, 1), full[:, 6:], rtol=1e-4, atol=1e-5 * scale)


def test_dyt_refuses_tapering_and_folding():
    """DyT leaves no norm to taper, and tanh(alpha h) is no fixed linear map: neither is accepted."""
    from fold import fold_model
    for bad in (dict(taper='internal'), dict(taper='all'), dict(fakeln=True, arch='gpt2')):
        with pytest.raises(ValueError, match="norm='dyt' leaves no norm"):
            tiny_config(norm='dyt', **bad)
    with pytest.raises(ValueError, match='not a fixed linear map'):
        fold_model(GPT(tiny_config(norm='dyt')))
