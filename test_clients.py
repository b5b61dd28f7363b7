"""
The norm-free exports (fold.py --export_hf) in the libraries people run models with: transformers'
pipeline in float32, bfloat16 and float16, PEFT, TransformerLens and lm-evaluation-harness. Two runs
stand in for a user's: an All-Taper Llama on TinyStories (SentencePiece tokens) and an All-TaperLN
GPT-2 on OpenWebText (tiktoken's GPT-2 BPE), each trained to g = 0 by train.py and exported by
fold.py. Our own sample.py and evaluate.py, and the float64 model at g = 0, are the references.
peft, transformer_lens and lm_eval are test-only dependencies (requirements-test.txt).
"""

import json
import shutil

import numpy as np
import pytest
import torch

from conftest import SHARED, TINY, gpt2_tokenizer, require_shared, run
from model import GPT, load_checkpoint
from tokens import load_tokenizer

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
PROMPTS = {'llama': 'Once upon a time, there was a little', 'gpt2': 'The first thing you should know is'}


@pytest.fixture(scope='module', params=['llama', 'gpt2'])
def export(request, data_dir, tmp_path_factory):
    """(arch, the run folder, the export folder) of a tiny norm-free run trained to g = 0 and exported."""
    require_shared()
    arch, root = request.param, tmp_path_factory.mktemp(f'export-{request.param}')
    if arch == 'llama':
        data, flags = data_dir, []
    else:
        import prepare_owt
        data = root / 'owt'
        prepare_owt.main(['--input_file', str(SHARED / 'openwebtext' / 'sample.jsonl'), '--val_fraction', '0.1',
                          '--num_proc', '1', '--skip_pile', '--out_dir', str(data)])
        flags = ['--arch=gpt2', '--norm=layernorm', '--vocab_size=50257']
    run('train.py', *TINY, *flags, '--taper=all', f'--data_dir={data}', f'--out_dir={root / "run"}')
    run('fold.py', f'--out_dir={root / "run"}', f'--export_hf={root / "hf"}')
    return arch, root / 'run', root / 'hf'


def our_model(run_dir, ckpt='ckpt.pt'):
    checkpoint = load_checkpoint(str(run_dir / ckpt))
    model = GPT.from_checkpoint(checkpoint).eval()
    if model.tapered_norms():
        model.set_gate(0.0)
    return model, checkpoint


def held_out_texts(arch, n=20):
    if arch == 'llama':
        stories = (SHARED / 'tinystories' / 'valid_sample.txt').read_text(encoding='utf-8').split('\n\n')
        return [s.strip() for s in stories if s.strip()][:n]
    lines = (SHARED / 'openwebtext' / 'sample.jsonl').read_text(encoding='utf-8').splitlines()
    return [json.loads(line)['text'][:2000] for line in lines[-n:]]


def test_every_export_carries_a_tokenizer_that_encodes_as_the_run_did(export):
    """AutoTokenizer on the export encodes and decodes held-out text as the run's own tokenizer
    (SentencePiece, or tiktoken) does; the GPT-2 one also as transformers' GPT2TokenizerFast built from
    tiktoken's original files. bos/eos ids in the config are the tokenizer's."""
    from transformers import AutoConfig, AutoTokenizer
    arch, run_dir, hf_dir = export
    tok = AutoTokenizer.from_pretrained(hf_dir)
    encode, decode = load_tokenizer(our_model(run_dir)[1]['tokenizer'])
    texts = held_out_texts(arch) + ['  two  spaces ', 'caf\u00e9 \u65e5\u672c \U0001F600', '3.14159 and 2048']
    references = [encode] if arch == 'llama' else [encode, gpt2_tokenizer(hf_dir.parent / 'gpt2-tok')]
    for reference in references:
        if not callable(reference):
            reference = AutoTokenizer.from_pretrained(reference).encode
        assert [tok.encode(t) for t in texts] == [reference(t) for t in texts]
    assert [tok.decode(encode(t), skip_special_tokens=True) for t in texts] == [decode(encode(t)) for t in texts]
    config = AutoConfig.from_pretrained(hf_dir)
    assert (config.bos_token_id, config.eos_token_id) == (tok.bos_token_id, tok.eos_token_id)
    assert (hf_dir / 'README.md').read_text().count('| float16 |') == 1  # the card's measured table


