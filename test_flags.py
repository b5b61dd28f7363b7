"""
The flag layer (configurator.py), walked over every flag every script declares: for each flag, a
value of the wrong type and values just outside its range or choices each stop the real script with
one sentence that names the flag. `--help` lists every flag of every script, and the modules say
what they are. The declarations are read from the scripts themselves, so a flag added tomorrow is
walked too.
"""

import io
import os
import runpy
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

import configurator
from conftest import ROOT, run

SCRIPTS = ['train.py', 'sample.py', 'bench.py', 'evaluate.py', 'gpu_check.py', 'memory.py', 'fold.py',
           'diagnose.py', 'reproduce.py', 'plot.py', 'prepare_tinystories.py', 'prepare_owt.py']
MODULES = ['model.py', 'hf.py', 'tokens.py', 'configurator.py']


def run_in_process(script, argv, monkeypatch):
    """(exit code, stdout, stderr, the flags the script declared) of the script run as __main__."""
    seen = {}
    real = configurator.configure

    def spy(flags, *args, **kwargs):
        seen.update(flags)
        return real(flags, *args, **kwargs)

    monkeypatch.setattr(configurator, 'configure', spy)
    monkeypatch.setattr(sys, 'argv', [str(ROOT / script), *argv])
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            runpy.run_path(str(ROOT / script), run_name='__main__')
        except SystemExit as e:
            code = e.code
    if isinstance(code, str):  # raise SystemExit("...") prints the sentence and exits 1
        err.write(code + '\n')
        code = 1
    return code or 0, out.getvalue(), err.getvalue(), seen


def declared(script, monkeypatch):
    code, out, _, flags = run_in_process(script, ['--help'], monkeypatch)
    assert code == 0 and flags, script
    return flags, out


def bad_values(spec):
    """A wrong type, and values just past each end of the flag's range or outside its choices."""
    if spec.choices:
        return ['no-such-choice']
    if spec.items:
        values = ['x'] if spec.items is int else []
        if spec.length:
            values.append(','.join(['1'] * (spec.length - 1) or ['1', '1']))
        return values
    if spec.type is bool:
        return ['maybe']
    if spec.type is str:
        return [''] if spec.path == 'out' else []
    values = ['abc'] + (['2.5'] if spec.type is int else [])
    step = 1 if spec.type is int else 0.5
    if spec.min is not None:
        values.append(str(spec.min - step))
    if spec.above is not None:
        values.append(str(spec.above))
    if spec.max is not None:
        values.append(str(spec.max + step))
    elif spec.type is int:  # no declared end: one past what any tensor, count or seed holds (int64)
        values.append('1e20')
    if spec.below is not None:
        values.append(str(spec.below))
    return values


def walk():
    cases = []
    for script in SCRIPTS:
        with pytest.MonkeyPatch.context() as mp:
            flags, _ = declared(script, mp)
        cases += [(script, key, value) for key, spec in flags.items() for value in bad_values(spec)]
    return cases


def test_every_script_declares_its_flags_and_lists_them_with_help(monkeypatch):
    for script in SCRIPTS:
        flags, out = declared(script, monkeypatch)
        for key, spec in flags.items():
            assert f"--{key}=" in out and spec.help, (script, key)
            assert len(spec.help) > 10, (script, key)  # a line of help, not a placeholder


def test_the_walk_meets_every_kind_of_rule():
    """The walk is only as good as its variety: bounded integers and numbers, open and closed ends,
    choices, booleans, lists and output folders all occur among the declarations."""
    specs = [spec for script in SCRIPTS for spec in declared_flags(script).values()]
    kinds = dict(int_min=any(s.type is int and s.min is not None for s in specs),
                 float_open=any(s.type is float and (s.above is not None or s.below is not None) for s in specs),
                 upper_end=any(s.max is not None or s.below is not None for s in specs),
                 choices=any(s.choices for s in specs), boolean=any(s.type is bool for s in specs),
                 lists=any(s.items for s in specs), out_folder=any(s.path == 'out' for s in specs))
    assert all(kinds.values()), kinds


def declared_flags(script):
    with pytest.MonkeyPatch.context() as mp:
        return declared(script, mp)[0]


def test_each_bad_value_of_each_flag_is_one_sentence_naming_it(monkeypatch):
    """Every declared flag of every script, with each of its bad values: a non-zero exit, one line on
    stderr that names the flag, and no traceback."""
    failures, count = [], 0
    for script, key, value in walk():
        code, _, err, _ = run_in_process(script, [f'--{key}={value}'], monkeypatch)
        lines = [line for line in err.splitlines() if line.strip()]
        count += 1
        if code == 0 or len(lines) != 1 or key not in lines[0] or 'Traceback' in err:
            failures.append((script, key, value, code, err[-300:]))
    assert count > 300 and failures == [], failures[:10]


