"""
The CUDA code paths, stood in for on the CPU: bf16 autocast (torch.autocast('cpu', torch.bfloat16))
through the KV cache, the scale losses, the calibration EMAs, folding and the HF export; and the
greedy decode step that bench.py captures as a CUDA graph, replayed here as a plain call.
gpu_check.py runs the same paths on a GPU.
"""

import copy

import pytest
import torch

from fold import fold_model
from hf import export_hf
from model import GPT, greedy_step
from test_taper import prepared, tapered_at_zero, tiny_config

# bf16 keeps 8 significant bits, a relative rounding of at most 2^-9. The logits leave the head's
# matmul rounded to bf16 and carry the roundings of its inputs; a two-layer model stays within two
# units of 2^-8 of the float64 logits, relative to their size (about 0.7 of one, measured).
BF16_TOL = 2 * 2.0 ** -8


def bf16():
    return torch.autocast('cpu', dtype=torch.bfloat16)


def relative_error(x, reference):
    """|x - reference| / |reference| over all entries, in float64."""
    x, reference = x.double(), reference.double()
    return ((x - reference).norm() / reference.norm()).item()


def float64_logits(model, idx):
    """The reference: the same model, every weight and activation in float64."""
    with torch.no_grad():
        return copy.deepcopy(model).double().eval()(idx)[0]


CASES = [(arch, norm, taper, gate) for arch, norm in (('llama', 'rmsnorm'), ('gpt2', 'layernorm'))
         for taper, gate in (('none', 1.0), ('internal', 0.4), ('all', 0.0))]


@pytest.mark.parametrize('arch,norm,taper,gate', CASES)
def test_bf16_decoding_through_the_kv_cache_stays_within_bf16_of_float64(arch, norm, taper, gate):
    """Under bf16 autocast, k and v enter the float32 cache and SDPA reads them back: the prefill
    and every cached decode step give the float64 model's logits to bf16 precision."""
    model = prepared(arch, norm, taper, gate)
    idx = torch.randint(0, 64, (2, 20), generator=torch.Generator().manual_seed(1))
    reference = float64_logits(model, idx)
    prompt = 7
    model.setup_cache(2, 20)
    with torch.no_grad(), bf16():
        steps = [model.decode(idx[:, :prompt], torch.arange(prompt))]
        for t in range(prompt, 20):
            steps.append(model.decode(idx[:, t:t + 1], torch.tensor([t])))
    cached = torch.stack(steps, 1)
    assert cached.dtype == torch.bfloat16
    assert relative_error(cached, reference[:, prompt - 1:]) < BF16_TOL


@pytest.mark.parametrize('arch,norm,protocol', [('llama', 'rmsnorm', 'all'), ('gpt2', 'layernorm', 'all'),
                                                ('gpt2', 'layernorm', 'fakeln')])
def test_bf16_training_through_the_taper_stays_finite_and_close_to_float64(arch, norm, protocol):
    """train.py's step under bf16 autocast, through every phase: calibration at g = 1 (EMAs of eq. 4
    and of s(h)), start_taper, mid-taper and g = 0 with the fixed-target loss (eq. 5); for FakeLN,
    Baroni's loss and the removal. Losses and gradients stay finite, the EMAs and c stay float32,
    and each step's loss is the float64 model's loss to bf16 precision."""
    torch.manual_seed(0)
    fakeln = protocol == 'fakeln'
    model = GPT(tiny_config(arch=arch, norm=norm, taper='none' if fakeln else protocol, fakeln=fakeln,
                            aux_loss='baroni' if fakeln else 'fixed', eot_token=3)).train()
    optimizer = model.configure_optimizers(0.01, 1e-3, (0.9, 0.95), 'cpu')
    gen = torch.Generator().manual_seed(2)
    for step in range(8):
        if step == 3:
            if fakeln:
                for m in model.fakelns():  # every path: ln_1's Q/K and V at once here
                    for path in range(len(m.removed)):
                        m.remove(step, path)
            else:
                model.start_taper()
        if not fakeln:
            model.set_gate(1.0 if step < 3 else 0.5 if step < 6 else 0.0)
        x, y = (torch.randint(0, 64, (4, 16), generator=gen) for _ in range(2))
        with torch.no_grad():
            reference = copy.deepcopy(model).double()(x, y)[1]  # train mode: observes, then discarded
        with bf16():
            _, loss = model(x, y)
        loss.backward()
        assert torch.isfinite(loss) and loss.dtype == torch.float32
        assert abs(loss.item() - reference.item()) < BF16_TOL * reference.item()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        model.step_emas()
    emas = [model.s_ema] + [e for m in model.tapered_norms() for e in (m.ema_num, m.ema_den)] + \
           [m.sigma_ema for m in model.fakelns()]
    assert all(e.value.dtype == torch.float32 and torch.isfinite(e.value) for e in emas)
    scales = [m.c for m in model.tapered_norms()] + [m.sigma_avg for m in model.fakelns()]
    assert all(s.dtype == torch.float32 and (s > 0).all() for s in scales)
    if not fakeln:
        assert model.s_tgt.item() > 0


