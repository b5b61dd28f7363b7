"""
Beyond the paper: TaperNorm on HF Llama-family models (hf.py). Tiny random LlamaConfigs written with
save_pretrained stand in for hub checkpoints, varied over what a real one can set: grouped-query and
multi-query attention, a tied or untied head, a non-default rope_theta, Llama-3's rope scaling and
biases. transformers' own LlamaForCausalLM is the reference throughout.
"""
import copy
import json
import math
import os

import pytest
import torch

import conftest  # noqa: F401 (run as a script, it says how to run the tests)
from fold import fold_model, max_logit_diff
from hf import export_hf, from_pretrained

LLAMAS = {  # name: LlamaConfig fields beyond the common tiny shape
    'gqa': dict(num_key_value_heads=2),
    'mqa-tied': dict(num_key_value_heads=1, tie_word_embeddings=True),
    'biases-theta': dict(num_key_value_heads=4, attention_bias=True, mlp_bias=True, rope_theta=5e5),
    'llama3-rope': dict(num_key_value_heads=2, rope_parameters=dict(
        rope_type='llama3', rope_theta=5e5, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=16)),
}
VOCAB = 300


def write_llama(path, seed=0, **fields):
    """A tiny random LlamaForCausalLM saved as a user's local folder; every weight, norms included, is
    moved off its init so that a mis-mapped tensor shows."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    config = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, max_position_embeddings=128, rms_norm_eps=1e-6,
                  tie_word_embeddings=False) | fields
    hf = LlamaForCausalLM(LlamaConfig(**config))
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hf.save_pretrained(path)
    return hf.eval()


@pytest.fixture(scope='module', params=list(LLAMAS))
def llama(request, tmp_path_factory):
    """(folder, the transformers model) for each variant."""
    path = tmp_path_factory.mktemp(f'llama-{request.param}')
    return path, write_llama(path, **LLAMAS[request.param])


def tokens(T=100, B=2, seed=1):
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def test_logits_and_greedy_generation_match_transformers(llama):
    """Our arch='llama' on a loaded checkpoint equals LlamaForCausalLM: logits to float32 rounding
    relative to their scale, and KV-cached greedy decoding token for token."""
    path, hf = llama
    model = from_pretrained(path).eval()
    idx = tokens()
    with torch.no_grad():
        ref = hf(idx).logits
        assert (model(idx)[0] - ref).abs().max() <= 1e-4 * ref.abs().max()
    prompt = idx[:, :6]
    hf.generation_config.eos_token_id = None  # never stop early: compare all 12 tokens
    expected = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12,
                           do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(prompt, 12, temperature=0), expected)


def test_every_shape_comes_from_the_config(tmp_path):
    """GQA heads, the untied head, biases, intermediate size, rope_theta, eps and the context are read,
    not assumed; the KV cache holds n_kv_head heads; block_size shortens the context."""
    write_llama(tmp_path, num_key_value_heads=2, attention_bias=True, rope_theta=5e5)
    model = from_pretrained(tmp_path, block_size=32)
    cfg, attn = model.config, model.transformer.h[0].attn
    assert (cfg.n_kv_head, cfg.mlp_hidden, cfg.rope_theta, cfg.norm_eps) == (2, 96, 5e5, 1e-6)
    assert cfg.block_size == 32 and not cfg.tied_head and model.lm_head.weight is not model.transformer.wte.weight
    assert attn.c_attn.weight.shape == (64 + 2 * 2 * 16, 64) and attn.c_attn.bias is not None
    model.setup_cache(1, 8)
    assert attn.kv_cache.k.shape == (1, 2, 8, 16)


def tapered_at_zero(path, taper, steps=3):
    """The loaded model, tapered: calibrated on a few batches, then at g = 0 with gammatilde moved."""
    model = from_pretrained(path, taper=taper, aux_loss='fixed').train()
    for _ in range(steps):
        model(tokens(16, seed=2), tokens(16, seed=3))
        model.step_emas()
    model.start_taper()
    model.set_gate(0.0)
    with torch.no_grad():
        for m in model.tapered_norms():
            m.taper_weight.mul_(1 + 0.3 * torch.randn_like(m.taper_weight))
    return model.eval()


@pytest.mark.parametrize('taper', ['internal', 'all'])
def test_folding_a_loaded_llama_keeps_its_logits(llama, taper):
    """fold.py on a Llama at g = 0: internal norms into q/k/v and gate/up, All-Taper's final norm into
    the head, tied or not. Float32 to rounding, float64 exact."""
    model = tapered_at_zero(llama[0], taper)
    folded = fold_model(model)
    scale = model(tokens())[0].abs().max().item()
    assert max_logit_diff(model, folded, tokens()) <= 1e-5 * scale
    model64 = copy.deepcopy(model).double()  # the algebra alone, without float32 weights
    assert max_logit_diff(model64, fold_model(model64), tokens(), torch.float64) <= 1e-12 * scale
    assert folded.tapered_norms() == []
    head_is_embedding = folded.lm_head.weight is folded.transformer.wte.weight  # All-Taper: a head of its own
    assert head_is_embedding == (taper == 'internal' and model.config.tied_head)


def test_all_taper_export_reloads_in_transformers(llama, tmp_path):
    """An All-Taper Llama at g = 0 exports to a folder LlamaForCausalLM loads with our logits: every
    RMSNorm there is a constant through a large eps, the final one carrying c gammatilde."""
    from transformers import LlamaForCausalLM
    model = tapered_at_zero(llama[0], 'all')
    export_hf(model, fold_model(model), tmp_path)
    hf = LlamaForCausalLM.from_pretrained(tmp_path).eval()
    idx = tokens()
    with torch.no_grad():
        ours = model(idx)[0]
        assert (hf(idx).logits - ours).abs().max() <= 1e-4 * ours.abs().max()
    assert hf.config.tie_word_embeddings == model.config.tied_head


def test_internal_taper_does_not_export(tmp_path):
    """Internal-Taper keeps a real final RMSNorm, which cannot share the other norms' large eps."""
    write_llama(tmp_path / 'src', num_key_value_heads=2)
    with pytest.raises(ValueError, match='real final norm'):
        internal = tapered_at_zero(tmp_path / 'src', 'internal')
        export_hf(internal, fold_model(internal), tmp_path / 'out')