def test_an_integer_past_int64_and_a_python_list_are_read_by_the_layer():
    """The layer's own rules, against Python's int64 end and ast's reading of a list: an integer flag with no
    declared end refuses 2**63 (one sentence naming the flag and that end) and takes 2**63 - 1; a list flag
    written as a Python list literal is that list's items, paths too."""
    spec = configurator.Flag(200, 'new tokens', min=1)
    assert configurator.convert('max_new_tokens', str(2**63 - 1), spec) == 2**63 - 1
    for value in (str(2**63), '1e20', 10**30):
        with pytest.raises(configurator.FlagError, match=r'max_new_tokens=\d+ lies past the largest integer .*2\*\*63 - 1'):
            configurator.convert('max_new_tokens', value, spec)
    with pytest.raises(configurator.FlagError, match='must be at least 1'):  # its own range is said first
        configurator.convert('max_new_tokens', '-1e30', spec)
    ints = configurator.Flag((1, 2), 'steps', items=int, length=2)
    assert configurator.convert('steps', '[3, 4]', ints) == (3, 4) == configurator.convert('steps', '(3,4)', ints)
    files = configurator.Flag(None, 'texts', items=str, unique=True, path='text')
    a, b = str(ROOT / 'README.md'), str(ROOT / 'requirements.txt')
    assert configurator.convert('input_file', repr([a, b]), files) == (a, b)
    assert configurator.convert('input_file', repr((a, b)), files) == (a, b)


def test_a_text_value_the_shell_split_at_a_space_is_one_sentence_on_every_script(monkeypatch):
    """Every flag that takes free text, on every script, given an unquoted value with a space (the shell
    passes its second word as an argument of its own): one sentence naming the flag and the quoted whole,
    not a complaint about the loose word."""
    failures, count = [], 0
    for script in SCRIPTS:
        for key, spec in declared_flags(script).items():
            if spec.type is not str or spec.choices:
                continue
            code, _, err, _ = run_in_process(script, [f'--{key}=two', 'words'], monkeypatch)
            lines = [line for line in err.splitlines() if line.strip()]
            count += 1
            if code == 0 or len(lines) != 1 or f"--{key}=two is followed by 'words'" not in lines[0] \
                    or f"quote it whole: --{key}='two words'" not in lines[0]:
                failures.append((script, key, code, err[-300:]))
    assert count > 30 and failures == [], failures[:10]


def test_an_unknown_flag_names_the_closest_one_on_every_script(monkeypatch):
    for script in SCRIPTS:
        flags = declared_flags(script)
        key = next(iter(flags))
        code, _, err, _ = run_in_process(script, [f'--{key}x=1'], monkeypatch)
        assert code != 0 and f"did you mean '{key}'" in err, (script, err)


@pytest.mark.parametrize('module', MODULES)
def test_a_module_run_as_a_script_says_what_it_is(module):
    """`python model.py` used to print nothing: --help shows its docstring, anything else one sentence."""
    helped = run(module, '--help')
    assert helped.returncode == 0 and helped.stdout.strip()
    bare = run(module, check=False)
    lines = bare.stderr.strip().splitlines()
    assert bare.returncode != 0 and len(lines) == 1 and 'Traceback' not in bare.stderr, bare.stderr


def test_a_folder_is_checked_for_writing_only_when_the_invocation_writes(monkeypatch, tmp_path):
    """A path='out' folder that no file can be created in is refused by the layer, unless its
    read_only_when says this invocation writes nothing there (train.py --eval_only, a prepared data
    folder): root's read-only folders (chattr +i) stand in as a cannot_write that always answers."""
    monkeypatch.setattr(configurator, 'cannot_write', lambda folder: f"no file can be created in {folder} (test)")
    flags = dict(out_dir=configurator.flag('out', "a folder", path='out',
                                           read_only_when=lambda values: values['eval_only']),
                 eval_only=configurator.flag(False, "write nothing"))
    folder = str(tmp_path)
    assert configurator.configure(flags, [f'--out_dir={folder}', '--eval_only'], 'x.py', None)['out_dir'] == folder
    with pytest.raises(configurator.FlagError, match=r'out_dir=.* cannot be written: no file can be created'):
        configurator.configure(flags, [f'--out_dir={folder}'], 'x.py', None)
    # train.py declares it so: its out_dir with --eval_only or --memory_plan
    declared = {}
    exec(open(ROOT / 'train.py').read().split('# ' + '-' * 77)[1], declared)
    rule = declared['out_dir'].read_only_when
    assert rule({'eval_only': True, 'memory_plan': False}) and rule({'eval_only': False, 'memory_plan': True})
    assert not rule({'eval_only': False, 'memory_plan': False})