@pytest.mark.parametrize('arch,norm,taper', [('llama', 'rmsnorm', 'internal'), ('gpt2', 'layernorm', 'all')])
def test_bf16_folded_model_matches_float64_gate_zero_model(arch, norm, taper):
    """fold.py's output, run under bf16 autocast as sample.py and evaluate.py run it on a GPU, gives
    the float64 g = 0 model's logits to bf16 precision."""
    model = tapered_at_zero(arch, norm, taper)
    folded = fold_model(model).eval()
    idx = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(3))
    with torch.no_grad(), bf16():
        logits = folded(idx)[0]
    assert relative_error(logits, float64_logits(model, idx)) < BF16_TOL


@pytest.mark.parametrize('arch,norm,taper', [('llama', 'rmsnorm', 'all'), ('gpt2', 'layernorm', 'all')])
def test_folded_all_taper_model_reports_the_g0_models_loss_and_prelogit_scale(arch, norm, taper):
    """Folding moves the final map into the head but leaves the pre-logit stream h alone: the folded
    model's cross-entropy and s(h) (what evaluate.py and the logs read) are the g = 0 model's."""
    model = tapered_at_zero(arch, norm, taper)
    folded = fold_model(model).eval()
    idx, targets = (torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(s)) for s in (6, 7))
    with torch.no_grad():
        stats, stats_folded = (m(idx, targets, return_stats=True)[2] for m in (model, folded))
    for key in ('ce', 'prelogit_scale'):
        assert stats_folded[key].item() == pytest.approx(stats[key].item(), rel=1e-5), key


def test_bf16_hf_export_matches_float64_gate_zero_model(tmp_path):
    """The exported GPT2LMHeadModel (LayerNorms as fixed maps through a large eps) under bf16
    autocast gives the float64 g = 0 model's logits to bf16 precision."""
    from transformers import GPT2LMHeadModel
    model = tapered_at_zero('gpt2', 'layernorm', 'all')
    export_hf(model, fold_model(model), tmp_path)
    hf = GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    idx = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(4))
    with torch.no_grad(), bf16():
        logits = hf(idx).logits
    assert relative_error(logits, float64_logits(model, idx)) < BF16_TOL


@pytest.mark.parametrize('arch,norm,taper,gate', [('llama', 'rmsnorm', 'internal', 0.0),
                                                  ('gpt2', 'layernorm', 'none', 1.0)])
def test_replayed_greedy_step_equals_generate(arch, norm, taper, gate):
    """The step bench.py captures as a CUDA graph (forward, argmax, position + 1, all in place on
    static buffers), replayed as a plain call, continues a prompt exactly as generate() does."""
    model = prepared(arch, norm, taper, gate)
    with torch.no_grad():  # unit-gain weights: greedy decoding then wanders instead of repeating
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, p.size(1) ** -0.5)
    idx = torch.randint(0, 64, (3, 6), generator=torch.Generator().manual_seed(5))
    expected = model.generate(idx, 14, temperature=0)
    assert all(len(set(row.tolist())) > 2 for row in expected[:, 6:])  # a stuck token would show
    model.setup_cache(3, 6 + 14)
    with torch.no_grad():
        token = model.decode(idx, torch.arange(6)).argmax(dim=-1, keepdim=True)
        pos = torch.tensor([6])
        tokens = [token.clone()]
        buffers = token.data_ptr(), pos.data_ptr()
        for _ in range(13):
            greedy_step(model.decode, token, pos)
            tokens.append(token.clone())
    assert (token.data_ptr(), pos.data_ptr()) == buffers  # a graph replays on the same memory
    assert pos.item() == 6 + 13
    assert torch.equal(torch.cat([idx, *tokens], dim=1), expected)