REFUSALS = [  # (LlamaConfig fields, words the one sentence must hold)
    (dict(hidden_act='gelu'), 'hidden_act'),
    (dict(sliding_window=16), 'sliding_window'),
    (dict(rope_parameters=dict(rope_type='linear', rope_theta=1e4, factor=2.0)), 'rope_type'),
    (dict(head_dim=32), 'head_dim'),
    (dict(rope_parameters=dict(rope_type='default', rope_theta=1e4, partial_rotary_factor=0.5)),
     'partial_rotary_factor'),
]


@pytest.mark.parametrize('fields,field', REFUSALS)
def test_what_the_model_cannot_compute_is_refused_by_name(tmp_path, fields, field):
    from transformers import LlamaConfig
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=1,
                         num_attention_heads=4, **fields)
    config.save_pretrained(tmp_path)  # the refusal comes from the config, before any weight is read
    with pytest.raises(ValueError, match=field) as e:
        from_pretrained(tmp_path)
    assert str(e.value).count('\n') == 0


@pytest.mark.parametrize('name', ['silu', 'swish', 'gelu_new', 'gelu_pytorch_tanh', 'gelu_python_tanh',
                                  'gelu_fast', 'gelu_accurate'])
def test_an_activation_named_by_another_of_its_names_loads_and_matches_transformers(tmp_path, name):
    """transformers computes SwiGLU's SiLU gate under 'silu' and 'swish', and GPT-2's tanh GELU under
    'gelu_new' and four other names. A config with any of them is the model this repository computes:
    it loads, and its logits are transformers' own model's with that config (the reference), in float64
    (to float32's rounding for the Llama, whose RoPE tables both compute in float32).
    Every other name stays refused (a GELU without tanh differs by 5e-4)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    if name in ('silu', 'swish'):
        hf = write_llama(tmp_path, hidden_act=name).double()
    else:
        torch.manual_seed(0)
        hf = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                        activation_function=name)).eval()
        hf.save_pretrained(tmp_path)
        hf = hf.double()
    model = from_pretrained(tmp_path).double().eval()
    idx = tokens(T=32)
    with torch.no_grad():
        ref = hf(idx).logits
        # float64 throughout for GPT-2; RoPE's tables are float32 in both Llamas
        assert (model(idx)[0] - ref).abs().max() <= (1e-5 if name in ('silu', 'swish') else 1e-10) * ref.abs().max()
    wrong = 'gelu' if name not in ('silu', 'swish') else 'gelu_new'  # the exact GELU; a GELU for the gate
    config = json.load(open(tmp_path / 'config.json'))
    config['activation_function' if 'activation_function' in config else 'hidden_act'] = wrong
    json.dump(config, open(tmp_path / 'config.json', 'w'))
    with pytest.raises(ValueError, match='which this model cannot compute'):
        from_pretrained(tmp_path)


@pytest.mark.parametrize('field', ['original_max_position_embeddings', 'factor'])
def test_a_llama3_rope_scaling_missing_a_field_is_refused_by_name(tmp_path, field):
    """Llama-3's RoPE scaling needs all four of its fields; transformers fills a lacking
    original_max_position_embeddings in from max_position_embeddings (another model, with a warning per
    read). A config.json edited to lack one is refused by name before transformers reads it."""
    write_llama(tmp_path, **LLAMAS['llama3-rope'])
    from_pretrained(tmp_path)  # as saved: it loads
    config = json.load(open(tmp_path / 'config.json'))
    rope = config.get('rope_parameters') or config['rope_scaling']
    del rope[field]
    json.dump(config, open(tmp_path / 'config.json', 'w'))
    with pytest.raises(ValueError, match=f"without {field}, which that scaling needs") as e:
        from_pretrained(tmp_path)
    assert str(e.value).count('\n') == 0


def test_context_and_model_type_refusals(tmp_path):
    from transformers import MistralConfig
    write_llama(tmp_path / 'llama')
    with pytest.raises(ValueError, match=r'block_size=4096 must lie in \[1, 128\]'):
        from_pretrained(tmp_path / 'llama', block_size=4096)
    with pytest.raises(ValueError, match='shape'):
        from_pretrained(tmp_path / 'llama', n_kv_head=1)
    MistralConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=1,
                  num_attention_heads=4).save_pretrained(tmp_path / 'mistral')
    with pytest.raises(ValueError, match="'mistral' model: only GPT-2 and Llama-family"):
        from_pretrained(tmp_path / 'mistral')


def test_checkpoints_from_before_these_fields_still_load(tmp_path):
    """A checkpoint whose model_args predate n_kv_head, tied_head, the biases and rope_scaling loads
    with their defaults, and train.py's resume check (expected fields) accepts it."""
    from dataclasses import asdict
    from model import GPT, GPTConfig
    model = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=16, vocab_size=32, block_size=8))
    args = {k: v for k, v in asdict(model.config).items()
            if k not in ('n_kv_head', 'tied_head', 'attn_bias', 'mlp_bias', 'rope_scaling')}
    torch.save(dict(model=model.state_dict(), model_args=args), tmp_path / 'old.pt')
    loaded = GPT.from_checkpoint(str(tmp_path / 'old.pt'), n_kv_head=0, tied_head=True, n_layer=1)
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight) and loaded.config.tied_head
    with pytest.raises(ValueError, match='n_kv_head=0, not n_kv_head=2'):
        GPT.from_checkpoint(str(tmp_path / 'old.pt'), n_kv_head=2)