def test_what_the_machine_lacks_is_one_sentence_and_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    """configurator's excepthook: a package of the requirements that cannot be imported, found anywhere in
    the chain of causes (transformers re-raises a missing safetensors as its own error), and a full disk
    (an OSError, or torch.save's zip writer's RuntimeError when little space is left) are one sentence;
    memory (a MemoryError, ENOMEM, C++'s bad_alloc) and open files (EMFILE) are too; any other exception,
    a ModuleNotFoundError of a module that is no package of ours included, is None: its traceback stays."""
    missing = ModuleNotFoundError("No module named 'safetensors'", name='safetensors')
    try:
        try:
            raise missing
        except ModuleNotFoundError as e:
            raise RuntimeError("Could not import module 'LlamaForCausalLM'") from e
    except RuntimeError as e:
        wrapped = e
    assert 'needs the safetensors package' in configurator.lacking(wrapped)
    assert 'needs the matplotlib package' in configurator.lacking(ModuleNotFoundError(name='matplotlib.pyplot'))
    assert configurator.lacking(ModuleNotFoundError(name='matplotlib_helpers')) is None  # not the package
    assert configurator.lacking(ModuleNotFoundError(name='no_such_module_of_ours')) is None
    assert configurator.lacking(KeyError('iter')) is None
    import errno
    assert 'the disk is full' in configurator.lacking(OSError(errno.ENOSPC, 'No space left on device', 'x.bin'))
    # memory: Python's own MemoryError, an mmap's ENOMEM, a library that could not map itself in (under ulimit -v)
    for error in (MemoryError(), OSError(errno.ENOMEM, 'Cannot allocate memory'),
                  OSError('Memory mapping file failed: Cannot allocate memory'),
                  ImportError('libopenblas.so: failed to map segment from shared object'),
                  RuntimeError('std::bad_alloc')):  # C++'s allocation, as torch is imported under ulimit -v
        monkeypatch.setattr(configurator.resource, 'getrlimit', lambda kind: (2 ** 31, 2 ** 31))
        assert 'ran out of memory under this shell\'s limit of 2.0 GB (ulimit -v)' in configurator.lacking(error)
        monkeypatch.setattr(configurator.resource, 'getrlimit', lambda kind: (configurator.resource.RLIM_INFINITY,) * 2)
        assert 'ran out of memory: close other programs' in configurator.lacking(error)
    assert configurator.lacking(OSError(errno.EACCES, 'Permission denied')) is None
    monkeypatch.setattr(configurator.resource, 'getrlimit', lambda kind: (5, 5))  # ulimit -n 5
    for error in (OSError(errno.EMFILE, 'Too many open files'), OSError(errno.ENFILE, 'Too many open files in system')):
        assert 'may open no more files (the limit of this shell, ulimit -n, is 5)' in configurator.lacking(error)
    monkeypatch.setattr(configurator.resource, 'getrlimit', lambda kind: (configurator.resource.RLIM_INFINITY,) * 2)
    writer = RuntimeError('[enforce fail at inline_container.cc:672] . unexpected pos 710784 vs 710672')
    monkeypatch.setattr(configurator.shutil, 'disk_usage', lambda path: type('usage', (), {'free': 1000})())
    assert configurator.write_failure(writer, str(tmp_path / 'ckpt.pt')).startswith('the disk is full')
    monkeypatch.setattr(configurator.shutil, 'disk_usage', lambda path: type('usage', (), {'free': 10 ** 12})())
    assert 'unexpected pos' in configurator.write_failure(writer, str(tmp_path / 'ckpt.pt'))
    assert configurator.write_failure(RuntimeError('shape mismatch'), str(tmp_path / 'ckpt.pt')) is None


def test_a_path_flag_reads_a_quoted_tilde_as_the_home_folder(monkeypatch, tmp_path):
    """'--export_hf=~/exports/a' in quotes reaches the script with its ~: the layer reads it as the shell
    would have, never as a folder named '~' in the current one."""
    monkeypatch.setenv('HOME', str(tmp_path))
    assert configurator.checked_path('export_hf', '~/exports/a') == str(tmp_path / 'exports' / 'a')
    (tmp_path / 'prompt.txt').write_text('Once')
    assert configurator.checked_input('input_file', '~/prompt.txt', 'text') == str(tmp_path / 'prompt.txt')


def test_a_flag_given_twice_says_which_value_is_used(capsys):
    """nanoGPT's order stays (a later --key=value wins, so `$BASE --max_iters=200` overrides), but a flag
    given twice with two values is never silent; the same value twice, or one flag, says nothing."""
    flags = dict(max_iters=configurator.flag(10, "steps", min=1))
    assert configurator.configure(flags, ['--max_iters=20', '--max_iters=200'], 'x.py', None)['max_iters'] == 200
    assert 'note: --max_iters is given twice; the later value, 200, is used' in capsys.readouterr().out
    configurator.configure(flags, ['--max_iters=20', '--max_iters=20'], 'x.py', None)
    configurator.configure(flags, ['--max_iters=20'], 'x.py', None)
    configurator.configure(flags, ['--max_iters=20', '--max_iters', '20'], 'x.py', None)
    assert capsys.readouterr().out == ''
    assert configurator.configure(flags, ['--max_iters=20', '--max_iters', '300'], 'x.py', None)['max_iters'] == 300
    assert 'note: --max_iters is given twice; the later value, 300, is used' in capsys.readouterr().out  # the space form


def test_a_note_is_said_once_by_a_script_that_reads_its_flags_again():
    """memory.py resolves the flags again for each plan it makes (the to-fit search): a flag given twice
    is still noted once, as train.py notes it."""
    for script in ('memory.py', 'train.py'):
        proc = run(script, 'config/dyt_64.py', '--batch_size=4', '--batch_size=8',
                   *['--memory_plan'] * (script == 'train.py'))
        assert proc.stdout.count('note: --batch_size is given twice; the later value, 8, is used') == 1, proc.stdout


def test_a_script_started_wrongly_says_how_to_start_it(tmp_path):
    """`python -m train.py` (Python would import train.py, running it, to look for a module inside), a
    script copied away from the repository's modules, or PYTHONSAFEPATH or `python -I` keeping its folder
    off the path: one sentence each, never ModuleNotFoundError's traceback."""
    import shutil
    import subprocess
    for launch, env in (([sys.executable, '-m', 'train.py', '--max_iters=1'], {}),
                        ([sys.executable, str(shutil.copy(ROOT / 'train.py', tmp_path)), '--help'], {}),
                        ([sys.executable, str(ROOT / 'sample.py'), '--help'], {'PYTHONSAFEPATH': '1'}),
                        ([sys.executable, '-I', str(ROOT / 'fold.py'), '--help'], {})):  # isolated, as a service runs it
        proc = subprocess.run(launch, cwd=tmp_path if '-m' not in launch else ROOT, capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=120)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 1 and len(lines) == 1 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
        assert ('run `python train.py`' if '-m' in launch else "needs the repository's other files") in lines[0]
        assert '-m' in launch or 'without python -I or -P or PYTHONSAFEPATH' in lines[0]


