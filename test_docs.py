"""
The README and docs/ say what the repository does: every relative link and anchor resolves, the
README stays short, every example command of the README, docs and script docstrings names flags the
script declares with values they take (train.py's also pass its cross-flag rules), and the README's
CPU quick start runs as written, with fewer steps.
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

import configurator
from conftest import ROOT, SHARED, require_shared, run

DOCS = [ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]
SCRIPTS = ['train.py', 'sample.py', 'bench.py', 'evaluate.py', 'gpu_check.py', 'fold.py', 'diagnose.py',
           'memory.py', 'plot.py', 'reproduce.py', 'prepare_tinystories.py', 'prepare_owt.py']


def slug(heading):
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return text.replace(' ', '-')


def anchors(path):
    return {slug(line.lstrip('#')) for line in path.read_text().splitlines() if line.startswith('#')}


@pytest.mark.parametrize('doc', DOCS, ids=[d.name for d in DOCS])
def test_every_relative_link_and_anchor_resolves(doc):
    text = re.sub(r'```.*?```', '', doc.read_text(), flags=re.S)
    links = re.findall(r'\]\(([^)\s]+)\)', text)
    assert links or doc.name != 'README.md'
    for link in links:
        if re.match(r'[a-z]+:', link):
            continue
        target, _, anchor = link.partition('#')
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.name}: {link} names no file"
        if anchor:
            assert anchor in anchors(path), f"{doc.name}: {link} names no heading of {path.name}"


def test_readme_is_a_ten_minute_read():
    assert len((ROOT / 'README.md').read_bytes()) <= 15_000


def examples():
    """(where, script, argv) for every `python <script>.py ...` line of the docs' code blocks and of
    the scripts' docstrings."""
    found = []
    sources = [(d.name, '\n'.join(re.findall(r'```bash\n(.*?)```', d.read_text(), flags=re.S))) for d in DOCS]
    for script in SCRIPTS:
        text = (ROOT / script).read_text()
        sources.append((script, text[:text.index('"""', 3)]))
    for where, text in sources:
        text = re.sub(r'\\\\?\n', ' ', text)  # a continued line (in a docstring the backslash is doubled)
        for line in text.splitlines():
            match = re.match(r'\s*(?:[A-Z_]+=\S+\s+)*python (\w+\.py)\b(.*)', line)
            if match and match[1] in SCRIPTS:
                argv = []
                for arg in shlex.split(match[2].split(' #')[0]):
                    arg = re.sub(r'\{([^,}]*),[^}]*\}', r'\1', arg)  # {a,b}: its first choice
                    argv += sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(arg)) if '*' in arg else [arg]
                found.append((where, match[1], [a for a in argv if a != '...']))
    return found


EXAMPLES = examples()


def declared_flags(script):
    """The flags a script declares: FLAGS of a main(argv) script, or the globals between the first
    two rulers of a nanoGPT-style one, as configurator reads them."""
    text = (ROOT / script).read_text()
    if 'FLAGS = dict(' in text:
        import importlib
        module = importlib.import_module(script[:-3])
        flags = dict(module.FLAGS)
        if script == 'memory.py':
            flags = {**module.train_flags(), **flags}
        return flags, script == 'memory.py'
    lines = text.splitlines()
    rulers = [i for i, line in enumerate(lines) if line.startswith('# ----')][:2]
    namespace = {'flag': configurator.flag}
    exec('\n'.join(lines[rulers[0]:rulers[1]]), namespace)
    return {k: v for k, v in namespace.items() if isinstance(v, configurator.Flag)}, True


@pytest.mark.parametrize('where,script,argv', EXAMPLES,
                         ids=[f"{w}:{s} {' '.join(a)}"[:80] for w, s, a in EXAMPLES])
def test_every_example_names_declared_flags_with_values_they_take(monkeypatch, where, script, argv):
    """Paths an example names need not exist here: only flag names, types, ranges and choices count."""
    monkeypatch.setattr(configurator, 'checked_input', lambda key, path, kind, wanted=None, listed=False: path)
    monkeypatch.setattr(configurator, 'checked_path', lambda key, path, write=True: path)
    monkeypatch.setattr(configurator, 'check_writable', lambda key, path: path)
    flags, configs = declared_flags(script)
    cut = argv.index('--') if '--' in argv else len(argv)
    configurator.configure(flags, [a if a.startswith('--') or not configs else str(ROOT / a) for a in argv[:cut]],
                           script, '', configs=configs, positional='run_dirs' if script == 'plot.py' else None)
    if script == 'train.py':  # the rules that tie flags together, without data or a device
        run('train.py', *argv, '--memory_plan')


def test_examples_cover_every_script():
    assert {s for _, s, _ in EXAMPLES} == set(SCRIPTS)


def test_the_cpu_quick_start_runs_as_written_with_fewer_steps(tmp_path):
    """The README's CPU quick start, in a fresh folder: the data slice from the local TinyStories
    sample instead of the hub, the run shortened (the schedule's steps scaled down); the folded model
    is written and samples text."""
    require_shared()
    readme = (ROOT / 'README.md').read_text()
    block = re.search(r'On a CPU, in minutes.*?```bash\n(.*?)```', readme, flags=re.S)[1]
    commands = [shlex.split(line.split(' #')[0]) for line in block.strip().splitlines()]
    assert [c[1] for c in commands] == ['prepare_tinystories.py', 'train.py', 'fold.py', 'sample.py']
    local = [f"--input_file={SHARED / 'tinystories' / 'train_sample.txt'}",
             f"--val_file={SHARED / 'tinystories' / 'valid_sample.txt'}"]
    short = ['--max_iters=40', '--lr_decay_iters=40', '--warmup_iters=4', '--taper_start=4', '--taper_end=30',
             '--eval_interval=20', '--eval_iters=2']
    extra = {'prepare_tinystories.py': local, 'train.py': short, 'fold.py': [], 'sample.py': ['--max_new_tokens=20']}
    for command in commands:
        argv = [str(ROOT / a) if a.startswith('config/') else a for a in command[2:]]
        proc = subprocess.run([sys.executable, str(ROOT / command[1]), *argv, *extra[command[1]]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, 'HF_DATASETS_DISABLE_PROGRESS_BARS': '1'})
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / 'out-quick-cpu' / 'ckpt_folded.pt').exists()
    assert proc.stdout.count('Once upon a time') == 3  # the default three samples, each after the prompt


def test_every_python_snippet_of_the_docs_runs(tmp_path, monkeypatch):
    """Each ```python block of the README and docs runs as written, in this process, with an HF hub
    name replaced by a tiny GPT-2 written with save_pretrained (no hub here)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=128)).save_pretrained(
        tmp_path / 'gpt2')
    blocks = [(d.name, b) for d in DOCS for b in re.findall(r'```python\n(.*?)```', d.read_text(), flags=re.S)]
    assert blocks
    monkeypatch.chdir(ROOT)
    for where, block in blocks:
        exec(compile(block.replace("'gpt2'", repr(str(tmp_path / 'gpt2'))), where, 'exec'), {})


@pytest.mark.parametrize('name', sorted(p.name for p in ROOT.glob('test_*.py')))
def test_a_test_file_run_as_a_script_says_how_to_run_it(name):
    """`python test_x.py` collects nothing and would end silently: it says to run pytest instead."""
    proc = subprocess.run([sys.executable, name], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and proc.stderr.strip() == f"{name} holds tests for pytest, not a command: " \
        f"python -m pytest -q {name}", proc.stderr[-2000:]