# --- fine-tuning through the SmolLM2 configs, on data in the model's own tokens ------------------------

# The SmolLM2-135M configs at a tiny random Llama's shape, on a schedule of 16 steps: taper 3 -> 12.
SMOL_TINY = ['--device=cpu', '--n_layer=2', '--n_head=4', '--n_embd=64', '--n_kv_head=2', '--mlp_hidden=96',
             '--tied_head=False', '--vocab_size=50257', '--block_size=64', '--batch_size=4',
             '--gradient_accumulation_steps=2', '--max_iters=16', '--warmup_iters=2', '--lr_decay_iters=16',
             '--learning_rate=1e-3', '--min_lr=1e-4', '--taper_start=3', '--taper_end=12', '--eval_interval=8',
             '--eval_iters=2', '--log_interval=2', '--dtype=float32']


@pytest.fixture(scope='module')
def smol(tmp_path_factory):
    """A tiny random Llama with GPT-2's tokenizer saved beside it (a stand-in for a hub model and its
    tokenizer), and OpenWebText prepared in that tokenizer's tokens by prepare_owt.py --tokenizer."""
    from conftest import SHARED, gpt2_tokenizer, require_shared, run
    require_shared()
    root = tmp_path_factory.mktemp('smol')
    write_llama(root / 'model', vocab_size=50257, num_key_value_heads=2, max_position_embeddings=256,
                bos_token_id=50256, eos_token_id=50256)
    gpt2_tokenizer(root / 'model')
    run('prepare_owt.py', '--input_file', SHARED / 'openwebtext' / 'sample.jsonl', '--val_fraction=0.05',
        '--tokenizer', root / 'model', '--out_dir', root / 'data', '--num_proc=1')
    return root