def test_a_config_file_not_found_points_at_the_one_meant(tmp_path):
    """A config file named relative to the repository from another folder names the repository's file;
    one misspelt, or named without its .py, names the existing file of that name. Each is one sentence."""
    for arg, cwd, said in (('config/quick_cpu.py', tmp_path, f"the repository's is {ROOT / 'config' / 'quick_cpu.py'}"),
                           ('config/quik_cpu.py', ROOT, 'did you mean config/quick_cpu.py?'),
                           ('config/quick_cpu', ROOT, 'did you mean config/quick_cpu.py?'),
                           (str(ROOT / 'config' / 'taper_internal_521.py'), tmp_path,
                            f"did you mean {ROOT / 'config' / 'taper_internal_512.py'}?"),
                           ('config/nothing_like_it.py', ROOT, '(arguments that are not --key=value name config files)')):
        proc = run('train.py', arg, check=False, cwd=cwd)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 1 and len(lines) == 1 and said in lines[0], proc.stderr[-2000:]


def test_stacked_config_files_say_which_decides(capsys, tmp_path):
    """Config files named one after another apply in order, nanoGPT's way; when a later one changes
    what an earlier one set (a shell pattern such as {a,b}_{64,512}.py expanding to many), a note names
    every such value, with the files, and says the last file decides. A value an earlier file set to the
    default (taper = 'internal') counts as set: two method configs in the wrong order are said."""
    flags = dict(max_iters=configurator.flag(10, "steps", min=1), n_embd=configurator.flag(8, "width", min=1),
                 taper=configurator.flag('internal', "method", choices=('none', 'internal')))
    (tmp_path / 'a.py').write_text("max_iters = 20\nn_embd = 16\nif True:\n    taper = 'internal'\n")
    (tmp_path / 'b.py').write_text("n_embd = 32\ntaper = 'none'\n")
    (tmp_path / 'c.py').write_text('max_iters = 20\n')  # the same value again: nothing changes
    values = configurator.configure(flags, [str(tmp_path / 'a.py'), str(tmp_path / 'b.py')], 'x.py', None, configs=True)
    assert values == dict(max_iters=20, n_embd=32, taper='none')
    assert f"{tmp_path / 'b.py'} changes n_embd, taper of {tmp_path / 'a.py'}: the last" in capsys.readouterr().out
    configurator.configure(flags, [str(tmp_path / 'a.py'), str(tmp_path / 'c.py')], 'x.py', None, configs=True)
    assert capsys.readouterr().out == ''


