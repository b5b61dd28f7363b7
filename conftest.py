"""
What the test files share: the repository's paths, a runner for its scripts, and one TinyStories
dataset prepared once per session from the local sample in ../shared/data.
"""

import json
import os
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
if Path(sys.argv[0]).name.startswith('test_') and sys.argv[0].endswith('.py'):  # `python test_docs.py`
    sys.exit(f"{Path(sys.argv[0]).name} holds tests for pytest, not a command: python -m pytest -q "
             f"{Path(sys.argv[0]).name}")
SHARED = ROOT.parent / 'shared' / 'data'
os.environ.setdefault('TIKTOKEN_CACHE_DIR', str(SHARED / 'tiktoken'))  # GPT-2 BPE offline
# One thread per process, here and in every script a test runs (set before torch is imported): the
# tests' models are tiny, a second thread barely speeds them up, and `pytest -n auto` runs a test
# file per worker instead. A bitwise comparison then never depends on a thread count.
os.environ['OMP_NUM_THREADS'] = '1'
# A tiny model and schedule: 40 steps, warmup and taper start at 8, g = 0 from 32.
TINY = ['--device=cpu', '--vocab_size=512', '--n_layer=2', '--n_head=4', '--n_embd=64',
        '--block_size=64', '--batch_size=8', '--max_iters=40', '--warmup_iters=8', '--taper_start=8',
        '--taper_end=32', '--lr_decay_iters=40', '--eval_interval=20', '--eval_iters=4',
        '--log_interval=4', '--learning_rate=3e-3']


@pytest.fixture(autouse=True)
def one_invocation_per_test():
    """A script says each note once per invocation (configurator.NOTED): a test that calls the scripts'
    functions in this process is an invocation of its own."""
    if 'configurator' in sys.modules:
        sys.modules['configurator'].NOTED.clear()


def require_shared():
    """Skip, saying why, where the offline samples are not beside the repository (CI has them)."""
    if not SHARED.is_dir():
        pytest.skip(f"needs the offline data samples in {SHARED} (../shared/data beside the repository)")


# A gloo rank sometimes aborts while its process exits, after the run's last checkpoint is written
# (seen twice in about 40 torchrun launches of a CI run; 0 of 12 alone). Its work is on disk, and the
# tests compare it, so that abort alone does not fail a launch.
TEARDOWN_ABORT = 'terminate called without an active exception'
TIMEOUT = 600  # seconds a script may run in a test
SERVER = []    # the session's ScriptServer, started at the first run()


def session_server(k=0):
    """The session's k-th ScriptServer: the first runs run()'s scripts, a second run_pairwise's other half."""
    import atexit
    import tempfile
    while len(SERVER) <= k:
        SERVER.append(ScriptServer(tempfile.mkdtemp(prefix='tapernorm-forks-')))
        atexit.register(SERVER[-1].close)
    return SERVER[k]