def test_the_scripts_read_an_export_as_its_runs_own_tokenizer(export, tmp_path):
    """train.py, evaluate.py and diagnose.py accept an export on its run's own data: tokens.same_tokenizer
    finds the export's tokenizer.json (as hf.tokenizer_reference reads it) and the run's tokenizer
    alike by what they encode, and a tokenizer of the same size trained on other text unlike. A
    GPT-2-shaped folder whose tokenizer.json is not GPT-2's is read as its own, not as tiktoken's."""
    import sentencepiece as spm
    from transformers import AutoTokenizer, GPT2Config
    from hf import tokenizer_reference
    from tokens import hf_tokenizer, same_tokenizer
    arch, run_dir, hf_dir = export
    ours, theirs = our_model(run_dir)[1]['tokenizer'], tokenizer_reference(str(hf_dir))
    assert same_tokenizer(ours, theirs) and same_tokenizer(theirs, ours)
    if arch == 'gpt2':
        assert theirs == dict(kind='tiktoken', name='gpt2')
        return
    assert (ours['kind'], theirs['kind']) == ('sentencepiece', 'hf')
    size = spm.SentencePieceProcessor(model_proto=ours['model'].numpy().tobytes()).get_piece_size()
    spm.SentencePieceTrainer.train(
        input=str(SHARED / 'tinystories' / 'valid_sample.txt'), model_prefix=str(tmp_path / 'other'),
        vocab_size=size, model_type='bpe', byte_fallback=True, normalization_rule_name='identity',
        character_coverage=1.0, split_digits=True, minloglevel=2)
    other = dict(kind='sentencepiece', model=torch.frombuffer(bytearray((tmp_path / 'other.model').read_bytes()),
                                                              dtype=torch.uint8))
    other_hf = hf_tokenizer(other)
    other_hf = dict(kind='hf', json=other_hf.backend_tokenizer.to_str(), eos_id=other_hf.eos_token_id)
    assert not same_tokenizer(other_hf, ours) and not same_tokenizer(other, theirs)
    gpt2_shaped = tmp_path / 'gpt2-shaped'
    GPT2Config(vocab_size=size, n_layer=1, n_head=1, n_embd=8).save_pretrained(gpt2_shaped)
    AutoTokenizer.from_pretrained(hf_dir).save_pretrained(gpt2_shaped)
    read = tokenizer_reference(str(gpt2_shaped))
    assert read['kind'] == 'hf' and same_tokenizer(ours, read)


def test_a_run_moved_with_its_export_exports_again_into_it(export, tmp_path):
    """A run folder moved together with its export (a project folder moved or copied): fold.py
    --export_hf into the moved export replaces it, as it would in place, since the export records its
    run (run_id) beside the checkpoint's path. Another run's export is still refused, untouched."""
    arch, run_dir, hf_dir = export
    if arch == 'gpt2':
        pytest.skip('the run_id check does not depend on the architecture: the Llama export shows it')
    shutil.copytree(run_dir, tmp_path / 'run')
    shutil.copytree(hf_dir, tmp_path / 'hf')
    shutil.copytree(hf_dir, tmp_path / 'other')
    config = json.loads((tmp_path / 'other' / 'config.json').read_text())
    config['tapernorm_export']['run_id'] = 'another run'
    (tmp_path / 'other' / 'config.json').write_text(json.dumps(config))
    before = (tmp_path / 'other' / 'config.json').read_bytes()
    proc = run('fold.py', f'--out_dir={tmp_path / "run"}', '--out=ckpt_folded_2.pt', f'--export_hf={tmp_path / "other"}',
               check=False)
    assert proc.returncode == 1 and f'holds an export of {run_dir / "ckpt.pt"}' in proc.stderr, proc.stderr[-2000:]
    assert (tmp_path / 'other' / 'config.json').read_bytes() == before
    run('fold.py', f'--out_dir={tmp_path / "run"}', f'--export_hf={tmp_path / "hf"}')
    record = json.loads((tmp_path / 'hf' / 'config.json').read_text())['tapernorm_export']
    assert record['source'] == str(tmp_path / 'run' / 'ckpt.pt')
    assert record['run_id'] == load_checkpoint(str(run_dir / 'ckpt.pt'))['run_id']