@pytest.fixture(scope='module')
def smol_runs(smol):
    from conftest import ROOT, run_pairwise
    run_pairwise(*[('train.py', ROOT / 'config' / f'finetune_smollm2_135m_{setting}.py', *SMOL_TINY,
                    f"--init_from={smol / 'model'}", f"--data_dir={smol / 'data'}", f"--out_dir={smol / setting}")
                   for setting in ('baseline', 'internaltaper', 'alltaper')])
    return smol


@pytest.mark.parametrize('setting', ['baseline', 'internaltaper', 'alltaper'])
def test_smollm2_configs_fine_tune_a_llama_to_g_zero(smol_runs, setting):
    """train.py config/finetune_smollm2_135m_*.py from an HF Llama folder runs each setting end to end:
    the tapered ones end at g = 0 with c calibrated and s_tgt frozen for the fixed-target loss. (On a
    random 2-layer model, 16 steps show that the settings run, not their quality: the loss falls
    with a final norm; without one, All-Taper's rises here, finite.)"""
    import json
    from model import GPT
    rows = [json.loads(line) for line in open(smol_runs / setting / 'log.jsonl')]
    train_rows = [r for r in rows if 'lr' in r]
    assert all(math.isfinite(r['loss']) for r in rows)
    assert (train_rows[-1]['loss'] < train_rows[0]['loss']) or setting == 'alltaper'
    model = GPT.from_checkpoint(str(smol_runs / setting / 'ckpt.pt'))
    assert (model.config.n_kv_head, model.config.tied_head) == (2, False)
    if setting != 'baseline':
        assert model.started and model.gate.item() == 0.0 and rows[-1]['eval_gate'] == 0.0
        assert all(m.c.item() > 0 for m in model.tapered_norms()) and model.s_tgt.item() > 0