def run(script, *args, torchrun=0, check=True, env=None, fresh=False, server=0, cwd=ROOT):
    """`python script args` (or under torchrun) in the folder cwd: the CompletedProcess, after checking
    that it succeeded unless check=False. Without torchrun, an environment of its own or fresh=True, it runs in a fork of
    a warm interpreter (ScriptServer number server), which skips seconds of imports;
    TAPERNORM_TEST_FORKS=0 makes every run a fresh process."""
    if not (torchrun or env is not None or fresh or os.environ.get('TAPERNORM_TEST_FORKS') == '0'):
        proc = session_server(server).run(script, *args, cwd=cwd)
    else:
        launcher = [sys.executable]
        if torchrun:
            launcher += ['-m', 'torch.distributed.run', '--standalone', f'--nproc_per_node={torchrun}']
        proc = subprocess.run(launcher + [str(ROOT / script), *map(str, args)], cwd=cwd,
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env=None if env is None else {**os.environ, **env})
    if check and proc.returncode != 0 and not (torchrun and TEARDOWN_ABORT in proc.stderr):
        raise AssertionError(f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def run_pairwise(*calls):
    """Independent script runs, each (script, *args), two at a time (each on one thread, as every run
    here is): on a 2-core machine that is faster than one after the other on two threads, as small
    models use a second thread poorly. Each half runs in forks of a warm interpreter of its own, and
    each run is checked as run() checks it."""
    from concurrent.futures import ThreadPoolExecutor
    halves = [list(enumerate(calls))[k::2] for k in range(2)]
    with ThreadPoolExecutor(2) as pool:
        done = pool.map(lambda k: [(i, run(*call, server=k)) for i, call in halves[k]], range(2))
    return [proc for _, proc in sorted(sum(done, []), key=lambda pair: pair[0])]


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


def word_tokenizer(path, n_words, eos=True, framed=True):
    """A Llama-shaped tokenizer over n_words words w0, w1, ..., saved to path: ids 0, 1, 2 are [UNK], <s>
    (BOS, put before each text unless framed=False) and </s> (EOS, left out with eos=False, and BOS with
    it); word i is id i + 3."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    vocab = {'[UNK]': 0, '<s>': 1, '</s>': 2} | {f'w{i}': i + 3 for i in range(n_words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token='[UNK]'))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if framed:
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


# --- scripts run in forks of a warm interpreter --------------------------------------------------
# A script's own work for a bad input takes a fraction of a second; importing torch and transformers
# takes three. ScriptServer imports them once in a fresh interpreter that never runs a torch op, then
# runs each script in a fork of it: a process of its own (argv, cwd, exit code, stdout and stderr as
# files), minus the imports. Import-time warnings a fresh process would print are the one difference,
# which is why test_errors.py also runs a sample of its rows as plain subprocesses.

WARM = ['numpy', 'torch', 'torch.distributed', 'torch.nn.parallel', 'torch.distributed.fsdp',
        'torch.distributed.tensor', 'torch.distributed.checkpoint.state_dict', 'transformers', 'datasets',
        'tiktoken', 'sentencepiece', 'tokenizers', 'tqdm', 'matplotlib.pyplot', 'model', 'configurator',
        'tokens', 'hf', 'memory', 'diagnose', 'fold',
        # what hf.py imports on its first HF model or tokenizer: two seconds in every such script
        'transformers.modeling_utils', 'transformers.models.auto.modeling_auto',
        'transformers.models.auto.tokenization_auto', 'transformers.models.gpt2.modeling_gpt2',
        'transformers.models.llama.modeling_llama']


def serve():
    """The server's loop: one JSON request per stdin line, {script, args, cwd, out, err, env}; one JSON
    reply per line, {code}."""
    import atexit
    import importlib
    import runpy
    import signal
    sys.path[0:1] = [str(ROOT)]  # python -c's '' (the current folder) gives way to the scripts' folder, as for a script
    for name in WARM:
        importlib.import_module(name)
    reply = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        reply.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the server's requests: a script reads no input
            for fd, path in ((1, request['out']), (2, request['err'])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            os.chdir(request['cwd'])
            os.environ.clear()
            os.environ.update(request['env'])
            signal.alarm(TIMEOUT)  # as subprocess.run(timeout=TIMEOUT) would: a hung script is killed
            sys.argv = [request['script'], *request['args']]
            code = 0
            try:
                runpy.run_path(request['script'], run_name='__main__')
            except SystemExit as e:  # as the interpreter does: None 0, an int itself, anything else printed, 1
                code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
            except BaseException:  # as the interpreter does: through sys.excepthook (configurator's)
                sys.excepthook(*sys.exc_info())
                code = 1
            try:
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        reply.write(json.dumps(dict(code=code)) + '\n')
        reply.flush()


# Variables this process's environment gains as tests run, which no import of a script reads: pytest
# names each test in PYTEST_CURRENT_TEST; importing peft sets TORCHINDUCTOR_CACHE_DIR (to its default),
# and lm_eval HF_XET_HIGH_PERFORMANCE (for downloads); HF tokenizers sets TOKENIZERS_PARALLELISM=false
# when this process forks after a tokenizer used its threads (read as a tokenizer runs). A fork is
# handed them with the rest of the environment as it runs; any other change since the server started
# means a fresh process (seconds of imports each: TOKENIZERS_PARALLELISM alone once made every later
# script of test_data.py's worker one).
FRESH = Counter()  # why a server's script ran as a fresh process instead: said at the end of the session
RUN_TIME_ONLY = ('PYTEST_CURRENT_TEST', 'TORCHINDUCTOR_CACHE_DIR', 'HF_XET_HIGH_PERFORMANCE', 'TOKENIZERS_PARALLELISM')


def import_environment():
    """This process's environment less RUN_TIME_ONLY: what a fresh interpreter's imports would read."""
    return {k: v for k, v in os.environ.items() if k not in RUN_TIME_ONLY}


class ScriptServer:
    """run(script, *args) as conftest.run(check=False, env=env) does, in a fork of a warm interpreter
    started with this process's environment plus env (so that its imports read env, as a fresh
    process's do); one script at a time (a lock), and only while this process's environment is still
    the one the server started from, but for RUN_TIME_ONLY (else, and after the server has died, a plain
    subprocess). Each fork runs with this process's environment of the moment, plus env."""

    def __init__(self, scratch, env=None):
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.env, self.extra = import_environment(), env
        self.proc = subprocess.Popen([sys.executable, '-c', 'import conftest; conftest.serve()'], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {}), 'PYTHONPATH': str(ROOT)})
        self.count = 0
        self.lock = threading.Lock()

    def run(self, script, *args, cwd=ROOT, env=None):
        """env: variables the fork alone gets, which no import may read (a row's RANK, say)."""
        if import_environment() != self.env or self.proc.poll() is not None:
            changed = sorted(k for k in {*self.env, *import_environment()} if self.env.get(k) != os.environ.get(k))
            FRESH[', '.join(changed) or 'the server ended'] += 1
            return run(script, *args, check=False, env={**(self.extra or {}), **(env or {})}, fresh=True, cwd=cwd)
        with self.lock:
            return self.forked(script, *args, cwd=cwd, env=env)

    def forked(self, script, *args, cwd=ROOT, env=None):
        self.count += 1
        out, err = self.scratch / f'{self.count}.out', self.scratch / f'{self.count}.err'
        request = dict(script=str(ROOT / script), args=[str(a) for a in args], cwd=str(cwd), out=str(out),
                       err=str(err), env={**os.environ, **(self.extra or {}), **(env or {})})
        self.proc.stdin.write(json.dumps(request) + '\n')
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise AssertionError(f"the script server died while running {script} {' '.join(map(str, args))}")
        proc = subprocess.CompletedProcess([script, *args], json.loads(reply)['code'], out.read_text(errors='replace'),
                                           err.read_text(errors='replace'))
        out.unlink()
        err.unlink()
        return proc

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.scratch, ignore_errors=True)


