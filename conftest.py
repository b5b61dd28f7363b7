"""
What the test files share: the repository's paths, a runner for its scripts, and one TinyStories
dataset prepared once per session from the local sample in ../shared/data.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent / 'shared' / 'data'
os.environ.setdefault('TIKTOKEN_CACHE_DIR', str(SHARED / 'tiktoken'))  # GPT-2 BPE offline
# A tiny model and schedule: 40 steps, warmup and taper start at 8, g = 0 from 32.
TINY = ['--device=cpu', '--vocab_size=512', '--n_layer=2', '--n_head=4', '--n_embd=64',
        '--block_size=64', '--batch_size=8', '--max_iters=40', '--warmup_iters=8', '--taper_start=8',
        '--taper_end=32', '--lr_decay_iters=40', '--eval_interval=20', '--eval_iters=4',
        '--log_interval=4', '--learning_rate=3e-3']


def require_shared():
    """Skip, saying why, where the offline samples are not beside the repository (CI has them)."""
    if not SHARED.is_dir():
        pytest.skip(f"needs the offline data samples in {SHARED} (../shared/data beside the repository)")


# A gloo rank sometimes aborts while its process exits, after the run's last checkpoint is written
# (seen twice in about 40 torchrun launches of a CI run; 0 of 12 alone). Its work is on disk, and the
# tests compare it, so that abort alone does not fail a launch.
TEARDOWN_ABORT = 'terminate called without an active exception'


def run(script, *args, torchrun=0, check=True, env=None):
    launcher = [sys.executable]
    if torchrun:
        launcher += ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={torchrun}']
    proc = subprocess.run(launcher + [str(ROOT / script), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env=None if env is None else {**os.environ, **env})
    if check and proc.returncode != 0 and not (torchrun and TEARDOWN_ABORT in proc.stderr):
        raise AssertionError(f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def train_namespace(*args):
    """train.py run in this process, best with --eval_only (it builds the model, evaluates it once and
    stops): its globals, so that a test calls the script's own functions (get_gate, get_step_batches)."""
    import runpy
    argv = sys.argv
    sys.argv = ['train.py', *map(str, args)]
    try:
        return runpy.run_path(str(ROOT / 'train.py'))
    finally:
        sys.argv = argv


def pretrained_layernorm_std(hf, batches):
    """Baroni et al.'s pretrained sigma of every LayerNorm of transformers' GPT2LMHeadModel hf (in eval
    mode), keyed by its name, written out from generate_std_dict.py: torch's std (N - 1) over every element of
    positions 1.. of the LayerNorm's input, each token's vector centered first (TransformerLens's
    centered writing weights, which that script runs with, do that centering), in float64."""
    import torch
    inputs = {}
    hooks = [m.register_forward_pre_hook(lambda m, args, name=name: inputs.setdefault(name, []).append(args[0]))
             for name, m in hf.named_modules() if isinstance(m, torch.nn.LayerNorm)]
    with torch.no_grad():
        for idx in batches:
            hf(idx)
    for hook in hooks:
        hook.remove()
    stds = {}
    for name, hs in inputs.items():
        h = torch.cat(hs).double()
        stds[name] = (h - h.mean(-1, keepdim=True))[:, 1:].std().item()
    return stds


@pytest.fixture(scope='session')
def data_dir(tmp_path_factory):
    """prepare_tinystories.py on the local sample, with a 512-token vocab."""
    require_shared()
    import prepare_tinystories
    out = tmp_path_factory.mktemp('tinystories512')
    prepare_tinystories.main(['--input_file', str(SHARED / 'tinystories' / 'train_sample.txt'),
                              '--val_file', str(SHARED / 'tinystories' / 'valid_sample.txt'),
                              '--vocab_size', '512', '--out_dir', str(out), '--num_proc', '2'])
    return out


def word_tokenizer(path, n_words, eos=True):
    """A Llama-shaped tokenizer over n_words words w0, w1, ..., saved to path: ids 0, 1, 2 are [UNK], <s>
    (BOS, put before each text) and </s> (EOS, left out with eos=False); word i is id i + 3."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    vocab = {'[UNK]': 0, '<s>': 1, '</s>': 2} | {f'w{i}': i + 3 for i in range(n_words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token='[UNK]'))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single='<s> $A', special_tokens=[('<s>', 1)])
    specials = dict(bos_token='<s>', eos_token='</s>') if eos else {}
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='[UNK]', **specials).save_pretrained(path)
    return path


def gpt2_tokenizer(path):
    """transformers' GPT-2 tokenizer built from tiktoken's own GPT-2 files, offline, saved to path."""
    from transformers import GPT2TokenizerFast
    # tiktoken's cache names its files by the sha1 of their URL: encoder.json, then vocab.bpe.
    encoder = json.load(open(SHARED / 'tiktoken' / '6c7ea1a7e38e3a7f062df639a5b80947f075ffe6'))
    lines = open(SHARED / 'tiktoken' / '6d1cbeee0f20b3d9449abfede4726ed8212e3aee', encoding='utf-8').read()
    merges = [tuple(line.split()) for line in lines.splitlines()[1:] if line]  # line 0: '#version'
    GPT2TokenizerFast(vocab=encoder, merges=merges).save_pretrained(path)
    return path