def test_fold_export_sample_evaluate_and_bench_a_fine_tuned_llama(smol_runs, tmp_path):
    """The whole path of the README's "Your own Llama model": fold.py keeps the logits; the All-Taper
    export loads in LlamaForCausalLM with the same logits on validation text; Internal-Taper's export
    is refused in one sentence; sample.py decodes with the model's own tokenizer; evaluate.py scores
    the folded model as the unfolded one; bench.py times the HF folder's shape."""
    import json
    import re
    from transformers import LlamaForCausalLM
    from conftest import run
    from model import GPT
    from tokens import open_tokens
    for setting in ('internaltaper', 'alltaper'):
        out = run('fold.py', f"--out_dir={smol_runs / setting}").stdout
        diff, scale = map(float, re.search(r'\| = (\S+) on validation text \(max \|logits\| (\S+),', out).groups())
        assert diff <= 1e-5 * scale
    out = run('fold.py', f"--out_dir={smol_runs / 'alltaper'}", f"--export_hf={tmp_path / 'hf'}").stdout
    assert 'LlamaForCausalLM' in out
    umask = os.umask(0)
    os.umask(umask)  # every file of the export as readable as the umask allows, the weights too
    assert {f.name: f.stat().st_mode & 0o777 for f in (tmp_path / 'hf').iterdir()} == \
        {f.name: 0o666 & ~umask for f in (tmp_path / 'hf').iterdir()}
    from transformers import AutoTokenizer  # the run's tokenizer travels with the export
    assert AutoTokenizer.from_pretrained(tmp_path / 'hf')('The city')['input_ids'] == [464, 1748]
    hf = LlamaForCausalLM.from_pretrained(tmp_path / 'hf').eval()
    model = GPT.from_checkpoint(str(smol_runs / 'alltaper' / 'ckpt.pt')).eval()
    model.set_gate(0.0)
    idx = torch.from_numpy(open_tokens(smol_runs / 'data', 'val')[:2 * 64].astype('int64')).view(2, 64)
    with torch.no_grad():
        ours = model(idx)[0]
        assert (hf(idx).logits - ours).abs().max() <= 1e-4 * ours.abs().max()
    refused = run('fold.py', f"--out_dir={smol_runs / 'internaltaper'}", f"--export_hf={tmp_path / 'no'}", check=False)
    assert refused.returncode == 1 and 'real final norm' in refused.stderr and refused.stderr.count('\n') == 1
    text = run('sample.py', f"--out_dir={smol_runs / 'alltaper'}", '--ckpt=ckpt_folded.pt', '--device=cpu',
               '--num_samples=1', '--max_new_tokens=8', '--start=The city').stdout
    assert 'The city' in text
    scores = [json.loads(run('evaluate.py', f"--out_dir={smol_runs / 'alltaper'}", f'--ckpt={ckpt}',
                             f"--data_dir={smol_runs / 'data'}", '--device=cpu', '--max_chunks=8',
                             '--batch_size=4').stdout.strip().splitlines()[-1]) for ckpt in ('ckpt.pt', 'ckpt_folded.pt')]
    assert scores[0]['label'] == 'All-Taper (+fixed-target aux)' and scores[0]['owt'] == pytest.approx(scores[1]['owt'], rel=1e-5)
    bench = json.loads(run('bench.py', f"--init_from={smol_runs / 'model'}", '--fused', '--device=cpu',
                           '--batch_size=1', '--prompt_len=8', '--max_new_tokens=4', '--repeats=1').stdout.strip().splitlines()[-1])
    assert {r['variant'] for r in bench['rows']} == {'baseline', 'fused'}


def test_an_export_with_reset_unseen_embeddings_is_the_folded_checkpoint(smol_runs, tmp_path):
    """fold.py --reset_unseen --export_hf: the export holds the same reset input rows as the folded
    checkpoint it writes beside it, so transformers' LlamaForCausalLM gives that checkpoint's logits on a
    window holding a token absent from train.bin, where the reset changes them (the reference: our model
    from the folded file, against transformers' own class)."""
    import numpy as np
    from transformers import LlamaForCausalLM
    from conftest import run
    from model import GPT
    from tokens import open_tokens
    run('fold.py', f"--out_dir={smol_runs / 'alltaper'}", '--reset_unseen', '--out=ckpt_reset.pt',
        f"--export_hf={tmp_path / 'hf'}")
    counts = np.bincount(open_tokens(smol_runs / 'data', 'train'), minlength=50257)
    val = open_tokens(smol_runs / 'data', 'val')
    at = int(np.flatnonzero(counts[val[:200_000]] == 0)[0])  # a token the run never trained on
    idx = torch.from_numpy(val[max(0, at - 32):max(0, at - 32) + 64].astype('int64'))[None]
    reset = GPT.from_checkpoint(str(smol_runs / 'alltaper' / 'ckpt_reset.pt')).eval()
    kept = GPT.from_checkpoint(str(smol_runs / 'alltaper' / 'ckpt.pt')).eval()  # the model before the reset
    kept.set_gate(0.0)
    hf = LlamaForCausalLM.from_pretrained(tmp_path / 'hf').eval()
    with torch.no_grad():
        ours = reset(idx)[0]
        assert (hf(idx).logits - ours).abs().max() <= 1e-4 * ours.abs().max()
        # the reset is visible on this window, so the comparison above tells the two apart
        assert (kept(idx)[0] - ours).abs().max() > 1e-3 * ours.abs().max()
    assert '--reset_unseen' in (tmp_path / 'hf' / 'README.md').read_text()  # the card says what it holds