def test_help_under_python_oo_says_why_the_description_is_missing():
    """--help prints the script's docstring (its description and examples) above the flags; python -OO
    strips docstrings, and then the help says so instead of leaving the space blank."""
    import ast
    import subprocess
    first = ast.get_docstring(ast.parse((ROOT / 'fold.py').read_text())).splitlines()[0]
    for optimize, said in (([], first), (['-OO'], 'which python -OO strips: run it without -OO')):
        proc = subprocess.run([sys.executable, *optimize, 'fold.py', '--help'], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0 and said in proc.stdout and '--out_dir' in proc.stdout, proc.stdout[:500]


def test_a_flag_after_a_config_file_that_computed_from_it_is_refused_with_advice_that_works(tmp_path):
    """A config file runs as Python once, when it is read: `out_dir = f'out-{n_layer}'` uses the n_layer
    it sees then. A later --n_layer=2 would leave out_dir at the old layer count, so it is one sentence
    naming what the file computed, with advice that gives the file's own formula the new value; a value
    the file computed from a helper name or in a branch counts too, and the flag is fine once each
    computed value is given as well, or when nothing is computed from it."""
    flags = dict(n_layer=configurator.flag(8, "layers", min=1), out_dir=configurator.flag('out', "folder"),
                 max_iters=configurator.flag(10, "steps", min=1), lr_decay_iters=configurator.flag(10, "steps", min=1),
                 device=configurator.flag('', "device"), compile=configurator.flag(True, "compile"))
    files = {'reads.py': "out_dir = 'out-' + str(n_layer)\n",
             'sets.py': "max_iters = 5000\n_steps = max_iters\nlr_decay_iters = _steps\n",
             'branch.py': "if device == 'cpu':\n    compile = False\n",
             'plain.py': "n_layer = 4\nprint('a config may print')\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = {name: str(tmp_path / name) for name in files}
    for argv, said in (([path['reads.py'], '--n_layer=2'], f"computes out_dir from n_layer (8 when it ran), and "
                        f"--n_layer=2 after it changes n_layer alone: give --n_layer=2 before {path['reads.py']}"),
                       ([path['sets.py'], '--max_iters', '100'], f"computes lr_decay_iters from max_iters (5000 when "
                        f"it ran), and --max_iters=100 after it changes max_iters alone: set max_iters = 100 in "
                        f"{path['sets.py']}"),
                       ([path['branch.py'], '--device=cpu'], "computes compile from device ('' when it ran)")):
        with pytest.raises(configurator.FlagError) as e:
            configurator.configure(flags, argv, 'x.py', None, configs=True)
        assert said in str(e.value) and '\n' not in str(e.value), str(e.value)
    values = configurator.configure(flags, ['--n_layer=2', path['reads.py']], 'x.py', None, configs=True)
    assert (values['n_layer'], values['out_dir']) == (2, 'out-2')  # the advice: the file's formula at n_layer=2
    (tmp_path / 'sets.py').write_text(files['sets.py'].replace('5000', '100'))
    assert configurator.configure(flags, [path['sets.py']], 'x.py', None, configs=True)['lr_decay_iters'] == 100
    assert configurator.configure(flags, ['--device=cpu', path['branch.py']], 'x.py', None, configs=True)['compile'] is False
    for argv in ([path['reads.py'], '--n_layer=2', '--out_dir=mine'], [path['reads.py'], '--n_layer=8'],
                 [path['plain.py'], '--n_layer=2']):  # each computed value given too, the same value, none computed
        configurator.configure(flags, argv, 'x.py', None, configs=True)


def test_a_script_that_sorts_its_own_arguments_reads_a_flag_written_with_a_space(capsys):
    """`--key value` is read as `--key=value` by the flag layer; memory.py, which also sorts its
    arguments into config files and flags itself, plans the same as for `--key=value`."""
    import memory
    for spaced, joined in ((['config/quick_cpu.py', '--nproc', '2'], ['config/quick_cpu.py', '--nproc=2']),
                           (['config/quick_cpu.py', 'config/baseline_64.py', '--summary', '--n_layer', '2'],
                            ['config/quick_cpu.py', 'config/baseline_64.py', '--summary', '--n_layer=2'])):
        memory.main([str(ROOT / a) if a.startswith('config/') else a for a in spaced])
        got = capsys.readouterr().out
        memory.main([str(ROOT / a) if a.startswith('config/') else a for a in joined])
        assert got == capsys.readouterr().out and ('per rank of 2' in got or got.count('| `') == 2), got


def test_under_torchrun_rank_0_alone_speaks(monkeypatch, capsys):
    """Every rank reads the same flags and meets the same mistake: a note or a refusal is said once, by
    rank 0. A rank whose peer process died (gloo's 'Connection reset by peer' in a collective) stops with
    one sentence saying so, not the collective's traceback; any other error keeps its own handling."""
    import subprocess
    flags = dict(max_iters=configurator.flag(10, "steps", min=1))
    monkeypatch.setenv('TORCHELASTIC_RUN_ID', 'none')  # under torchrun
    for rank in ('1', '0'):
        monkeypatch.setenv('RANK', rank)
        configurator.NOTED.clear()
        configurator.configure(flags, ['--max_iters=20', '--max_iters=200'], 'x.py', None)
        out = capsys.readouterr().out
        assert out == '' if rank == '1' else 'note: --max_iters is given twice' in out
    monkeypatch.delenv('TORCHELASTIC_RUN_ID')  # a RANK=1 left in a shell: no rank 0 would say it, so it is said
    monkeypatch.setenv('RANK', '1')
    configurator.NOTED.clear()
    configurator.configure(flags, ['--max_iters=20', '--max_iters=200'], 'x.py', None)
    assert 'note: --max_iters is given twice' in capsys.readouterr().out
    monkeypatch.setenv('TORCHELASTIC_RUN_ID', 'none')
    monkeypatch.setenv('RANK', '1')
    lost = RuntimeError('[../gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:14759: Connection reset by peer')
    monkeypatch.setenv('WORLD_SIZE', '2')
    assert configurator.peer_lost(lost) == ''
    monkeypatch.setenv('RANK', '0')
    assert "another rank's process ended" in configurator.peer_lost(lost)
    assert configurator.peer_lost(RuntimeError('mat1 and mat2 shapes cannot be multiplied')) is None
    monkeypatch.setenv('WORLD_SIZE', '1')
    assert configurator.peer_lost(lost) is None  # one process has no peer to lose
    for rank in ('1', '0'):  # torchrun's stop (Ctrl-C, a scheduler's SIGTERM) reaches every rank: rank 0 says it
        monkeypatch.setenv('RANK', rank)
        configurator.excepthook(configurator.Stopped, configurator.Stopped('terminated (SIGTERM)'), None)
        assert ('stopped: terminated (SIGTERM)' in capsys.readouterr().err) == (rank == '0')
    monkeypatch.delenv('TORCHELASTIC_RUN_ID')
    # a one-process script under torchrun (which sets TORCHELASTIC_RUN_ID): rank 0 says it; the same
    # variables left in a shell, without torchrun, leave no rank 0 to say it: each process speaks
    for rank, torchrun in (('0', True), ('1', True), ('1', False)):
        launch = {'TORCHELASTIC_RUN_ID': 'none'} if torchrun else {}
        proc = subprocess.run([sys.executable, 'bench.py', '--device=cpu'], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, 'WORLD_SIZE': '2', 'RANK': rank, **launch}, timeout=120)
        assert proc.returncode == 1 and 'Traceback' not in proc.stderr
        assert ('runs in one process' in proc.stderr) == (rank == '0' or not torchrun), proc.stderr


def test_a_config_file_or_a_prompt_through_a_pipe_is_read(tmp_path):
    """A config file given by process substitution (train.py <(printf ...), a path like /dev/fd/63 without
    .py) is Python like any other; a prompt piped in as --start=FILE:/dev/stdin is read once, whole."""
    import subprocess
    import threading
    fifo = tmp_path / 'cfg'
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text('max_iters = 8\nlearning_rate = 2e-3\n'), daemon=True)
    writer.start()
    flags = dict(max_iters=configurator.flag(10, "steps", min=1), learning_rate=configurator.flag(1e-3, "rate", above=0))
    assert configurator.configure(flags, [str(fifo)], 'x.py', None, configs=True) == dict(max_iters=8, learning_rate=2e-3)
    writer.join()
    proc = subprocess.run([sys.executable, 'sample.py', '--init_from=gpt2', '--start=FILE:/dev/stdin'], cwd=ROOT,
                          input='Once upon a time', capture_output=True, text=True, timeout=120,
                          env={**os.environ, 'HF_HUB_OFFLINE': '1'})
    assert 'could not download gpt2' in proc.stderr, proc.stderr  # past the prompt, read: the model is next