@pytest.mark.parametrize('dtype', DTYPES, ids=lambda d: str(d).removeprefix('torch.'))
def test_pipeline_needs_nothing_else_and_matches_the_float64_model_in_every_dtype(export, dtype):
    """pipeline('text-generation', model=<export>) with only a dtype: in float32 its greedy text is
    sample.py's with --temperature=0; in every dtype the export's logits are the float64 g = 0 model's to
    that dtype's rounding (relative to their scale), with the same argmax almost everywhere."""
    from transformers import AutoModelForCausalLM, pipeline
    arch, run_dir, hf_dir = export
    model, checkpoint = our_model(run_dir)
    encode, _ = load_tokenizer(checkpoint['tokenizer'])
    idx = torch.tensor([encode(t)[:64] for t in held_out_texts(arch, 4) if len(encode(t)) >= 64])
    with torch.no_grad():
        reference = model.double()(idx)[0]
        logits = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=dtype).eval()(idx).logits.double()
    tolerance = {torch.float32: 1e-5, torch.bfloat16: 5e-2, torch.float16: 1e-2}[dtype]
    assert (logits - reference).abs().max() <= tolerance * reference.abs().max()
    assert (logits.argmax(-1) == reference.argmax(-1)).double().mean() >= 0.95
    generate = pipeline('text-generation', model=str(hf_dir), dtype=dtype)
    text = generate(PROMPTS[arch], max_new_tokens=20, do_sample=False)[0]['generated_text']
    assert text.startswith(PROMPTS[arch]) and len(text) > len(PROMPTS[arch])
    if dtype == torch.float32:
        ours = run('sample.py', f'--out_dir={run_dir}', '--device=cpu', f'--start={PROMPTS[arch]}',
                   '--num_samples=1', '--max_new_tokens=20', '--temperature=0').stdout
        assert text == ours.split('\n---------------')[0].splitlines()[-1] or text in ours


def test_peft_lora_trains_saves_and_reloads_on_the_export(export, tmp_path):
    """PEFT wraps every linear layer of the export with LoRA: at init it is the export (B = 0); one
    AdamW step moves the loss; the adapter saves and reloads onto a fresh export with the same logits."""
    pytest.importorskip('peft', reason='pip install -r requirements-test.txt')
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM
    arch, run_dir, hf_dir = export
    encode, _ = load_tokenizer(our_model(run_dir)[1]['tokenizer'])
    idx = torch.tensor([encode(t)[:48] for t in held_out_texts(arch, 6) if len(encode(t)) >= 48][:2])
    base = AutoModelForCausalLM.from_pretrained(hf_dir)
    with torch.no_grad():
        before = base(idx).logits
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules='all-linear', init_lora_weights=True))
    with torch.no_grad():
        assert torch.equal(lora(idx).logits, before)
    optimizer = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-2)
    loss = lora(idx, labels=idx).loss
    loss.backward()
    optimizer.step()
    lora.eval()
    with torch.no_grad():
        trained = lora(idx).logits
        assert lora(idx, labels=idx).loss < loss
    lora.save_pretrained(tmp_path / 'adapter')
    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(hf_dir), tmp_path / 'adapter').eval()
    with torch.no_grad():
        assert (reloaded(idx).logits - trained).abs().max() <= 1e-6 * trained.abs().max()