def rescaled(model, scale):
    """The same function with its residual stream `scale` times larger: embeddings and every block's
    output layer times scale, every tapered norm's c over scale (and a tied head's final map over
    scale again, since the head reads the scaled embedding)."""
    model = copy.deepcopy(model)
    t = model.transformer
    with torch.no_grad():
        tied = model.lm_head.weight is t.wte.weight
        for w in [t.wte.weight] + ([t.wpe.weight] if hasattr(t, 'wpe') else []):
            w.mul_(scale)
        for block in t.h:
            for linear in (block.attn.c_proj, block.mlp.w2 if hasattr(block.mlp, 'w2') else block.mlp.c_proj):
                linear.weight.mul_(scale)
                if linear.bias is not None:
                    linear.bias.mul_(scale)
        for norm in model.tapered_norms():
            norm.c.div_(scale)
        if tied:
            t.ln_f.taper_weight.div_(scale)
            if getattr(t.ln_f, 'bias', None) is not None:
                t.ln_f.bias.div_(scale)
    return model


EXPORT_TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 6e-2, torch.float16: 1e-2}  # of max |logits|: ~2^-8, 2^-11 times 8-20


@pytest.mark.parametrize('kind', ['llama', 'llama-tied', 'gpt2'])
def test_exports_hold_in_every_dtype_at_any_residual_scale(tmp_path, kind):
    """The export's representation of "no norm" (hf.no_norm_constants) keeps float32, bfloat16 and
    float16 finite and close to the float64 g = 0 model while the residual stream's scale runs over
    seven decades, where our own model run in float16 overflows at the top; transformers' greedy
    generate gives the float64 model's tokens in float32 and float16."""
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel
    if kind == 'gpt2':
        torch.manual_seed(0)
        hf = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4))
        with torch.no_grad():
            for p in hf.parameters():
                p.add_(0.05 * torch.randn_like(p))
        hf.save_pretrained(tmp_path / 'src')
    else:
        write_llama(tmp_path / 'src', num_key_value_heads=2, tie_word_embeddings=kind == 'llama-tied')
    torch.manual_seed(0)
    base, idx = tapered_at_zero(tmp_path / 'src', 'all'), tokens()
    for scale in (1e-3, 1.0, 1e2, 1e4):
        model = rescaled(base, scale).eval()
        with torch.no_grad():
            reference = copy.deepcopy(model).double()(idx)[0]
            greedy = copy.deepcopy(model).double().generate(idx[:1, :8], 24, temperature=0)
        export_hf(model, fold_model(model), tmp_path / f'{scale:g}')
        for dtype, tolerance in EXPORT_TOLERANCE.items():
            hf = AutoModelForCausalLM.from_pretrained(tmp_path / f'{scale:g}', dtype=dtype).eval()
            with torch.no_grad():
                logits = hf(idx).logits.double()
                same = torch.equal(hf.generate(idx[:1, :8], max_new_tokens=24, do_sample=False), greedy)
            error = ((logits - reference).abs().max() / reference.abs().max()).item()
            agree = (logits.argmax(-1) == reference.argmax(-1)).double().mean().item()
            print(f"{kind} residual x{scale:g} {str(dtype).removeprefix('torch.')}: {error:.2e}, argmax {agree:.3f}, "
                  f"greedy text {'the same' if same else 'differs'}")
            assert error <= tolerance and agree >= 0.95, (scale, dtype, error, agree)
            assert same or dtype == torch.bfloat16, (scale, dtype)  # bfloat16's rounding may flip a near-tie