def test_a_prompt_piped_in_without_being_asked_for_is_noted_and_file_dash_is_one_sentence(tmp_path):
    """sample.py reads a prompt from standard input only when --start=FILE:/dev/stdin asks: text piped
    in or redirected from a file without it is noted, naming that flag, while an idle or empty input
    says nothing; --start=FILE:- (other tools' name for standard input) is one sentence naming it."""
    import subprocess
    prompt = tmp_path / 'prompt.txt'
    prompt.write_text('Once upon a time')
    said = 'pass --start=FILE:/dev/stdin to make it the prompt'
    env = {**os.environ, 'HF_HUB_OFFLINE': '1'}
    for stdin, start, noted in (('Once upon a time', None, True), (prompt, None, True), ('', None, False),
                                (subprocess.DEVNULL, None, False), ('Once', 'Once', False)):
        extra = dict(input=stdin) if isinstance(stdin, str) else dict(stdin=stdin if stdin is subprocess.DEVNULL
                                                                                   else open(stdin))
        proc = subprocess.run([sys.executable, 'sample.py', '--init_from=gpt2', *([f'--start={start}'] if start else [])],
                              cwd=ROOT, capture_output=True, text=True, timeout=120, env=env, **extra)
        assert (said in proc.stdout) == noted and 'could not download gpt2' in proc.stderr, (stdin, proc.stdout, proc.stderr)
    proc = subprocess.run([sys.executable, 'sample.py', '--init_from=gpt2', '--start=FILE:-'], cwd=ROOT,
                          input='Once', capture_output=True, text=True, timeout=120, env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'standard input is read with --start=FILE:/dev/stdin' in lines[0]


def test_runs_that_are_not_what_they_seem_are_said(tmp_path, data_dir):
    """A run folder holding another run's checkpoint, a FakeLN checkpoint whose removals are unfinished,
    a 'pretrained' FakeLN sigma on a model trained from scratch, a --ckpt path that reads another folder
    than --out_dir, greedy samples that are all the same and a checkpoint cast to bfloat16 by hand, then
    resumed, are each said in a note; what a user added to a run's config.json outlives a resume
    (train.py reads none of it)."""
    import json
    import shutil
    import torch
    from conftest import TINY
    short = ['--max_iters=8', '--warmup_iters=2', '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8',
             '--eval_interval=4']
    run('train.py', *TINY, *short, f'--data_dir={data_dir}', f'--out_dir={tmp_path}/a', '--taper=internal')
    run('train.py', *TINY, *short, f'--data_dir={data_dir}', f'--out_dir={tmp_path}/b', '--taper=none',
        '--aux_loss=none', '--n_layer=1')
    shutil.copytree(tmp_path / 'b', tmp_path / 'mixed')
    shutil.copy(tmp_path / 'a' / 'ckpt.pt', tmp_path / 'mixed' / 'ckpt.pt')
    for script, args in (('fold.py', []), ('sample.py', ['--max_new_tokens=2'])):
        out = run(script, f'--out_dir={tmp_path}/mixed', *args).stdout
        assert "is not the run its folder's config.json and log describe (taper 'internal' in the checkpoint, " \
               "'none' in config.json)" in out, out

    written = tmp_path / 'b' / 'config.json'
    written.write_text(json.dumps(json.loads(written.read_text()) | {'notes': 'lr spike at 5'}))
    run('train.py', '--init_from=resume', f'--out_dir={tmp_path}/b', '--max_iters=12', '--lr_decay_iters=12')
    held = json.loads(written.read_text())
    assert held['notes'] == 'lr spike at 5' and held['max_iters'] == 12

    out = run('train.py', *TINY, '--max_iters=12', '--warmup_iters=2', '--lr_decay_iters=12', '--eval_interval=2',
              f'--data_dir={data_dir}', f'--out_dir={tmp_path}/f', '--arch=gpt2', '--norm=layernorm',
              '--taper=none', '--aux_loss=none', '--fakeln', '--fakeln_sigma=pretrained', '--fakeln_start=2,4,6,10',
              '--fakeln_gap=1,1,1', '--stop_iter=4').stdout
    assert "fakeln_sigma='pretrained' measures each LayerNorm's sigma on the model as it starts" in out, out
    out = run('sample.py', f'--out_dir={tmp_path}/f', '--max_new_tokens=2').stdout
    assert 'this FakeLN checkpoint (iter 4) still has 4 of its 7 LayerNorm paths in place' in out, out

    out = run('sample.py', f'--out_dir={tmp_path}/b', f'--ckpt={tmp_path}/a/ckpt.pt', '--max_new_tokens=2').stdout
    assert f"--ckpt={tmp_path}/a/ckpt.pt is a path of its own, so that file is read, not a checkpoint in " \
           f"--out_dir={tmp_path}/b" in out, out
    # --ckpt written from the current folder, where it is read inside --out_dir: named so
    proc = run('sample.py', '--out_dir=b', '--ckpt=a/ckpt.pt', check=False, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.strip().endswith(
        "--ckpt is read inside --out_dir, not from the current folder: for a/ckpt.pt, pass --out_dir=a --ckpt=ckpt.pt"), \
        proc.stderr
    out = run('sample.py', f'--out_dir={tmp_path}/a', '--temperature=0', '--num_samples=2', '--max_new_tokens=2').stdout
    assert 'temperature=0 decodes greedily, so the 2 samples are the same' in out, out
    ckpt = torch.load(tmp_path / 'a' / 'ckpt.pt', weights_only=True)
    ckpt['model'] = {k: v.bfloat16() if v.is_floating_point() else v for k, v in ckpt['model'].items()}
    torch.save(ckpt, tmp_path / 'a' / 'ckpt.pt')
    out = run('train.py', '--init_from=resume', f'--out_dir={tmp_path}/a', '--max_iters=10', '--lr_decay_iters=10').stdout
    assert 'holds weights in bfloat16, not the float32 train.py writes (cast by hand?)' in out, out


def test_characters_standard_output_cannot_show_print_as_question_marks_with_one_note(tmp_path, data_dir):
    """Standard output in an encoding without some characters (PYTHONIOENCODING=ascii left set, or a C
    locale) prints them as '?', with one note saying how to see them: a sampled prompt, a path printed
    by plot.py. Never UnicodeEncodeError's traceback, and the work is done."""
    import subprocess
    from conftest import TINY
    short = ['--max_iters=2', '--warmup_iters=1', '--taper_start=1', '--taper_end=2', '--lr_decay_iters=2',
             '--eval_interval=2']
    run_dir = tmp_path / 'caf\u00e9'
    run('train.py', *TINY, *short, f'--data_dir={data_dir}', f'--out_dir={run_dir}')
    env = {**os.environ, 'PYTHONIOENCODING': 'ascii'}
    for args, shown in ((['sample.py', f'--out_dir={run_dir}', '--device=cpu', '--max_new_tokens=2', '--num_samples=1',
                          '--start=caf\u00e9 Zo\u00eb'], 'caf? Zo?'),
                        (['plot.py', str(run_dir), f'--out_dir={run_dir}/plots'], f'wrote {tmp_path}/caf?/plots/loss.png')):
        proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 0 and shown in proc.stdout, proc.stderr[-2000:]
        assert len(lines) == 1 and "encoding, ascii" in lines[0] and 'PYTHONIOENCODING=utf-8' in lines[0], lines
    assert (run_dir / 'plots' / 'loss.png').is_file()


def test_a_repository_path_given_from_another_folder_is_pointed_at(tmp_path, data_dir):
    """The README's relative paths (out-quick-cpu, data/...) typed in another folder: each script says
    relative paths are read from the current folder and names the path in the repository, for a run
    folder, a checkpoint and a data folder alike. One sentence each."""
    from conftest import TINY
    run_dir = tmp_path / 'run'
    run('train.py', *TINY, '--max_iters=2', '--warmup_iters=1', '--taper_start=1', '--taper_end=2', '--lr_decay_iters=2',
        '--eval_interval=2', f'--data_dir={data_dir}', f'--out_dir={run_dir}')
    out, data = f'out-elsewhere-{os.getpid()}', f'data-elsewhere-{os.getpid()}'  # ignored by git, removed below
    (ROOT / out).symlink_to(run_dir)
    (ROOT / data).symlink_to(data_dir)
    away = tmp_path / 'away'
    away.mkdir()
    try:
        for args, said in ((['sample.py', f'--out_dir={out}', '--device=cpu'], f'pass --out_dir={ROOT / out}'),
                           (['evaluate.py', f'--out_dir={out}', '--device=cpu'], f'pass --out_dir={ROOT / out}'),
                           (['train.py', '--init_from=resume', f'--out_dir={out}', '--device=cpu'],
                            f'pass --out_dir={ROOT / out}'),
                           (['bench.py', f'--ckpt={out}/ckpt.pt', '--device=cpu'], f'pass --ckpt={ROOT / out}/ckpt.pt'),
                           (['fold.py', f'--out_dir={out}'], f"the repository's is {ROOT / out}"),
                           (['plot.py', out], f"the repository's is {ROOT / out}"),
                           (['train.py', *TINY, f'--data_dir={data}', f'--out_dir={tmp_path}/new'],
                            f'pass --data_dir={ROOT / data}')):
            proc = run(*args, check=False, cwd=away)
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            assert proc.returncode == 1 and len(lines) == 1, (args, proc.stderr[-2000:])
            assert said in lines[0] and (f'read from {away}' in lines[0] or f'in {away}, the current folder' in lines[0]), \
                (args, lines[0])
    finally:
        (ROOT / out).unlink()
        (ROOT / data).unlink()


def test_a_resume_keeps_the_runs_origin_and_an_earlier_fold_is_not_taken_for_another_run(tmp_path, data_dir):
    """A resumed run's checkpoint and config.json record where the run came from (init_from 'scratch'
    here), not the resume's own 'resume': a model folded before the resume is then said to be an earlier
    step of this run, never 'a checkpoint copied in from another run'."""
    import json
    import torch
    from conftest import TINY
    short = ['--max_iters=8', '--warmup_iters=2', '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8',
             '--eval_interval=4']
    run_dir = tmp_path / 'run'
    run('train.py', *TINY, *short, f'--data_dir={data_dir}', f'--out_dir={run_dir}')
    run('fold.py', f'--out_dir={run_dir}')
    run('train.py', '--init_from=resume', f'--out_dir={run_dir}', '--max_iters=10', '--lr_decay_iters=10')
    assert torch.load(run_dir / 'ckpt.pt', weights_only=True)['config']['init_from'] == 'scratch'
    assert json.load(open(run_dir / 'config.json'))['init_from'] == 'scratch'
    out = run('sample.py', f'--out_dir={run_dir}', '--ckpt=ckpt_folded.pt', '--device=cpu', '--max_new_tokens=2',
              '--num_samples=1').stdout
    assert 'copied in from another run' not in out and 'folded from iter 8 of this run' in out, out


def test_a_stop_that_python_drops_in_a_finalizer_is_sent_again():
    """Python drops an exception raised inside a finalizer, printing "Exception ignored", and hands it to
    sys.unraisablehook: a stop (a signal's configurator.Stopped, or Ctrl-C) that lands there would be lost
    and the script exit 0. The scripts' hook sends the same signal again; anything else is Python's."""
    import signal
    import time
    got = []

    class Dropping:
        def __init__(self, stop):
            self.stop = stop

        def __del__(self):
            raise self.stop

    stop = configurator.Stopped('stopped: SIGUSR1')
    stop.signum = signal.SIGUSR1
    before, hook = signal.signal(signal.SIGUSR1, lambda s, f: got.append(s)), sys.unraisablehook
    sys.unraisablehook = configurator.stop_again
    try:
        Dropping(stop)  # collected at once: its __del__ raises into the hook
        for _ in range(100):
            if got:
                break
            time.sleep(0.01)
        assert got == [signal.SIGUSR1]
        seen = []
        sys.__unraisablehook__, real = (lambda u: seen.append(type(u.exc_value))), sys.__unraisablehook__
        try:
            Dropping(ValueError('a bug'))
        finally:
            sys.__unraisablehook__ = real
        assert seen == [ValueError] and got == [signal.SIGUSR1]
    finally:
        sys.unraisablehook = hook
        signal.signal(signal.SIGUSR1, before)


def test_a_script_started_with_its_standard_output_closed_says_so():
    """Python gives a script started with descriptor 1 closed (`>&-`) no sys.stdout and prints nothing,
    without a word: a script whose work is what it prints (sample.py, memory.py) stops with one sentence,
    one whose work is files (fold.py) notes it once and goes on."""
    import subprocess
    for script, args, code in (('sample.py', '--out_dir=nowhere', 1), ('memory.py', '', 1), ('fold.py', '--help', 0)):
        proc = subprocess.run(['bash', '-c', f'{sys.executable} {ROOT / script} {args} >&-'], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == code and len(lines) == 1 and 'Traceback' not in proc.stderr, (script, proc.stderr)
        assert ("standard output is closed (>&-?), and what it prints is its work" if code else
                "standard output is closed, so it goes on without printing") in lines[0], (script, lines)


@pytest.mark.parametrize('script,args,said', [
    ('sample.py', '--out_dir=nowhere --start=FILE:/dev/stdin', 'reads the prompt from standard input, which is closed (<&-?)'),
    ('prepare_owt.py', '--input_file=/dev/stdin --out_dir=nowhere', 'input_file=/dev/stdin is standard input, which this '
     'script was started without (<&-?), and input_file is read more than once, which a pipe cannot be: save the input '
     'to a file and pass that'),
    ('prepare_tinystories.py', '--input_file=/dev/fd/0 --out_dir=nowhere', 'input_file=/dev/fd/0 is standard input, '
                                                                          'which this script was started without'),
    ('diagnose.py', '--out_dir=. --data_dir=/dev/stdin', 'data_dir=/dev/stdin is standard input, not a folder'),
    ('train.py', '--data_dir=/dev/stdin --device=cpu', 'data_dir=/dev/stdin is standard input, which this script was '
                                                       'started without (<&-?): name the folder that holds train.bin'),
])
def test_a_file_read_from_a_closed_standard_input_is_one_sentence(script, args, said):
    """A script told to read standard input (/dev/stdin, /dev/fd/0) but started with it closed (`<&-`), which
    leaves those names links to nothing: the input's source is said to be closed, not taken for a missing
    file or a broken link to remove."""
    import subprocess
    proc = subprocess.run(['bash', '-c', f'{sys.executable} {ROOT / script} {args} <&-'], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert said in lines[0], lines[0]