def residual_streams(model, idx):
    """Our model's residual stream entering each block and after the last, (n_layer + 1, B, T, d)."""
    streams = []
    hooks = [block.register_forward_pre_hook(lambda m, args: streams.append(args[0])) for block in model.transformer.h]
    hooks.append(model.transformer.ln_f.register_forward_pre_hook(lambda m, args: streams.append(args[0])))
    with torch.no_grad():
        logits = model(idx)[0]
    for hook in hooks:
        hook.remove()
    return logits, torch.stack(streams)


def test_transformer_lens_reproduces_logits_and_every_residual_stream(export):
    """TransformerLens's bridge loads the export: its logits are the folded run's, and its residual
    stream before every block (and after the last) is ours times the export's alpha (hf.py scales the
    stream so that float16 holds it), relative to each layer's scale; its greedy generate (without its
    KV cache, whose GPT-2 path in TransformerLens 4.3.0 disagrees with its own forward) gives our folded
    model's tokens."""
    pytest.importorskip('transformer_lens', reason='pip install -r requirements-test.txt')
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoConfig
    arch, run_dir, hf_dir = export
    run('fold.py', f'--out_dir={run_dir}', '--out=ckpt_folded.pt')  # the fixture's fold wrote it; same file again
    model, checkpoint = our_model(run_dir, 'ckpt_folded.pt')
    model = model.double()
    encode, _ = load_tokenizer(checkpoint['tokenizer'])
    idx = torch.tensor([encode(t)[:40] for t in held_out_texts(arch, 4) if len(encode(t)) >= 40][:2])
    alpha = AutoConfig.from_pretrained(hf_dir).tapernorm_export['alpha']
    ours, streams = residual_streams(model, idx)
    bridge = TransformerBridge.boot_transformers(str(hf_dir), device='cpu', dtype=torch.float32)
    logits, cache = bridge.run_with_cache(idx)
    assert (logits.double() - ours).abs().max() <= 1e-4 * ours.abs().max()
    n = model.config.n_layer
    theirs = [cache[f'blocks.{i}.hook_resid_pre'] for i in range(n)] + [cache[f'blocks.{n - 1}.hook_resid_post']]
    for layer, (a, b) in enumerate(zip(theirs, streams)):
        assert (a.double() / alpha - b).abs().max() <= 1e-4 * b.abs().max(), layer
    with torch.no_grad():  # greedy decoding through the bridge gives our model's tokens
        greedy = model.generate(idx[:1, :8], 16, temperature=0)
        theirs = bridge.generate(idx[:1, :8], max_new_tokens=16, do_sample=False, verbose=False,
                                 use_past_kv_cache=False)
    assert torch.equal(theirs.cpu(), greedy)