# --- order --------------------------------------------------------------------------------------
# Under `pytest -n auto --dist loadfile` each worker takes whole files, the next one as it finishes:
# the longest go first so that no long file is left running alone at the end. (xdist would otherwise
# order the files by their number of tests.)
LONGEST_FIRST = ('test_train.py', 'test_errors.py', 'test_safety.py', 'test_clients.py', 'test_llama.py',
                 'test_gpu_check.py', 'test_docs.py', 'test_data.py', 'test_diagnose.py')


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores. The files' scripts wait on one another (forks, torchrun's
    ranks, a killed run's signal), and a third worker fills those waits: on the 2-core machine a fresh
    clone's suite took 17:01 with three workers against 20:39 with two (6fdf4b8, one session)."""
    return (os.cpu_count() or 1) + 1


def pytest_sessionfinish(session):
    if hasattr(session.config, 'workeroutput'):  # an xdist worker: the controller says it
        session.config.workeroutput['fresh'] = dict(FRESH)


def pytest_testnodedown(node, error):
    FRESH.update(getattr(node, 'workeroutput', {}).get('fresh', {}))


def pytest_terminal_summary(terminalreporter):
    """Script runs meant for a warm server that took a fresh process (seconds of imports each), and the
    variables whose change caused it: a variable that no import reads belongs in RUN_TIME_ONLY."""
    if FRESH:
        terminalreporter.write_line(f"note: {sum(FRESH.values())} script run(s) took a fresh process, the environment "
                                    f"having changed since their server started: {dict(FRESH)}")


def pytest_configure(config):
    # The scripts a test starts read no standard input unless the test gives them some, whatever the
    # input the suite was started with (a CI runner's pipe; sample.py notes a prompt piped in unasked).
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    if hasattr(config.option, 'loadscopereorder'):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file's tests as written