def test_lm_eval_harness_rolling_loglikelihood_equals_evaluate_py(export, tmp_path):
    """lm-evaluation-harness scores a local task (a jsonl of held-out text, perplexity through
    loglikelihood_rolling) on the export; on the very tokens it scored, written as a data folder,
    evaluate.py --init_from=<export> gives the same log-likelihood."""
    pytest.importorskip('lm_eval', reason='pip install -r requirements-test.txt')
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    arch, run_dir, hf_dir = export
    lm = HFLM(pretrained=str(hf_dir), dtype='float32', batch_size=1, device='cpu')
    chunk = min(1024, our_model(run_dir)[0].config.block_size)
    # a held-out text of exactly chunk - 1 tokens that lm-eval encodes back to the same tokens
    for text in held_out_texts(arch, 50):
        ids = lm.tok_encode(text)[:chunk - 1]
        doc = lm.tokenizer.decode(ids, skip_special_tokens=True)
        if len(ids) == chunk - 1 and lm.tok_encode(doc) == ids:
            break
    else:
        pytest.fail("no held-out text round-trips through the tokenizer")
    (tmp_path / 'docs.jsonl').write_text(json.dumps({'text': doc}) + '\n')
    (tmp_path / 'task.yaml').write_text(
        "task: tapernorm_heldout\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {tmp_path / 'docs.jsonl'}\n"
        "test_split: test\noutput_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list:\n  - metric: word_perplexity\n  - metric: bits_per_byte\n")
    result = lm_eval.simple_evaluate(model=lm, tasks=['tapernorm_heldout'], log_samples=True,
                                     task_manager=TaskManager(include_path=str(tmp_path)))
    loglikelihood = result['samples']['tapernorm_heldout'][0]['resps'][0][0]
    loglikelihood = loglikelihood[0] if isinstance(loglikelihood, (list, tuple)) else loglikelihood
    data = tmp_path / 'data'
    data.mkdir()
    np.array([lm.prefix_token_id, *ids], dtype=np.uint16).tofile(data / 'val.bin')
    meta = dict(dtype='uint16', vocab_size=len(lm.tokenizer), eot_token=lm.tokenizer.eos_token_id)
    if arch == 'gpt2':  # a GPT-2 reads GPT-2's BPE, as prepare_owt.py writes it
        meta['tokenizer'] = 'tiktoken'
    else:  # an HF model's data carries its tokenizer, as prepare_owt.py --tokenizer writes it
        shutil.copytree(hf_dir, data / 'tokenizer', ignore=lambda d, names: [n for n in names if not n.startswith(
            ('tokenizer', 'special_tokens'))])
        meta.update(tokenizer='hf', tokenizer_dir='tokenizer')
    (data / 'meta.json').write_text(json.dumps(meta))
    out = run('evaluate.py', f'--init_from={hf_dir}', f'--data_dir={data}', '--batch_size=1', '--device=cpu').stdout
    scores = json.loads(out.strip().splitlines()[-1])
    assert 'norm-free' in scores['label'] and "has no pile.bin or pile_filtered.bin, so the table shows '-'" in out
    assert -scores['owt'] * (chunk - 1) == pytest.approx(loglikelihood, rel=1e-5)


def test_lm_eval_harness_greedy_generation_is_the_float64_models(export, tmp_path):
    """lm-evaluation-harness's generate_until on the export (greedy, 16 new tokens, a local task of
    held-out prompts) writes, for every prompt, the continuation that the float64 model at g = 0 gives
    by argmax from the very tokens lm-eval encoded, decoded and cut at the stop strings as lm-eval cuts."""
    pytest.importorskip('lm_eval', reason='pip install -r requirements-test.txt')
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager
    arch, run_dir, hf_dir = export
    lm = HFLM(pretrained=str(hf_dir), dtype='float32', batch_size=1, device='cpu')
    prompts = [PROMPTS[arch]] + [' '.join(text.split()[:12]) for text in held_out_texts(arch, 3)[1:]]
    (tmp_path / 'prompts.jsonl').write_text(''.join(json.dumps({'prompt': p, 'target': ''}) + '\n' for p in prompts))
    (tmp_path / 'task.yaml').write_text(
        "task: tapernorm_greedy\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {tmp_path / 'prompts.jsonl'}\n"
        "test_split: test\noutput_type: generate_until\ndoc_to_text: '{{prompt}}'\ndoc_to_target: '{{target}}'\n"
        "generation_kwargs:\n  until: ['@@@']\n  do_sample: false\n  max_gen_toks: 16\n"
        "metric_list:\n  - metric: exact_match\n")
    result = lm_eval.simple_evaluate(model=lm, tasks=['tapernorm_greedy'], log_samples=True,
                                     task_manager=TaskManager(include_path=str(tmp_path)))
    written = {s['doc']['prompt']: s['resps'][0][0] for s in result['samples']['tapernorm_greedy']}
    model = our_model(run_dir)[0].double()
    stops = ['@@@', lm.tokenizer.decode([lm.tokenizer.eos_token_id])]
    for prompt in prompts:
        idx = lm.tok_batch_encode([prompt])[0]
        with torch.no_grad():
            for _ in range(16):
                idx = torch.cat([idx, model(idx)[0][:, -1:].argmax(-1)], dim=1)
                if idx[0, -1].item() == lm.tokenizer.eos_token_id:
                    break
        text = lm.tok_decode(idx[0, len(lm.tok_batch_encode([prompt])[0][0]):].tolist())
        for stop in stops:
            text = text.split(stop)[0]
        assert written[prompt] == text, prompt
