"""
The flag layer every script shares. Each flag is declared once, with its default, one line of help
and what values it takes; the layer reads config files and --key=value arguments against those
declarations, so a wrong type, an out-of-range value, a misspelt choice or an unknown flag stops with
one sentence that names the flag and what it takes, and `--help` lists every flag.

nanoGPT's design stays: train.py, sample.py, bench.py, evaluate.py and gpu_check.py keep their
defaults as globals between two rulers,

    batch_size = flag(16, "sequences per micro-batch", min=1)
    taper = flag('internal', "'none' is Baseline", choices=('none', 'internal', 'all'))

and configure_globals(globals(), sys.argv[1:]) turns them into plain values, so the rest of the script
and every config file read `batch_size` as an int. A config file is Python that assigns globals:

    python train.py config/taper_internal_512.py --batch_size=32 --compile

Scripts with a main(argv) declare a dict of flags and read them with parse_flags(FLAGS, argv). Both
take `--key=value` (or `--key value`); a bare `--key` sets a boolean flag to True.
"""

import ast
import atexit
import codecs
import difflib
import errno
import functools
import fcntl
import importlib
import itertools
import json
import math
import numbers
import os
import re
import resource
import shlex
import shutil
import signal
import stat
import sys
import tempfile
import textwrap
import traceback
import time
import types
import unicodedata

if sys.argv[:1] == ['-m']:  # `python -m train.py`: Python imports train.py to look for a module 'py' in it
    _name = next((a for a in sys.orig_argv if a.endswith('.py')), 'train.py').removeprefix('-m')
    sys.exit(f"`python -m {_name}` takes a module name, not a file: run `python {_name}` "
             f"(or `python -m {_name.removesuffix('.py')}`)")

class FlagError(SystemExit):
    """A mistake in a flag or config file: its message is one sentence for the user (exit code 1)."""


class Flag:
    """One declared flag: a default, a line of help, and the values it takes. min/max bound a number
    inclusively, above/below exclusively; choices lists the strings it takes; items makes it a
    comma-separated list (a tuple) of that type, of `length` items if given, each item once if unique;
    path='out' makes it a folder the script will write (path='outfile': a file), path='file' a file and path='dir' a folder it
    reads, which must exist and be of that kind (path='text': a file of text, not a compressed one;
    path='run': a run's folder that only some modes read, so it may be absent, but is never a file); a
    default of None means "not set" (type then says what it takes); required means it has no default.
    read_only_when, for a path='out' folder: a function of the resolved values that is true when this
    invocation writes nothing there (--eval_only), so that a folder it may not write is still read."""

    def __init__(self, default, help, *, type=None, min=None, max=None, above=None, below=None,
                 choices=None, items=None, length=None, unique=False, path=None, required=False,
                 read_only_when=None):
        self.default, self.help, self.required = default, help, required
        self.read_only_when = read_only_when
        self.type = type or (tuple if items else builtin_type(default) if default is not None else str)
        self.min, self.max, self.above, self.below = min, max, above, below
        self.choices, self.items, self.length, self.unique, self.path = choices, items, length, unique, path
        self.listed = False  # an item of a list flag (convert_list's)

    def bounds(self):
        """The numeric range in words ('in [0, 1)', 'at least 1'), or '' when there is none."""
        low = f"[{self.min}" if self.min is not None else f"({self.above}" if self.above is not None else None
        high = f"{self.max}]" if self.max is not None else f"{self.below})" if self.below is not None else None
        if low and high:
            return f"in {low}, {high}"
        if low:
            return f"at least {self.min}" if self.min is not None else f"above {self.above}"
        if high:
            return f"at most {self.max}" if self.max is not None else f"below {self.below}"
        return ""

    def rule(self):
        """What the flag takes, in words: the end of every message about it."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.items:
            what = f"{self.length} " if self.length else ""
            kind = {int: "integers", float: "numbers", str: "names"}.get(self.items, f"{self.items.__name__}s")
            return f"{what}comma-separated {kind}" + (", each once" if self.unique else "")
        kind = {bool: "True or False", int: "an integer", float: "a number", str: "text"}[self.type]
        return f"{kind}, {self.bounds()}" if self.bounds() else kind


def flag(default, help, **rules):
    return Flag(default, help, **rules)


def builtin_type(value):
    return bool if isinstance(value, bool) else type(value)


# -----------------------------------------------------------------------------
# Reading values


def convert(key, value, spec):
    """value (text from the command line, or what a config file assigned) as the flag's type, checked
    against its rules; anything else stops with one sentence."""
    shown = value if isinstance(value, str) else repr(value)
    if value is None or (isinstance(value, str) and value == 'None' and spec.type is not str):
        if spec.default is None and not spec.required:
            return None
        raise FlagError(f"{key}=None is not allowed: {key} takes {spec.rule()}")
    if isinstance(value, str) and '\u00a0' in value:  # a web page's non-breaking space, pasted
        raise FlagError(f"{key}={value!r} holds a non-breaking space (pasted from a web page?): type the "
                        f"command's spaces again")
    if isinstance(value, str) and any(c in value for c in INVISIBLE) and key != 'start':
        raise FlagError(f"{key}={value!r} holds an invisible character (pasted from a chat or a document?): "
                        f"type the value again")
    if isinstance(value, str) and value == '=':  # --max_iters = 8, read as --max_iters '='
        raise FlagError(f"--{key} = ...: write the value after '=' without spaces, --{key}=VALUE")
    if spec.items:
        return convert_list(key, value, spec)
    if spec.type is bool:
        text = str(value).lower()
        if isinstance(value, bool) or text in ('true', 'false', '1', '0'):
            return value if isinstance(value, bool) else text in ('true', '1')
    elif spec.type is str:
        if isinstance(value, os.PathLike) and spec.path:  # a config file's pathlib.Path
            value = os.fspath(value)
        if isinstance(value, str) and not value.strip() and spec.default != '' and not spec.path:
            # an empty value is a choice only where the default itself is '' ('': none, or automatic)
            default = f" for its default ({spec.default!r})" if spec.default is not None else ""
            raise FlagError(f"{key} is empty: drop --{key}{default}, or give it a value: {spec.help}")
        if isinstance(value, str) and not spec.path and key != 'start' and re.search(r'[\x00-\x1f\x7f]', value):
            raise FlagError(f"{key}={value!r} holds a line break, tab or other control character (a pasted "
                            f"value?): give it as one line of plain text")
        path_like = spec.path or key.endswith(('_dir', '_file', '_root')) or key in PATH_KEYS
        if isinstance(value, str) and (spec.choices is not None or key in NAMES) and not value.isascii():
            raise FlagError(f"{key}={value!r} {not_ascii(value)}: {key} takes {spec.rule()}; type it again")
        if isinstance(value, str) and path_like:
            value = home(key, value)
            listed_paths(key, value)
            stray_space(key, value)
            pasted_path(key, value)
            too_long(key, value)
            other_form(key, value)
            if not spec.path:  # a declared path's own check names several paths in one value as well
                several_paths(key, value, None, listed=False)
            try:
                value = checked_range(key, value, spec)
            except FlagError as e:
                if value.isascii() or os.path.exists(value):
                    raise
                raise FlagError(f"{e} ({key} {not_ascii(value)})") from None
            special_files(key, value)
            return value
        if isinstance(value, str):
            return checked_range(key, value, spec)
    else:
        number = value
        if isinstance(value, str) and any(c in value for c in '\u2212\u2013\u2014'):  # pasted from a PDF
            raise FlagError(f"{key}={value} holds a typographic dash or minus sign (pasted from a document?): "
                            f"type it as {key}={value.translate(str.maketrans(chr(0x2212) + chr(0x2013) + chr(0x2014), '---'))}")
        if isinstance(value, str):
            try:
                number = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError):
                # 01, 007: decimal digits with a leading zero, which Python's literals refuse (no octal)
                number = int(value.strip()) if re.fullmatch(r'[+-]?0+\d+', value.strip()) else None
        if isinstance(number, numbers.Real) and not isinstance(number, (bool, numbers.Integral)):
            number = float(number)  # numpy's float64 in a config file
        elif isinstance(number, numbers.Integral) and not isinstance(number, bool):
            number = int(number)    # numpy's int64
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            if spec.type is float:
                return checked_range(key, float(number), spec)
            if isinstance(number, int) or (math.isfinite(number) and number.is_integer()):
                return checked_range(key, int(number), spec)  # --max_iters=1e6 means 1000000
    raise FlagError(f"{key}={shown} is not valid: {key} takes {spec.rule()}")


INVISIBLE = '\u200b\u200c\u200d\u2060\ufeff'  # zero-width characters, a byte-order mark
# Text flags matched against fixed spellings beside those with choices ('cuda:N'): a letter from another
# alphabet that looks like the right one is named. Any other text (a prompt, a label, a prefix) takes any letter.
NAMES = ('device',)


def not_ascii(value):
    """'holds 'с' (U+0441, CYRILLIC SMALL LETTER ES), not a plain ASCII letter': the first character
    of value outside ASCII, made visible (a look-alike from another alphabet reads as the right word)."""
    c = next(c for c in value if not c.isascii())
    return f"holds {c!r} (U+{ord(c):04X}, {unicodedata.name(c, 'unnamed')}), not a plain ASCII character"


def not_utf8_argument(arg):
    """An argument holding bytes that are not UTF-8 (a file name made under Latin-1, say): Python hands
    them over as lone surrogates, which no file, log or printed line of the scripts can encode."""
    try:
        arg.encode('utf-8')
    except UnicodeEncodeError as e:
        try:  # UTF-8 bytes that an ASCII locale (LC_ALL=C without Python's UTF-8 mode) could not read
            os.fsencode(arg).decode('utf-8')
            if codecs.lookup(sys.getfilesystemencoding()).name == 'ascii':
                raise FlagError(f"{os.fsencode(arg).decode('utf-8')} holds letters beyond ASCII, and this shell's locale "
                                f"({os.environ.get('LC_ALL') or os.environ.get('LC_CTYPE') or os.environ.get('LANG') or 'C'}) "
                                f"lets Python read ASCII alone: run with PYTHONUTF8=1 (or LC_ALL=C.UTF-8)") from None
        except UnicodeDecodeError:
            pass
        shown = os.fsencode(arg).decode('utf-8', 'backslashreplace')
        byte = os.fsencode(arg[e.start:e.end])[0]
        raise FlagError(f"{shown} holds the byte 0x{byte:02X}, which is not UTF-8 (a name made under another "
                        f"encoding, such as Latin-1?), and the scripts write and print every name as UTF-8: "
                        f"rename the file or folder in UTF-8 (`convmv -f latin1 -t utf-8 --notest <path>`), or type the value again in a UTF-8 terminal") from None


def too_long(key, path):
    """A path longer than the system takes whole (PATH_MAX, 4096 bytes on Linux, counted from /): every
    file under it would fail to open with a cryptic error, after a folder chain was made for nothing."""
    whole = len(os.path.abspath(path).encode())
    limit = os.pathconf('/', 'PC_PATH_MAX')
    if whole + 64 >= limit:  # room for the names written under a folder (.replaced/ckpt_folded.pt.tmp)
        raise FlagError(f"{key} is a path of {whole} bytes (from /), and this system takes paths of at most {limit - 1}, "
                        f"the files the scripts write under it included: choose a shorter one")


def other_form(key, path):
    """A path not there whose missing name is there in another Unicode form: 'é' typed as one character (NFC,
    as Linux keyboards type it) where the file system holds e + a combining accent (NFD, as macOS writes
    names), or the reverse. The two look the same and are different names."""
    if path.isascii() or os.path.exists(path):
        return
    parent = ''
    for part in os.path.normpath(path).split(os.sep):
        here = os.path.join(parent, part) if parent or part else os.sep
        if not os.path.exists(here):
            try:
                names = os.listdir(parent or '.')
            except OSError:
                return
            nfc = unicodedata.normalize('NFC', part)
            same = [n for n in names if n != part and unicodedata.normalize('NFC', n) == nfc]
            if same:
                raise FlagError(f"{key}={path}: {parent or '.'} holds no {part!a} but {same[0]!a}, the same letters "
                                f"in another Unicode form (a name copied from macOS?): rename it, or give the path "
                                f"as it is written there")
            return
        parent = here


def home(key, value):
    """A path's leading ~ (or ~user) as the home folder: the shell leaves it when it is quoted or follows
    '=' in --key=~/path. A folder literally named ~ that is also there makes it ambiguous."""
    expanded = os.path.expanduser(value)
    if expanded == value:
        return value
    if os.path.exists(value) and os.path.exists(expanded) and not os.path.samefile(value, expanded):
        raise FlagError(f"{key}={value} could be the folder named ~ here ({os.path.abspath(value)}) or under your "
                        f"home folder ({expanded}): give the whole path of the one you mean")
    return value if os.path.exists(value) else expanded


# The files of a run, a data folder, an export or a report that the scripts read.
READ_WHOLE = ('ckpt.pt', 'ckpt_folded.pt', 'log.jsonl', 'config.json', 'train_time.json', 'meta.json', 'train.bin',
              'val.bin', 'pile.bin', 'pile_filtered.bin', 'tokenizer.json', 'tokenizer.model', 'model.safetensors',
              'report.json')


def special_files(key, folder):  # key None: a folder named outside the flags (plot.py's runs)
    """A folder's files that the scripts read whole (a run's ckpt.pt, log.jsonl, a data folder's
    train.bin): one that is a named pipe, a socket or a device stops here, with one sentence, before a
    script waits on it forever or calls it missing."""
    if not os.path.isdir(folder):
        return
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # an unreadable folder: its own check says so
    for entry in entries:
        kind = special_kind(entry.path) if entry.name in READ_WHOLE else None
        if kind:
            raise FlagError(f"{entry.path}, in {f'{key}={folder}' if key else folder}, is {kind}, not a file: the "
                            f"scripts read it whole, more than once; put the file itself there")


def special_kind(path):
    """'a named pipe (as mkfifo or <(...) make)', 'a socket' or 'a device' for a path that is one, else None
    (a regular file, a folder, or nothing there)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (as mkfifo or <(...) make)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


STANDARD_INPUT = ('/dev/stdin', '/dev/fd/0', '/proc/self/fd/0')  # links to the process's own file 0


def dead_link(path, what='the file', named=True):
    """Why path names nothing when a symbolic link is the cause, as one sentence that says what to do, else
    None: path is a link to nothing (or a loop), or lies in a folder that is one, or is standard input
    while the script was started without it (<&-), which leaves /dev/stdin a link to nothing. what: the
    thing path should name ('the checkpoint', "the run's folder"), which the advice points the link at;
    named=False for a file that a script finds in a folder, rather than one the user named."""
    path = os.path.expanduser(str(path))
    if not path or os.path.exists(path):
        return None
    if os.path.normpath(path) in STANDARD_INPUT:
        return f"{path} is standard input, which this script was started without (<&-?): name {what} instead"
    link = os.path.normpath(path)
    while link and not (os.path.islink(link) and not os.path.exists(link)):
        parent = os.path.dirname(link)
        link = parent if parent != link else ''
    if not link:
        return None
    try:
        target = os.readlink(link)
    except OSError:
        return None
    if link == os.path.normpath(path):
        return (f"{path} is a broken symbolic link (to {target}, missing or a loop): point it at {what}, "
                f"or {f'remove it and name {what} itself' if named else f'put {what} in its place'}")
    return (f"{path} lies in {link}, a broken symbolic link (to {target}, missing or a loop): point "
            f"{link} at the folder it stood for, or name {what} by another path")


def replaced_link(path, what):
    """A note for a file that a script replaces by renaming its new one over it (what: 'the resume', 'fold.py')
    when path is a symbolic link, or has other names (a hard link): the new file takes path's place alone, and
    the file it linked to keeps what it holds. None for a plain file, or none."""
    if os.path.islink(path) and os.path.exists(path):
        return (f"{path} is a symbolic link (to {os.readlink(path)}): {what} writes its own file in the link's "
                f"place, and {os.readlink(path)} keeps what it holds")
    try:
        names = os.stat(path).st_nlink if os.path.isfile(path) else 1
    except OSError:
        return None
    if names > 1:
        return (f"{path} has {names - 1} other name{'s' * (names > 2)} (a hard link): {what} writes its own file "
                f"under this name alone, and the other{'s' * (names > 2)} keep{'' if names > 2 else 's'} what it holds")
    return None


PATH_KEYS = ('init_from', 'ckpt', 'out', 'tokenizer', 'export_hf', 'plot', 'assets')  # beside *_dir and *_file
QUOTES = '\u201c\u201d\u201e\u2018\u2019\u201a\u00ab\u00bb'  # typographic quotes, as documents print them


def listed_paths(key, value):
    """A Python list (or tuple) literal given to a flag that takes one path, --input_file="['a.jsonl']": the
    list flags read one as their items, and this flag would look for a file named by the brackets."""
    text = value.strip()
    if text[:1] + text[-1:] not in ('[]', '()') or os.path.exists(value):
        return
    try:
        items = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return
    if not (isinstance(items, (list, tuple)) and items and all(isinstance(x, str) for x in items)):
        return
    if len(items) == 1:
        raise FlagError(f"{key}={value} is a Python list, and {key} takes one path, not a list: pass "
                        f"--{key}={shlex.quote(items[0])}")
    there = [x for x in items if os.path.isfile(os.path.expanduser(x))]
    join = (f": join them into one first (`cat {' '.join(map(shlex.quote, items))} > "
            f"joined{os.path.splitext(items[0])[1]}`) and pass that" if len(there) == len(items) else ": pass one")
    raise FlagError(f"{key}={value} is a Python list of {len(items)} paths, and {key} takes one{join}")


def stray_space(key, value):
    """A path to read with a space before or after it (a value pasted or quoted with its space), which names
    nothing, while the path without it does."""
    bare = value.strip()
    if value != bare and bare and not os.path.exists(value) and os.path.exists(os.path.expanduser(bare)):
        raise FlagError(f"{key}={value!r} begins or ends with a space (pasted, or quoted with it?), and nothing has "
                        f"that name, while {bare} exists: give it without the space")


def mistyped_path(key, value):
    """For a path that names nothing and that no flag declares (plot.py's run folders): the slips of a pasted
    value that the layer names for every path flag (invisible characters, a stray space, quotes, a URL)."""
    if not isinstance(value, str) or os.path.exists(value):
        return
    try:  # "['run1', 'run2']": a Python list, where the arguments themselves are the list
        items = ast.literal_eval(value.strip()) if value.strip()[:1] + value.strip()[-1:] in ('[]', '()') else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        items = None
    split = split_paths(value)  # run1,run2 or "run1 run2": several paths in one argument
    if not (isinstance(items, (list, tuple)) and items) and split:
        items, what = split[0], f"names {len(split[0])} paths in one argument"
    if isinstance(items, (list, tuple)) and items and all(isinstance(x, str) for x in items):
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else 'plot.py'
        said = what if not value.strip().startswith(('[', '(')) else "is a Python list"
        raise FlagError(f"{value} {said}: name each of the {key} as an argument of its own, `python "
                        f"{script_path(prog)} {' '.join(map(shlex.quote, items))}`")
    if '\u00a0' in value or any(c in value for c in INVISIBLE):
        raise FlagError(f"{key}={value!r} holds an invisible character or a non-breaking space (pasted from a chat "
                        f"or a document?): type it again")
    stray_space(key, value)
    try:
        pasted_path(key, value)
    except FlagError as e:  # an argument, not a flag: its advice names the value alone
        raise FlagError(str(e).replace(f"--{key}=", "")) from None


def pasted_path(key, value):
    """A path pasted with what a document or a browser put around it: typographic quotes, or a URL."""
    if len(value) > 1 and value[0] == value[-1] and value[0] in '"\'' and not os.path.exists(value):
        raise FlagError(f"{key}={value} keeps the quotes around it (escaped, or copied from a JSON or YAML "
                        f"file): give it without them, --{key}={value[1:-1]}")
    if value and (value[0] in QUOTES or value[-1] in QUOTES):
        raise FlagError(f"{key}={value} is wrapped in typographic quotes (pasted from a document?): type it "
                        f"without them, --{key}={value.strip(QUOTES + ' ')}")
    variable = re.search(r'\$\{?([A-Za-z_]\w*)', value)
    if variable and not os.path.exists(value):
        raise FlagError(f"{key}={value} holds ${variable.group(1)}, a shell variable the shell did not expand "
                        f"(written in single quotes?): write it in double quotes, or give the path itself")
    if re.match(r'[A-Za-z]:[\\/]', value) or ('\\' in value and not os.path.exists(value)):
        raise FlagError(f"{key}={value} is a Windows path: give the path as this machine names it, with / "
                        f"between folders (under WSL, C:\\ is /mnt/c/)")
    if value.startswith('file://'):
        raise FlagError(f"{key}={value} is a file:// address: give the path itself, --{key}={value[len('file://'):]}")
    if re.match(r'[A-Za-z][A-Za-z0-9+.-]*://', value):
        name = value.partition('huggingface.co/')[2].strip('/')
        hub = f", or the hub model's name, --{key}={name}" if name and key in ('init_from', 'tokenizer') else ""
        raise FlagError(f"{key}={value} is a web address, and {key} takes a path on this machine{hub}"
                        + ("" if hub else ": download it first, then name where it lies"))


def convert_list(key, value, spec):
    if isinstance(value, str) and value.strip()[:1] + value.strip()[-1:] in ('()', '[]'):
        try:  # a Python list: --input_file="['a.txt', 'b.txt']" is those two files, as a config file's list is
            literal = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            literal = None
        value = list(literal) if isinstance(literal, (list, tuple)) and literal else \
            value.strip()[1:-1]  # --fakeln_start=(20,44,68,104) reads as 20,44,68,104
    parts = (path_items(value) if spec.path else value.split(',')) if isinstance(value, str) else \
        list(value) if isinstance(value, (list, tuple)) else None
    if parts is None or (isinstance(value, str) and not value.strip()):
        raise FlagError(f"{key}={value!r} is not valid: {key} takes {spec.rule()}")
    item = Flag(spec.items(), spec.help, type=spec.items, min=spec.min, max=spec.max, above=spec.above,
                below=spec.below, choices=spec.choices, path=spec.path)
    item.listed = True
    out = []
    for part in parts:
        if isinstance(part, str) and not part.strip():
            raise FlagError(f"{key}={value} holds an empty item (a stray comma?): {key} takes {spec.rule()}")
        try:
            out.append(convert(key, part.strip() if isinstance(part, str) else part, item))
        except FlagError:
            if spec.path:  # a file or folder of the list: its own sentence says what is wrong with it
                raise
            raise FlagError(f"{key}={value if isinstance(value, str) else tuple(value)} holds {part!r}, "
                             f"which is not valid: {key} takes {spec.rule()}") from None
    if spec.length and len(out) != spec.length:
        raise FlagError(f"{key} has {len(out)} items, not {spec.length}: {key} takes {spec.rule()}")
    twice = sorted({x for x in out if out.count(x) > 1}, key=str)
    if spec.unique and twice:
        raise FlagError(f"{key} lists {', '.join(map(str, twice))} more than once: {key} takes {spec.rule()}")
    same = [os.path.realpath(x) if spec.path and isinstance(x, str) and os.path.exists(x) else x for x in out]
    alias = [x for x, s in zip(out, same) if same.count(s) > 1]
    if spec.unique and alias:  # one file under two spellings: a.txt and d/../a.txt, or a link to it
        raise FlagError(f"{key} names one file twice, as {alias[0]} and {alias[1]}: {key} takes {spec.rule()}")
    return tuple(out)


def path_items(text):
    """Comma-separated paths, where a comma inside the name of a file that exists stays in that name
    (stories,v2.txt): the longest run of pieces that names an existing path is one item."""
    pieces, out, i = text.split(','), [], 0
    while i < len(pieces):
        j = next(j for j in range(len(pieces), i, -1)
                 if j == i + 1 or os.path.exists(os.path.expanduser(','.join(pieces[i:j]).strip())))
        out.append(','.join(pieces[i:j]))
        i = j
    return out


TYPE_WORDS = ('str', 'int', 'float', 'bool', 'list', 'tuple', 'dict', 'string', 'number', 'integer', 'boolean')


def closest_choice(value, choices):
    """The choice a mistyped value meant: the key of a setting given by the paper's name (All-Taper for all,
    Internal-Taper for internal, Baseline for none), else the nearest spelling, else None."""
    names = [str(c) for c in choices]
    plain = re.sub(r'[-_ ]?taper$', '', str(value).strip().lower())
    plain = 'none' if plain == 'baseline' and plain not in names else plain
    if plain in names:
        return plain
    close = difflib.get_close_matches(str(value), names, n=1)
    return close[0] if close else None


def checked_range(key, value, spec):
    if spec.choices is not None:
        if value in spec.choices:
            return value
        close = closest_choice(value, spec.choices)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise FlagError(f"{key}={value!r} is not one of {', '.join(map(repr, spec.choices))}{hint}")
    if spec.type is str:
        if spec.path == 'outfile':
            return checked_output_file(key, value)
        return checked_path(key, value, write=False) if spec.path == 'out' else \
            checked_input(key, value, spec.path, wanted=spec.help, listed=spec.listed)
    if not math.isfinite(value):
        raise FlagError(f"{key}={value} is not a finite number: {key} takes {spec.rule()}")
    bad = ((spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max)
           or (spec.above is not None and value <= spec.above) or (spec.below is not None and value >= spec.below))
    if not bad and spec.type is int and abs(value) > INT64_MAX:  # no tensor, count or seed holds it
        raise FlagError(f"{key}={value} lies past the largest integer the scripts can hold (2**63 - 1 = "
                        f"{INT64_MAX:,}): {key} takes {spec.rule()}")
    if not bad:
        return value
    if spec.bounds() == "at least 0":
        raise FlagError(f"{key}={value} must not be negative")
    verb = "must lie" if spec.bounds().startswith("in ") else "must be"
    raise FlagError(f"{key}={value} {verb} {spec.bounds()}")


INT64_MAX = 2**63 - 1


# The first bytes of the compressed formats a text input may arrive in, downloaded and not unpacked:
# the format, the command that writes its text to stdout, and the file ending it usually has.
COMPRESSED = {b'\x1f\x8b': ('gzip', 'gunzip -c', '.gz'), b'BZh': ('bzip2', 'bunzip2 -c', '.bz2'),
              b'\xfd7zXZ\x00': ('xz', 'unxz -c', '.xz'), b'(\xb5/\xfd': ('zstd', 'unzstd -c', '.zst'),
              b'PK\x03\x04': ('zip', 'unzip -p', '.zip')}


# The first bytes of binary formats a text input is often confused with (a dataset's hub download).
BINARY = {b'PAR1': 'a Parquet file', b'ARROW1': 'an Arrow file', b'\x93NUMPY': 'a NumPy .npy file',
          b'SQLite format 3\x00': 'an SQLite database'}


def not_utf8(key, path, chunk=16 << 20, subject=None, wanted=None):
    """A FlagError naming the first line of path that is not UTF-8 text, with the command that converts
    the file: every reader downstream (datasets, json, sentencepiece) decodes UTF-8, and a Latin-1 or UTF-16
    file otherwise fails deep inside one of them, or is read as mojibake. subject: how the sentence
    names the file (default: key=path)."""
    subject = subject or f"{key}={path}"
    if compression(path) and compression(path)[0] == 'zip' and torch_checkpoint(path):  # ckpt.pt is a zip too
        takes = re.sub(r'\s*\(default[^)]*\)$', '', wanted or '')
        raise FlagError(f"{subject} is a PyTorch checkpoint (weights), not text: "
                        + (f"{key} takes {takes}" if takes else "pass a UTF-8 text file"))
    if compression(path):  # a download not unpacked, wherever text is read (a prompt file too)
        name, unpack, ending = compression(path)
        text = path[:-len(ending)] if path.endswith(ending) else path + '.unpacked'
        raise FlagError(f"{subject} is {name}-compressed: unpack it first (`{unpack} {shlex.quote(path)} > "
                        f"{shlex.quote(text)}`) and pass {text}")
    base, ending = os.path.splitext(path)
    utf8 = f"{base}.utf8{ending}"
    takes = re.sub(r'\s*\(default[^)]*\)$', '', wanted or '') or 'UTF-8 text'  # the flag's help, less its default
    with open(path, 'rb') as f:
        head = f.read(16)
    kind = next((name for magic, name in BINARY.items() if head.startswith(magic)), None)
    if kind:
        convert = (f"; convert it first (`python -c \"import pandas; pandas.read_{'parquet' if 'Parquet' in kind else 'feather'}"
                   f"('{path}').to_json('{base}.jsonl', orient='records', lines=True)\"`) and pass {base}.jsonl"
                   if 'jsonl' in takes and kind in ('a Parquet file', 'an Arrow file') else ": convert it to that first")
        raise FlagError(f"{subject} is {kind}, not text: {key} takes {takes}{convert}")
    with open(path, 'rb') as f:
        if f.read(2) in (b'\xff\xfe', b'\xfe\xff'):
            raise FlagError(f"{subject} is UTF-16 text: convert it to UTF-8 first (`iconv -f utf-16 -t utf-8 "
                            f"{shlex.quote(path)} > {shlex.quote(utf8)}`) and pass {utf8}")
        f.seek(0)
        decoder = codecs.getincrementaldecoder('utf-8')()
        try:
            while block := f.read(chunk):
                if b'\0' in block:
                    raise UnicodeError
                decoder.decode(block)
            decoder.decode(b'', final=True)
        except UnicodeError:
            pass
        else:
            f.seek(0)
            misread = misread_words(f.read(1 << 20).decode('utf-8', errors='ignore'))
            if misread:  # UTF-8, but converted from the wrong encoding: its letters came out as signs
                note(f"{subject} reads like text converted from the wrong encoding ({len(misread)} words such as "
                     f"{', '.join(map(repr, misread[:3]))} hold a sign, a control character or a capital amid letters): "
                     f"if it was, convert the original again from its own encoding, e.g. with a guess of it "
                     f"(`{guess_command('<the original>', f'{base}.fixed{ending}')}`)")
            return
    with open(path, 'rb') as f:  # only on failure: find the line, one at a time
        for n, line in enumerate(f, 1):
            if b'\0' in line and utf16_without_mark(path):
                raise FlagError(f"{subject} holds a NUL byte on line {n}: it is UTF-16 text without a byte-order "
                                f"mark: convert it first (`iconv -f utf-16le -t utf-8 {shlex.quote(path)} > {shlex.quote(utf8)}`) and pass {utf8}")
            if b'\0' in line:
                raise FlagError(f"{subject} holds a NUL byte on line {n}: it is binary (a token file, a "
                                f"checkpoint?), not text; " + (f"{key} takes {takes}" if wanted else "pass a UTF-8 text file"))
            try:
                line.decode('utf-8')
            except UnicodeDecodeError as e:
                if e.reason == 'unexpected end of data' and not f.read(1):
                    break
                # bytes 0x80-0x9f are control characters in Latin-1, and curly quotes, dashes and the euro sign in
                # Windows-1252, whose text holds them: converted as Latin-1, they would stay in it as controls
                windows = any(0x80 <= b <= 0x9f for b in line[e.start:])
                encoding, name = ('cp1252', 'Windows-1252') if windows else ('latin1', 'Latin-1')
                with open(path, 'rb') as whole:  # the file's first MB, not one line: accents, or words of letters?
                    head = whole.read(1 << 20)
                # the runs of bytes past ASCII that are not UTF-8 (a file may hold some: a curly quote once
                # read as Latin and saved again, "â€œ", is three characters of valid UTF-8 in the file)
                bad = [r for r in re.findall(rb'[\x80-\xff]+', head) if not utf8_bytes(r)]
                runs = [len(r) for r in bad]
                words = sum(len(re.findall(rb'[\xc0-\xff]{3,}', r)) for r in bad)  # Latin rarely sets 3 accents in a row
                letters = b' '.join(sorted({r for r in bad if len(r) >= 2}))  # distinct words, not a symbol repeated
                alphabet = words >= 2 or sum(r for r in runs if r >= 3) >= 0.3 * sum(runs)  # another alphabet's words
                legacy = legacy_encoding(letters) if alphabet else None
                near = [r for r in re.findall(rb'[\x00-\x7f]?[\x80-\xff]+[\x00-\x7f]?', head) if not utf8_bytes(r)]
                latin = None if legacy else latin_encoding(b' '.join(near), words=alphabet)
                if legacy:
                    encoding = legacy
                    name = (f"{LEGACY[encoding][0]} ({LEGACY[encoding][1]}) text; another alphabet's legacy encoding "
                            f"takes its own name, e.g. cp1255 for Hebrew")
                elif latin and latin != 'cp1252':  # Polish, Czech, Turkish, DOS: their letters at Western's bytes
                    encoding, name = latin, LATIN[latin][0]
                elif not latin:
                    # Central European, Turkish, Hebrew, Japanese ...: an encoding this check does not tell apart
                    raise FlagError(f"{subject} is not UTF-8 text (line {n} holds the byte 0x{line[e.start]:02x}) but "
                                    f"an encoding this check cannot tell: convert it with a guess of it (`"
                                    f"{guess_command(path, utf8)}`, which prints the encoding it took: read the "
                                    f"text it writes) and pass {utf8}") from None
                raise FlagError(f"{subject} is not UTF-8 text (line {n} holds the byte 0x{line[e.start]:02x}): "
                                f"convert it first (`iconv -f {encoding} -t utf-8 {shlex.quote(path)} > {shlex.quote(utf8)}` "
                                f"for {name} text) and pass {utf8}") from None
    raise FlagError(f"{subject} ends inside a UTF-8 character: it was cut short; pass the whole file")


def guess_command(path, out):
    """The command that guesses the encoding of the text file at path (charset_normalizer, a requirement),
    prints it, and writes the text as UTF-8 to out: in Python, as iconv does not know every name Python's
    codecs give (mac_iceland, iso8859_2)."""
    return (f'python -c "from charset_normalizer import from_path; best = from_path({path!r}).best(); '
            f'print(best.encoding); open({out!r}, \'w\', encoding=\'utf-8\').write(str(best))"')


# Signs that a one-byte encoding puts where another has letters (Polish ą read as ±, German ä in DOS code
# page 850 read as „): amid a word's letters, they mark text converted from the wrong encoding. At a word's
# start, only those running text never puts there (Polish ś read as ¶, Ś as ¦): not quotes, ¿ or °C's °.
MISREAD_SIGNS = set('¡¢£¤¥¦§¨©ª«¬®¯°±²³µ¶¸¹º»¼½¾¿×÷ƒˆˇ˘˙˛˜˝‚“”„†‡•‰‹›€™') | {chr(c) for c in range(0x2500, 0x25a0)}
START_SIGNS = MISREAD_SIGNS - set('¡¢£¥§©«®°»¿‚“”„†‡•‹›€™µ')


def misread_words(text):
    """The distinct words of text that read as text converted from the wrong encoding, when they are at least 2
    and a tenth of the words past ASCII (those of "â€œ" aside), and the text has a letter past ASCII (its
    language's), or when one holds a control character; else []. Such a word holds signs of MISREAD_SIGNS
    between two letters, or begins with one of START_SIGNS before a lowercase letter, or holds a capital past
    ASCII amid lowercase ones (French è read in DOS code page 850 as Þ); a control character of 0x80-0x9f
    counts as such a sign (Windows-1250's ś converted as ISO-8859-2; alone, as web text's stray bullet, it
    does not). Running text rarely has them: a quote against a word; "word…word" is why … is no such sign;
    "width×height" alone, in English, has no letters past ASCII. A sign after â, Â or Ã is UTF-8 read once as
    Windows-1252 ("â€œ" for a curly quote), which some datasets (TinyStories) hold as they are, and is left
    alone. JSON lines are read
    for their strings, which JSON may write with escapes (\\u0142)."""
    if text.lstrip()[:1] in ('{', '['):
        def strings(value):
            if isinstance(value, str):
                yield value
            elif isinstance(value, (list, dict)):
                for item in (value.values() if isinstance(value, dict) else value):
                    yield from strings(item)
        read = []
        for line in text.splitlines()[:-1]:  # the last may be cut short by the read
            try:
                read.extend(strings(json.loads(line)))
            except ValueError:
                break
        text = '\n'.join(read) if read else text
    words = set(re.findall(r'\S*[^\x00-\x7f]\S*', text))
    signs, start = (''.join(map(re.escape, sorted(chars))) for chars in (MISREAD_SIGNS, START_SIGNS))
    misread = re.compile(rf'(?<=[^\W\d_])(?<![âÂÃ])[{signs}\x80-\x9f]+(?=[^\W\d_])'
                         rf'|(?<![^\s"\'(])[{start}\x80-\x9f](?=[a-z]|[^\x00-\x7f])'
                         rf'|(?<=[^\W\d_A-Z])(?P<capital>[^\x00-\x7f])(?=[a-z])')
    bad = sorted(w for w in words if any(not m['capital'] or m['capital'].isupper() for m in misread.finditer(w)))
    words = {w for w in words if not re.sub(r'[âÂÃ][^\x00-\x7f]{0,2}', '', w).isascii()}  # "â€œ": left alone
    lettered = any(c.isalpha() and not c.isascii() for w in words for c in w)
    controls = any(re.search(r'[\x80-\x9f]', w) for w in bad)  # amid letters, never in text: one word is enough
    return bad if controls or (len(bad) >= 2 and len(bad) >= 0.1 * len(words) and lettered) else []


# The legacy one-byte encodings of the alphabets other than Latin that text files still come in, and the
# alphabet each one writes. They put the letters at other bytes (Russian's lowercase at 0xe0-0xff in
# Windows-1251, 0xc0-0xdf in KOI8-R, 0xd0-0xef in ISO-8859-5; Greek's at 0xe1-0xfe, where Windows-1251 has
# Russian's): read in the wrong one, the text comes out as other letters, or uppercase, or symbols.
LEGACY = {'cp1251': ('Windows-1251', 'Cyrillic'), 'koi8-r': ('KOI8-R', 'Cyrillic'), 'cp866': ('DOS code page 866', 'Cyrillic'),
          'iso-8859-5': ('ISO-8859-5', 'Cyrillic'), 'mac-cyrillic': ('Mac Cyrillic', 'Cyrillic'),
          'cp1253': ('Windows-1253', 'Greek'), 'iso-8859-7': ('ISO-8859-7', 'Greek')}
# The Latin alphabets' one-byte encodings, each with what its text holds past ASCII (letters, and the signs
# of running text). Icelandic's ð, þ and ý are left out of the Western set: they are what Turkish ğ, ş
# and ı read as in Windows-1252.
SIGNS = '\u201c\u201d\u2018\u2019\u201a\u201e\u2013\u2014\u2026\u20ac\u2022\u2122«»°·§©®£±×÷\xa0'
LATIN = {'cp1252': ('Windows-1252', set('àáâãäåæçèéêëìíîïñòóôõöøùúûüÿßœšžÀÁÂÃÄÅÆÇÈÉÊËÌÍÎÏÑÒÓÔÕÖØÙÚÛÜŸŒŠŽ¡¿ªº¥¢' + SIGNS)),
         'cp1250': ('Windows-1250 (Central European)',
                    set('ąćęłńóśźżĄĆĘŁŃÓŚŹŻčďěňřšťůžýáéíúČĎĚŇŘŠŤŮŽÝÁÉÍÚäöüôĺľŕÄÖÜÔĹĽŔőűŐŰâăîşţÂĂÎŞŢ' + SIGNS)),
         'cp1254': ('Windows-1254 (Turkish)', set('çğıöşüÇĞİÖŞÜâîûÂÎÛ' + SIGNS))}
LATIN['iso-8859-2'] = ('ISO-8859-2 (Central European)', LATIN['cp1250'][1])  # ą, ś, ź at Windows-1250's ±, ¶, Ľ
LATIN['cp850'] = ('DOS code page 850 (Western)', LATIN['cp1252'][1])  # ä, ö at Windows-1252's „, ”


def latin_encoding(data, words=False):
    """The encoding of LATIN that reads the most of data's bytes past ASCII as its alphabet's letters and
    signs, if nearly all of them (90%); else None. data: the runs of those bytes, each with the byte either
    side, so that a sign amid letters, or a capital after a lowercase letter, counts as a misreading (see
    misread_words). A tie keeps the first: Windows-1252 before DOS's 850, Windows-1250 before ISO-8859-2.
    words: the bytes run in words of their own (another alphabet's, or Turkish's ğüş), which Western text
    rarely has and Hebrew read in Windows-1252 has ("àáâ"): Windows-1252 is then no answer."""
    def share(encoding):
        text = data.decode(encoding, errors='replace')
        high = [(a, c, b) for a, c, b in zip(' ' + text, text, text[1:] + ' ') if ord(c) > 127]
        return sum(c in LATIN[encoding][1] and not (a.isalpha() and b.isalpha() and c in MISREAD_SIGNS)
                   and not (c.isupper() and a.islower()) for a, c, b in high) / max(1, len(high))
    best = max(LATIN, key=share)
    return best if share(best) >= (0.95 if words else 0.9) and not (words and best == 'cp1252') else None
# How often each lowercase letter occurs in running text, in percent: Russian's, Greek's (final sigma apart).
LETTERS = {'Cyrillic': dict(zip('оеаинтсрвлкмдпуяыьгзбчйхжшюцщэфъё',
                                (11.0, 8.5, 8.0, 7.4, 6.7, 6.3, 5.5, 4.7, 4.5, 4.4, 3.5, 3.2, 3.0, 2.8, 2.6, 2.0, 1.9,
                                 1.7, 1.7, 1.7, 1.6, 1.4, 1.2, 1.0, 0.9, 0.7, 0.6, 0.5, 0.4, 0.3, 0.3, 0.04, 0.04))),
           'Greek': dict(zip('αοετιηνσυρπκμλςωγδάέίόθχήύβφώξζψ',
                             (11.0, 9.0, 7.5, 7.5, 7.0, 4.5, 6.5, 4.5, 4.0, 4.4, 4.0, 4.0, 3.3, 2.8, 2.9, 1.5, 1.8, 1.8,
                              1.9, 1.4, 1.3, 1.6, 1.2, 1.1, 1.1, 0.9, 0.7, 0.8, 0.6, 0.5, 0.4, 0.1)))}


def utf8_bytes(data):
    """Whether data is UTF-8."""
    try:
        data.decode('utf-8')
        return True
    except UnicodeDecodeError:
        return False


def legacy_encoding(data):
    """The encoding of LEGACY under which data's non-ASCII bytes read most like running text of its
    alphabet (the sum of its lowercase letters' frequencies, less a penalty for each uppercase letter that
    follows a lowercase one: Mac Cyrillic's я read as Windows-1251's Я, a quote read as a capital), if
    they read as that alphabet's letters at all (most of them); else None: Latin text, or UTF-8 read as Latin once
    already ("â€œ" for a curly quote), whose bytes no legacy encoding reads as words."""
    def likeness(encoding):  # lowercase letters by their frequency; an uppercase one inside a word is a misreading
        frequency, text = LETTERS[LEGACY[encoding][1]], data.decode(encoding, errors='replace')
        return sum(frequency.get(c, 0.0) if c.islower() else -5.0 if c.isupper() and before.islower() else 0.0
                   for before, c in zip(' ' + text, text) if ord(c) > 127)
    best = max(LEGACY, key=likeness)  # a tie keeps the first: Windows-1251
    high = [c for c in data.decode(best, errors='replace') if ord(c) > 127]
    # Running text of the alphabet reads as its frequent letters: 5.5% a letter on average, in Russian and
    # Greek; another alphabet's bytes (Hebrew, Arabic) read as letters too, but rarer ones, below 4.5%.
    lower = sum(c.islower() for c in high)
    return best if high and sum(c.lower() in LETTERS[LEGACY[best][1]] for c in high) >= 0.6 * len(high) \
        and likeness(best) >= 4.8 * lower else None


def torch_checkpoint(path):
    """Whether the zip file at path is one torch.save wrote: its pickle is <name>/data.pkl."""
    import zipfile
    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith('/data.pkl') or name == 'data.pkl' for name in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def compression(path):
    """(format, the command that writes its text to stdout, its usual ending) when path's first bytes
    are one of COMPRESSED's, else None."""
    with open(path, 'rb') as f:
        head = f.read(6)
    return next((kind for magic, kind in COMPRESSED.items() if head.startswith(magic)), None)


SEPARATORS = {',': 'commas', ';': 'semicolons', ':': 'colons', None: 'spaces'}  # None: any white space


def split_paths(value, base=''):
    """The paths of a value that names nothing itself but is several existing paths joined (run1,run2;
    "run1 run2"; run1:run2, as PATH is written), with the word for what joins them; else None. base: the
    folder relative paths lie in (a run's folder, for --ckpt)."""
    there = lambda p: os.path.lexists(os.path.join(base, os.path.expanduser(p)))  # noqa: E731
    if not isinstance(value, str) or there(value):
        return None
    for sep, word in SEPARATORS.items():
        parts = [p.strip() for p in value.split(sep)]
        if len(parts) > 1 and all(p and there(p) for p in parts):
            return parts, word
    return None


def several_paths(key, path, kind, listed):
    """Refuses several existing paths given in one value: a list flag's items are separated by commas; a
    flag of one text file takes the files joined into one; any other takes one path per run."""
    split = split_paths(path)
    if split is None:
        return
    parts, word = split
    if listed:
        raise FlagError(f"{key}={path} names {len(parts)} paths apart by {word}: separate them with commas, "
                        f"--{key}={','.join(parts)}")
    if kind in ('file', 'text') and all(os.path.isfile(os.path.expanduser(p)) for p in parts):
        pooled = 'joined' + os.path.splitext(parts[0])[1]  # in the folder the command runs in
        raise FlagError(f"{key}={path} names {len(parts)} files apart by {word}, and {key} takes one: join them "
                        f"into one first (`cat {' '.join(map(shlex.quote, parts))} > {pooled}`) and pass that")
    raise FlagError(f"{key}={path} names {len(parts)} paths apart by {word}, and {key} takes one: name one, "
                    f"--{key}={shlex.quote(parts[0])}, and run the script again for each of the others")


def checked_input(key, path, kind, wanted=None, listed=False):
    """A file (kind 'file', or 'text' for a text file) or folder (kind 'dir') the script reads: named,
    there, and of that kind. Kind 'run': a run's folder, absent or a folder. A leading ~ (quoted, so
    the shell left it) is the home folder, as the shell would have read it. wanted: what the flag takes
    (its help), which a binary file's sentence names; listed: path is one item of a list flag."""
    if kind is None:
        return path
    path = os.path.expanduser(path)
    if kind == 'run':
        several_paths(key, path, kind, listed)
        return checked_input(key, path, 'dir') if os.path.lexists(path) or not path.strip() else path
    if kind == 'text':
        checked_input(key, path, 'file', listed=listed)
        not_utf8(key, path, wanted=wanted)
        return path
    noun = 'file' if kind == 'file' else 'folder'
    if not path.strip():
        raise FlagError(f"{key} is empty: name the {noun} to read")
    if os.path.normpath(path) in STANDARD_INPUT and kind == 'dir':
        raise FlagError(f"{key}={path} is standard input, not a folder: name the {noun}")
    if os.path.normpath(path) in STANDARD_INPUT and not os.path.exists(path):  # not piped in: it is read again
        raise FlagError(f"{key}={path} is standard input, which this script was started without (<&-?), and {key} "
                        f"is read more than once, which a pipe cannot be: save the input to a file and pass that")
    if dead_link(path, f"the {noun}"):
        raise FlagError(f"{key}={dead_link(path, f'the {noun}')}")
    if kind == 'file' and os.path.isdir(path):
        raise FlagError(f"{key}={path} is a folder, not a file: name the file itself")
    if kind == 'dir' and os.path.isfile(path):
        raise FlagError(f"{key}={path} is a file, not a folder: name the folder that holds it "
                        f"({os.path.dirname(os.path.abspath(path))})")
    several_paths(key, path, kind, listed)
    if not os.path.exists(path):
        raise FlagError(f"{key}={path}: no such {noun}{elsewhere_hint(path) or '; check the path'}")
    if kind == 'file' and special_kind(path):
        raise FlagError(f"{key}={path} is {special_kind(path)}, not a file: it can be read only once, and "
                        f"{key} is read more than once; save it to a file first and pass that")
    return path


# Endings of the files the scripts write or read: a folder flag given one of them names a file by mistake.
FILE_ENDINGS = ('.png', '.pdf', '.svg', '.jpg', '.pt', '.pth', '.bin', '.safetensors', '.json', '.jsonl', '.txt',
                '.csv', '.md', '.model', '.py')


def placeholder(key, path, example):
    """A path to write with '...' (or more dots) for a folder, copied from a docs row: a folder of that name
    would be made, and hidden, as ls does not show it. example: a name to offer instead."""
    dots = next((part for part in os.path.normpath(path).split(os.sep) if len(part) > 2 and not part.strip('.')), None)
    if dots:
        raise FlagError(f"{key}={path} holds '{dots}', a placeholder left in from the docs (a folder of that name "
                        f"would be hidden): name the folder, e.g. --{key}={example}")


def checked_output_file(key, path):
    """A file the script will write (path='outfile'): named, not under a link to nothing, no placeholder, no
    stray space or line break. Whether it may be replaced, and its folder, are the script's to check, as they
    depend on what it writes there."""
    path = os.path.expanduser(path)
    if not path.strip():
        raise FlagError(f"{key} is empty: name the file to write, or drop --{key}")
    if any(c in path for c in '\r\n\t') or path != path.strip():
        raise FlagError(f"{key}={path!r} begins or ends in, or holds, a space, tab or line break: name the file "
                        f"without it")
    if dead_link(path, 'the file to write'):  # itself, or a folder it lies in
        raise FlagError(f"{key}={dead_link(path, 'the file to write')}")
    placeholder(key, path, os.path.join(os.path.dirname(os.path.dirname(path)) or '.',
                                                           'out', os.path.basename(path)).removeprefix('./'))
    return path


def checked_path(key, path, write=True):
    """A folder the script will write into: named, not a file, and inside a folder it may write (write=False
    leaves that last check to check_writable, once every flag is known). A leading ~ is the home folder."""
    path = os.path.expanduser(path)
    if not path.strip():
        raise FlagError(f"{key} is empty: name the folder to write into, e.g. --{key}=out")
    if os.path.islink(path) and not os.path.exists(path):
        raise FlagError(f"{key}={path} is a broken symbolic link (to {os.readlink(path)}): remove it, or name "
                        f"another folder")
    if dead_link(path):  # the folder lies under a link to nothing: it could not be made
        raise FlagError(f"{key}={dead_link(path, 'another folder')}")
    several_paths(key, path, 'out', listed=False)  # out1,out2: two runs meant, one folder named by both
    if os.path.exists(path) and not os.path.isdir(path):
        if path.endswith('.pt'):  # a run's checkpoint, named where its run's folder goes
            raise FlagError(f"{key}={path} is a file (a checkpoint?), not a folder: name a folder to write into, e.g. "
                            f"the one that holds it ({os.path.dirname(os.path.abspath(path))})")
        raise FlagError(f"{key}={path} is a file, not a folder: name a new folder to write into")
    ending = os.path.splitext(os.path.normpath(path))[1].lower()
    if ending in FILE_ENDINGS and not os.path.isdir(path):
        raise FlagError(f"{key}={path} ends in {ending}, like a file, but names the folder the script writes its "
                        f"files into (it names them itself): name a folder, e.g. --{key}="
                        f"{os.path.splitext(os.path.normpath(path))[0]}")
    if any(c in path for c in '\r\n\t') or path != path.rstrip():
        raise FlagError(f"{key}={path!r} ends in or holds a space, tab or line break (a config file saved with "
                        f"Windows line ends?): name the folder without it")
    if repository_folder(path, assets=key != 'assets'):  # reproduce.py --assets=assets refreshes the README's results
        where = repository_folder(path)
        example = os.path.relpath(os.path.join(HERE, os.path.basename(os.path.normpath(path))))
        raise FlagError(f"{key}={path} is {where}, where the outputs would lie among its files: name a folder "
                        f"for them, e.g. --{key}={example if where.startswith('a folder inside') else 'out'}")
    placeholder(key, path, 'out-run')
    whose = {os.path.realpath(os.path.expanduser('~')): 'your home folder itself',
             os.path.realpath(os.sep): "the file system's root"}.get(os.path.realpath(path))
    if whose:  # --out_dir=~ meant ~/runs/...: the outputs would lie among every file of the user's
        raise FlagError(f"{key}={path} is {whose}, where the outputs would lie among your own files: name a "
                        f"folder for them, e.g. --{key}={os.path.join(path, 'out')}")
    parent = nearest_existing(path)
    longest = max(os.path.abspath(path).split(os.sep), key=len)
    limit = os.pathconf(parent, 'PC_NAME_MAX') if os.path.isdir(parent) else 255
    if len(longest.encode()) > limit:
        raise FlagError(f"{key}={path} has a name of {len(longest.encode())} bytes, and this file system takes at "
                        f"most {limit}: choose a shorter name")
    if not os.path.isdir(parent):
        raise FlagError(f"{key}={path} lies inside {parent}, which is a file: name a folder to write into")
    return check_writable(key, path) if write else path


# The repository's folders of its own files (assets/ takes reproduce.py's results, as the docs say).
REPOSITORY_FOLDERS = ('config', 'docs', '.ci', '.git')


def script_path(script):
    """How a printed command names one of the repository's scripts: its bare name when the command runs in
    the repository's folder, else its path from there (a run started as python ~/tapernorm/train.py from
    a folder of the user's, where `python train.py` finds nothing)."""
    if os.path.realpath(os.getcwd()) == HERE:
        return script
    where = os.path.relpath(os.path.join(HERE, script))
    return shlex.quote(where if not where.startswith(os.pardir + os.sep + os.pardir) else os.path.join(HERE, script))


def repository_folder(folder, assets=True):
    """"the repository's own folder" (or its config/ folder, ...) when folder is one that holds the
    repository's files, which no script writes its outputs into; else None. assets=False leaves out
    assets/ and the folders in it, the committed results, which only reproduce.py --assets rewrites."""
    if os.path.abspath(folder) == HERE:
        return "the repository's own folder"
    if os.path.realpath(folder) in {os.path.join(HERE, f) for f in REPOSITORY_FOLDERS}:
        return f"the repository's {os.path.basename(os.path.realpath(folder))}/ folder"
    inside = [f for f in REPOSITORY_FOLDERS if (os.path.realpath(folder) + os.sep).startswith(os.path.join(HERE, f, ''))]
    if inside:  # docs/out-quick-cpu: a config's relative out_dir, run from inside docs/ or config/
        return f"a folder inside the repository's {inside[0]}/ folder"
    committed = os.path.join(HERE, 'assets')
    if assets and (os.path.realpath(folder) + os.sep).startswith(committed + os.sep):
        return f"the repository's {os.path.relpath(os.path.realpath(folder), HERE)}/ folder (its committed results)"
    return None


def nearest_existing(path):
    """path itself, or the nearest folder above it that exists (where a folder to be made is created)."""
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    return parent


def check_writable(key, path):
    """path, a folder to write into (present, or made inside the nearest folder that is): one sentence when
    no file can be created there."""
    parent = nearest_existing(path)
    why = cannot_write(parent)
    if why and os.path.isfile(os.path.join(path, 'ckpt.pt')):  # a run's folder: another one holds no checkpoint
        copy = os.path.join(tempfile.gettempdir(), os.path.basename(os.path.normpath(path)) or 'run')
        raise FlagError(f"{key}={path} cannot be written: {why}, and the run's checkpoints and log go there: copy the "
                        f"run's folder to a place you may write and name that (`cp -r {shlex.quote(path)} "
                        f"{shlex.quote(copy)}`, then --{key}={shlex.quote(copy)})")
    if why:
        raise FlagError(f"{key}={path} cannot be written: {why}; choose another folder")
    return path


def folder_kind(path):
    """What an existing folder holds, as a phrase for a sentence ('a data folder (it holds train.bin or
    meta.json)'), or None when it is none of the repository's kinds."""
    has = lambda f: os.path.isfile(os.path.join(path, f))
    if has('train.bin') or has('meta.json'):
        return 'a data folder (it holds train.bin or meta.json)'
    if has('ckpt.pt') or has('log.jsonl'):
        return 'a training run (it holds ckpt.pt or log.jsonl)'
    if has('config.json') and (has('model.safetensors') or has('model.safetensors.index.json')
                               or has('pytorch_model.bin')):
        return 'an HF model (written by save_pretrained)'
    if has('results.json') and (has('results.md') or os.path.isdir(os.path.join(path, 'runs'))):
        return "a reproduction's results (it holds results.json, written by reproduce.py)"
    return None


def init_from_mistake(init_from, names):
    """One sentence when init_from is empty, or a misspelling of one of names (e.g. 'Resume' for
    'resume') that no folder of that name explains; else None."""
    if not init_from.strip():
        return f"init_from is empty: --init_from={', '.join(names)}, or an HF model's name or folder"
    close = difflib.get_close_matches(init_from.lower(), names, n=1, cutoff=0.7)
    if close and init_from not in names and not os.path.exists(init_from):
        return f"init_from={init_from!r} is not a model name: did you mean --init_from={close[0]}?"
    return None


def discard(path):
    """Remove a script's own leftover (a .tmp file or staging folder) while it stops: one it may not remove
    (an append-only folder) stays, and the sentence of the failure that stops the script is what is said."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
    except OSError:
        pass


def matplotlib_folder():
    """Before matplotlib is imported: where its config and font cache go. A home that cannot hold them (a
    read-only home, HOME a file) makes matplotlib use a temporary folder with a two-line warning each run;
    the scripts choose that temporary folder themselves, quietly, and remove it at exit."""
    if os.environ.get('MPLCONFIGDIR'):
        return
    home = os.path.expanduser('~')
    folders = [os.path.join(os.environ.get('XDG_CONFIG_HOME') or os.path.join(home, '.config'), 'matplotlib'),
               os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.join(home, '.cache'), 'matplotlib')]
    for folder in folders:
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError:
            break
        if cannot_write(folder):
            break
    else:
        return
    temporary = tempfile.mkdtemp(prefix='matplotlib-')
    atexit.register(shutil.rmtree, temporary, ignore_errors=True)
    os.environ['MPLCONFIGDIR'] = temporary


def unreplaceable(path):
    """Why a script may not replace path (None if it may), as the start of a sentence: a file that does not
    open for writing (read-only, or immutable or append-only, which stop root too: its rename would fail), or
    a folder with such a file, or in which no file can be created. Opening a file writes nothing. Checked
    before anything is written, so that a replacement never stops part-way and leaves half of what was there."""
    if os.path.isdir(path) and not os.path.islink(path):
        for folder, _, names in os.walk(path):
            for why in [cannot_write(folder), *(unreplaceable(os.path.join(folder, n)) for n in names)]:
                if why:
                    return why
        return None
    if not os.path.isfile(path) or os.path.islink(path):  # a link is replaced, never its target
        return None
    try:
        open(path, 'r+b').close()
    except OSError as e:
        return f"{path} does not open for writing ({e.strerror})"
    return None


def cannot_write(folder):
    """Why no file can be created in folder (None if one can): a file that is never linked into the
    folder is the one sure test, root included (os.access says yes to root)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as e:
        return f"no file can be created in {folder} ({e.strerror})"


# -----------------------------------------------------------------------------
# Reading argv and config files


# Folders the libraries underneath read from the environment: one that names a file fails deep inside them.
CACHE_FOLDERS = ('HF_HOME', 'HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'HF_DATASETS_CACHE', 'TRANSFORMERS_CACHE',
                 'TIKTOKEN_CACHE_DIR', 'DATA_GYM_CACHE_DIR', 'XDG_CACHE_HOME', 'TORCHINDUCTOR_CACHE_DIR', 'MPLCONFIGDIR')


# Switches the HF libraries read: '1', 'ON', 'YES' or 'TRUE' is on, and any other word off.
SWITCHES = ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_DATASETS_OFFLINE')

# Thread counts torch reads at import: OpenMP's may list one count per nesting level ('4,2').
THREAD_COUNTS = {'OMP_NUM_THREADS': r'\d+(,\d+)*', 'MKL_NUM_THREADS': r'\d+'}


def releasing_locks(main):
    """main, letting go of the FolderLocks it took when it returns or stops: a prepare script's main()
    called in a process that goes on (a test) must not keep its data folder locked."""
    def run(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        finally:
            while FolderLock.held:
                os.close(FolderLock.held.pop())
            TIED[0] = False  # later forks of a process that goes on are its own (tie_workers)
    return run


try:  # prctl, loaded before any child is forked: a child forked from a threaded process only calls it
    import ctypes
    PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith('linux') else None
except (OSError, AttributeError):
    PRCTL = None


TIED = [False]  # whether this process's forks are tied to it now (tie_workers, until releasing_locks' main ends)


def tied_child():
    if TIED[0]:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for signum in SIGNALS:  # the parent's stop handlers, inherited: a pool's SIGTERM must end a worker at once
            if signal.getsignal(signum) is stopped:
                signal.signal(signum, signal.SIG_DFL)
        if PRCTL is not None:
            PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def tie_workers():
    """Every process this one forks until its main (under releasing_locks) ends, datasets' map workers among
    them, ignores Ctrl-C, which this process takes and says in one line (each worker printed its own
    traceback), and is killed when this process dies, even by kill -9 (workers left behind held its folder's
    lock, and the next run was told to wait for them)."""
    if not TIED[0] and tied_child not in FORK_HOOKS:
        os.register_at_fork(after_in_child=tied_child)
        FORK_HOOKS.append(tied_child)
    TIED[0] = True


FORK_HOOKS = []  # registered once per process: os.register_at_fork has no way to remove one


class FolderLock:
    """One process at a time writes the folder path (a data folder of a prepare script): an exclusive
    lock on the folder itself, nothing written for it, held until the process exits. Taken up front
    when the folder exists, else once it is made; a folder another process filled in between is
    refused, since this one's checks saw it empty."""

    held = []  # every lock this process holds: a script called as a function (a test) lets go at its end

    def __init__(self, path, prog):
        self.path, self.prog, self.fd = path, prog, None
        self.seen = sorted(os.listdir(path)) if os.path.isdir(path) else []
        if os.path.isdir(path):
            self.hold()

    def hold(self):
        if self.fd is not None:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SystemExit(f"another {self.prog} is writing into {self.path} right now: wait for it to end, "
                             f"then run this again") from None
        self.fd = fd
        FolderLock.held.append(fd)
        if sorted(os.listdir(self.path)) != self.seen:
            raise SystemExit(f"another process wrote into {self.path} while {self.prog} read its input, so "
                             f"its checks no longer hold: run this again")


def locked(path):
    """Whether another process holds an exclusive lock on path (a folder or a file): train.py's on its
    running run's folder, fold.py's on the checkpoint it folds. The probe, a shared lock, is let go at once."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def bad_thread_count():
    """The sentence for a thread count in the environment that OpenMP or MKL cannot read, else None."""
    for name, form in THREAD_COUNTS.items():
        threads = os.environ.get(name)
        if threads is not None and not (re.fullmatch(form, threads.strip()) and int(threads.split(',')[0]) > 0):
            return f"{name}={threads} is not a thread count: unset it, or set a whole number such as {name}=2"
    return None


def check_environment():
    """The environment every script reads, checked as its flags are: a FlagError of one sentence."""
    if bad_thread_count():
        raise FlagError(bad_thread_count())
    for name in SWITCHES:  # huggingface_hub reads any other word as off, without a word
        value = os.environ.get(name)
        if value is not None and value.strip().upper() not in ('1', 'ON', 'YES', 'TRUE', '0', 'OFF', 'NO', 'FALSE', ''):
            raise FlagError(f"{name}={value} is neither on nor off: set {name}=1 to work offline, or unset it")
    for name in CACHE_FOLDERS:
        if os.environ.get(name):
            check_cache(name, os.environ[name])
    backend = os.environ.get('MPLBACKEND')
    if backend:  # matplotlib checks it as it is imported: a wrong one is a traceback from deep inside it
        try:
            importlib.import_module('matplotlib')
        except ValueError:
            raise FlagError(f"MPLBACKEND={backend} is not a matplotlib backend: unset it (the scripts draw "
                            f"with Agg), or name one such as MPLBACKEND=Agg") from None
        except ImportError:
            pass


def check_cache(name, path, writes=False):
    """A cache folder a library creates on first use, set by environment variable name or, when that is
    unset, derived from HOME: a FlagError of one sentence when it is a file or cannot be created, or, with
    writes (a library that writes into it, datasets' lock files), when it cannot be written."""
    given = name in os.environ
    source = next((v for v in ('HF_HOME', 'XDG_CACHE_HOME', 'HOME') if os.environ.get(v)), 'HOME')
    setting = f"{name}={path}" if given else f"the default {name}, {path} (from {source}={os.environ.get(source)}),"
    remedy = "point it at a folder you may write, or unset it" if given else \
        f"set {name} (or HF_HOME) to a folder you may write"
    if os.path.exists(path) and not os.path.isdir(path):
        raise FlagError(f"{setting} is a file, not a folder: {remedy}")
    if not os.path.exists(path):  # the library will create it: it must be able to
        parent = nearest_existing(path)
        why = f"{parent} is a file" if not os.path.isdir(parent) else cannot_write(parent)
        if why:
            raise FlagError(f"{setting} does not exist and cannot be created ({why}): {remedy}")
    elif writes and cannot_write(path):  # there, but read-only (a shared cache, a read-only mount)
        raise FlagError(f"{setting} cannot be written ({cannot_write(path)}): {remedy}")


# The scripts that run under torchrun, one process per rank; every other one runs alone.
RANKED = ('train.py',)


def configure(flags, argv, prog, doc, configs=False, positional=None, start=None, layered_note=True):
    """Apply config files (configs=True: bare arguments name them) and --key=value arguments, in
    order, to the declared flags; return the resolved values as a dict. --help prints the flags.
    start, a dict, replaces the defaults of the flags it names (train.py's resume: the run's config).
    layered_note=False leaves the note on config files that change each other's values to the caller."""
    check_environment()
    for arg in argv:
        not_utf8_argument(arg)
    if any(a == '-f' and re.fullmatch(r'kernel-.*\.json', os.path.basename(b)) for a, b in zip(argv, argv[1:])):
        raise FlagError(f"{prog} reads its flags from the command line, and this one is a Jupyter kernel's "
                        f"({' '.join(argv)}): run `!python {prog} --key=value ...` in a cell, or set "
                        f"sys.argv = ['{prog}', '--key=value', ...] before running it")
    ranks = os.environ.get('WORLD_SIZE', '1')
    if prog not in RANKED and ranks.strip() not in ('', '1'):  # torchrun would run one copy per rank
        if os.environ.get('RANK', '0').strip() not in ('', '0') and 'TORCHELASTIC_RUN_ID' in os.environ:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())  # torchrun's rank 0 says it, before
            time.sleep(10)                                                  # torchrun ends the ranks
        left = [k for k in ('WORLD_SIZE', 'RANK', 'LOCAL_RANK') if k in os.environ]  # a shell's, without torchrun
        raise FlagError(f"WORLD_SIZE={ranks}: {prog} runs in one process, so start it with `python {script_path(prog)}`, not "
                        f"torchrun (only train.py trains over ranks), or unset {' '.join(left)} if a shell left "
                        f"{'it' if len(left) == 1 else 'them'} set")
    values = {key: spec.default for key, spec in flags.items()}
    for key, value in (start or {}).items():
        if key in flags:
            values[key] = convert(key, value, flags[key])
    loose = []
    given = set()  # the flags set on the command line so far
    set_by, overrides = {}, []  # the config file that set each key; (key, that file, a later one changing it)
    stale = {}  # a key given after a config file that computed others from it: its value as written
    read_by = {}  # a key a config file computed others from: (that file, the value it used, those keys, set there)
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ('-h', '--help'):
            if isinstance(sys.stdout, Printing):  # the help is all this invocation's work
                sys.stdout.kept = None
            try:
                print(usage(flags, prog, doc, configs, positional), flush=True)
            except BrokenPipeError:  # `--help | head`: the reader has what it wanted
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(0)
        if arg == '--':
            raise FlagError(f"`--` is not a flag of {prog}: only reproduce.py passes the arguments after -- on to "
                            f"train.py; write --key=value")
        if arg[:1] in DASHES and arg[1:2] != '':
            raise FlagError(f"{arg!r} starts with {arg[0]!r}, not '--' (text pasted from a PDF or a web page?): "
                            f"type it as --{arg.lstrip(arg[0])}")
        if not arg.startswith('--') and i >= 2 and argv[i - 2].startswith('--') and '=' not in argv[i - 2] \
                and arg.lower() in ('true', 'false', '0', '1'):  # --compile False, after a boolean flag
            raise FlagError(f"{argv[i - 2]} {arg}: a boolean flag takes its value after '=': write "
                            f"{argv[i - 2]}={arg.capitalize()}")
        if re.fullmatch(r'-[A-Za-z_]\w*(=.*)?', arg, re.S) and arg[1:].partition('=')[0] in flags:
            raise FlagError(f"{arg} has one dash: flags take two, --{arg[1:]}")
        if arg.startswith('--') and '=' not in arg and arg[2:] in given and arg[2:] in flags and i < len(argv) and \
                not argv[i].startswith('--') and flags[arg[2:]].type is not bool and \
                convert(arg[2:], argv[i], flags[arg[2:]]) != values[arg[2:]]:  # --n_layer 3, after --n_layer=2
            note(f"--{arg[2:]} is given twice; the later value, {argv[i]}, is used")
        if arg.startswith('--') and '=' in arg and arg[2:].partition('=')[0] in given and \
                convert(arg[2:].partition('=')[0], arg.partition('=')[2], flags[arg[2:].partition('=')[0]]) != \
                values[arg[2:].partition('=')[0]]:
            note(f"--{arg[2:].partition('=')[0]} is given twice; the later value, {arg.partition('=')[2]}, is used")
        if not arg.startswith('--'):
            if configs:
                read, derived = read_file(arg, values, flags, prog)
                read_by.update({key: (arg, used, targets, key in read) for key, (used, targets) in derived.items()})
                overridden = [k for k in read if k in given and read[k] != values[k]]
                if overridden:  # in order, the file would undo the flag: never what the flag meant
                    raise FlagError(f"{arg} sets {overridden[0]}, which --{overridden[0]}= before it already set, "
                                    f"and a later argument wins: put config files first, then the flags that "
                                    f"change them")
                overrides += [(k, set_by[k], arg) for k in read if k in set_by and read[k] != values[k]]
                set_by.update(dict.fromkeys(read, arg))
                values.update(read)
            elif positional:
                mistyped_path(positional, arg)
                loose.append(arg)
            else:
                globbed = spread_files(argv, i - 1, flags)
                if globbed:
                    raise FlagError(globbed)
                raise FlagError(f"unexpected argument {arg!r}: {prog} takes flags written --key=value "
                                 f"(`python {script_path(prog)} --help` lists them)" + path_flag_hint(arg, flags, prog))
            continue
        key, has_value, raw = arg[2:].partition('=')
        spec = known(key, flags, prog, "on the command line")
        if not has_value:
            if spec.type is bool:
                raw = 'True'
            elif i < len(argv) and not argv[i].startswith('--'):
                raw, i = argv[i], i + 1  # --key value
            else:
                raise FlagError(f"--{key} needs a value: write --{key}=VALUE, where {key} takes {spec.rule()}")
        if has_value and split_value(argv, i, flags, positional):  # before its value is checked: it is cut short
            raise FlagError(split_value(argv, i, flags, positional))
        values[key] = convert(key, raw, spec)
        given.add(key)
        if key in read_by and values[key] != read_by[key][1]:
            stale[key] = raw
    for key, raw in stale.items():  # out_dir = f'out-{n_layer}' in a config file, then --n_layer=2
        path, used, targets, own = read_by[key]
        kept = [target for target in targets if target not in given]
        if kept:
            raise FlagError(f"{path} computes {', '.join(kept)} from {key} ({used!r} when it ran), and --{key}={raw} "
                            f"after it changes {key} alone: " + (f"set {key} = {values[key]!r} in {path}" if own else
                                                                 f"give --{key}={raw} before {path}, which then reads it"))
    if overrides and layered_note:  # stacked config files, e.g. a shell's {a,b}_{64,512} pattern expanded to several
        pairs = {}  # (earlier file, later file): the values the later one changes
        for key, first, later in overrides:
            pairs.setdefault((first, later), []).append(key)
        note("; ".join(f"{later} changes {', '.join(keys[:8])}{', ...' if len(keys) > 8 else ''} of {first}"
                       for (first, later), keys in pairs.items()) + ": the last config file to set a value decides it")
    if positional:
        if not loose:
            raise FlagError(f"{prog} needs at least one {positional} argument (`python {script_path(prog)} --help`)")
        values[positional] = tuple(loose)
    missing = [key for key, spec in flags.items() if spec.required and values[key] is None]
    if missing:
        raise FlagError(f"{prog} needs --{missing[0]}: {flags[missing[0]].help}")
    for key, spec in flags.items():  # a folder is written only if this invocation writes at all
        if spec.path == 'out' and isinstance(values[key], str) and not (spec.read_only_when and
                                                                        spec.read_only_when(values)):
            check_writable(key, values[key])
    return values


NOTED = set()  # the notes said so far: a script that reads its flags again (memory.py, per plan) says each once


def silent_rank():
    """A rank other than 0 under torchrun (which sets TORCHELASTIC_RUN_ID): rank 0 alone speaks for all of them.
    A RANK left in a shell without torchrun leaves no rank 0 to speak: the one process does."""
    return os.environ.get('RANK', '0').strip() not in ('', '0') and 'TORCHELASTIC_RUN_ID' in os.environ


def note(text):
    """A note on stdout, once, from rank 0 alone under torchrun (every rank reads the same flags)."""
    if not silent_rank() and text not in NOTED:
        NOTED.add(text)
        print(f"note: {text}")


def known(key, flags, prog, where):
    if key in flags:
        return flags[key]
    if key in ('config', 'config_file', 'cfg') and key not in flags:  # argparse's habit
        raise FlagError(f"--{key} is no flag: a config file is named alone, before the flags that change it, "
                        f"e.g. python {prog} config/quick_cpu.py --max_iters=100")
    negated = re.fullmatch(r'(no|disable|without)[-_](\w[\w-]*)', key)  # argparse's --no-compile habit
    if negated and negated[2].replace('-', '_') in flags and flags[negated[2].replace('-', '_')].type is bool:
        raise FlagError(f"unknown flag '{key}' {where}: a boolean is switched off with "
                        f"--{negated[2].replace('-', '_')}=False")
    close = difflib.get_close_matches(key, list(flags), n=1, cutoff=0.75)  # 0.6 offers 'fakeln' for 'backend'
    begun = [name for name in flags if len(key) >= 3 and name.startswith(key)]  # --gpu for --gpu_gb
    close = close or (begun if len(begun) == 1 else [])
    hint = f"; did you mean '{close[0]}'?" if close else f" (`python {script_path(prog)} --help` lists them)"
    raise FlagError(f"unknown flag '{key}' {where}{hint}")


HERE = os.path.dirname(os.path.abspath(__file__))  # the repository's scripts


def checkpoint_hint(path, flags, prog=None):
    """For a checkpoint file given where config files go, the flags that name it to this script; for a
    run's config.json (train.py's record of its settings), how that run is read."""
    folder, name = os.path.split(path)
    run = name == 'config.json' and os.path.isfile(os.path.join(folder or '.', 'ckpt.pt'))
    if prog == 'memory.py' and (run or path.endswith(('.pt', '.ckpt'))):  # a run's plan is train.py's
        return (f"; a run's plan is `python {script_path('train.py')} --init_from=resume --out_dir={shlex.quote(folder or '.')} --memory_plan` "
                f"(it takes its settings from its checkpoint)")
    trains = 'init_from' in flags and 'out_dir' in flags and 'ckpt' not in flags  # train.py
    done = finished(folder or '.') if trains and (run or path.endswith(('.pt', '.ckpt'))) else None
    further = (f"the run in {folder or '.'} has finished (iter {done[0]} of max_iters={done[1]}): train it further "
               f"with --init_from=resume --out_dir={shlex.quote(folder or '.')} --max_iters=<above {done[1]}>"
               if done else '')
    if run:
        path, name = os.path.join(folder, 'ckpt.pt'), 'ckpt.pt'
        if trains and done:  # to run its settings again: they are written out as a config file
            settings = os.path.join(folder, 'config.json')
            return (f"; {settings} is that run's record of its settings, and {further}, or train its settings again "
                    f"in a new folder: `python -c \"import json; print(*(f'{{k}} = {{v!r}}' for k, v in json.load(open("
                    f"{settings!r})).items() if k != 'out_dir'), sep=chr(10))\" > rerun.py` writes them as a config "
                    f"file, then `python {script_path('train.py')} rerun.py --out_dir=<a new folder>`")
        if trains:
            return (f"; {folder or '.'}/config.json is that run's record of its settings: continue the run with "
                    f"--init_from=resume --out_dir={folder or '.'} (it takes its settings from its checkpoint)")
    if not path.endswith(('.pt', '.ckpt')):
        return ""
    if 'ckpt' in flags and 'out_dir' not in flags:  # bench.py: a path
        return f"; a checkpoint is named with --ckpt={path}"
    if 'ckpt' in flags:  # sample, evaluate, diagnose: a file in a run's folder
        return f"; a run's checkpoint is read with --out_dir={folder or '.'}" + (f" --ckpt={name}" if name != 'ckpt.pt' else "")
    if 'init_from' in flags and 'out_dir' in flags:  # train.py
        return f"; {further}" if done else f"; a run is continued with --init_from=resume --out_dir={folder or '.'}"
    return ""


def finished(folder):
    """(the last iter log.jsonl records, max_iters) when the run in folder has logged its max_iters, else None."""
    try:
        with open(os.path.join(folder, 'config.json'), encoding='utf-8-sig') as f:
            end = json.load(f).get('max_iters')
        with open(os.path.join(folder, 'log.jsonl'), 'rb') as f:
            skip = f.seek(max(0, os.path.getsize(os.path.join(folder, 'log.jsonl')) - 65536)) > 0  # its last rows,
            rows = [json.loads(line) for line in f.read().decode('utf-8', 'replace').splitlines()[skip:]  # whole
                    if line.strip().startswith('{') and line.strip().endswith('}')]
    except (OSError, ValueError, AttributeError):
        return None
    last = max((row['iter'] for row in rows if isinstance(row, dict) and isinstance(row.get('iter'), int)),
               default=None)
    return (last, end) if isinstance(end, int) and last is not None and last >= end else None


def in_repository(path):
    """For a relative path that is not there but is in the repository's folder (a README command run
    from another folder), the path there; None otherwise."""
    try:
        cwd = os.path.abspath(os.getcwd())
    except OSError:  # the current folder was removed
        return None
    there = os.path.join(HERE, path)
    if os.path.isabs(path) or os.path.exists(path) or not os.path.exists(there) or cwd == HERE:
        return None
    return there


def elsewhere_hint(path):
    """The end of a sentence saying path is not there, for a path in_repository: where it is; '' otherwise."""
    if not in_repository(path):
        return ""
    return (f" in {os.getcwd()}, the current folder (relative paths are read from there); the repository's is "
            f"{in_repository(path)}: name it so, or run from {HERE}")


def elsewhere_remedy(path, key):
    """A remedy for a path in_repository that flag key named, said after a sentence's colon; None otherwise."""
    if not in_repository(path):
        return None
    return (f"relative paths are read from {os.getcwd()}, the current folder, and {path} is in the repository: "
            f"pass --{key}={in_repository(path)}, or run from {HERE}")


def missing_config_hint(path):
    """Where a config file that is not at path likely is: the repository's own, for a path relative to
    the repository run from another folder; a file of a similar name beside where it was looked for."""
    if elsewhere_hint(path):
        return elsewhere_hint(path)
    folder, name = os.path.split(path)
    configs = os.path.join(HERE, 'config')  # then quick_cpu.py for config/quick_cpu.py: the repository's own
    for where, shown in ((folder or '.', folder), (configs, os.path.relpath(configs))):
        try:
            stems = [f[:-3] for f in os.listdir(where) if f.endswith('.py')]
        except OSError:
            continue
        near = difflib.get_close_matches(os.path.splitext(name)[0], stems, n=1, cutoff=0.8)
        if near:
            return f"; did you mean {os.path.join(shown, near[0] + '.py')}?"
    return " (arguments that are not --key=value name config files)"


def path_flag_hint(arg, flags, prog=None):
    """For a loose argument that is a folder or a file: the flag that names one, as a suggestion; for a
    run's folder, the command that reads that run where the script's --out_dir would not (train.py's is
    a resume, memory.py plans a run through train.py, bench.py reads the checkpoint file)."""
    if os.path.isfile(os.path.join(arg, 'ckpt.pt')) and prog in ('train.py', 'memory.py', 'bench.py'):
        return {'train.py': f"; a run's folder is continued with --init_from=resume --out_dir={arg}",
                'memory.py': f"; a run's plan is `python {script_path('train.py')} --init_from=resume --out_dir={shlex.quote(arg)} --memory_plan`",
                'bench.py': f"; a run's checkpoint is named with --ckpt={os.path.join(arg, 'ckpt.pt')}"}[prog]
    data = os.path.isfile(os.path.join(arg, 'meta.json'))  # a prepared data folder, else a run's or any folder
    usual = [key for key in (('data_dir', 'out_dir') if data else ('out_dir', 'data_dir')) if key in flags]
    kinds = ('run', 'dir', 'out') if os.path.isdir(arg) else ('file', 'text') if os.path.isfile(arg) else ()
    named = (usual if os.path.isdir(arg) else []) + [key for kind in kinds for key, spec in flags.items() if spec.path == kind]
    return f"; a {'folder' if os.path.isdir(arg) else 'file'} is named with a flag, e.g. --{named[0]}={arg}" if named else ""


DASHES = '\u2010\u2011\u2012\u2013\u2014\u2015\u2212'  # what a PDF or a web page makes of '--'


def joined(argv, flags):
    """argv, already checked by configure, with each `--key value` written `--key=value`: a script that
    sorts its own arguments into config files and flags reads the value as no config file."""
    out, i = [], 0
    while i < len(argv):
        arg, key = argv[i], argv[i][2:]
        i += 1
        if arg.startswith('--') and '=' not in arg and key in flags and flags[key].type is not bool and \
                i < len(argv) and not argv[i].startswith('--'):
            arg, i = f"{arg}={argv[i]}", i + 1
        out.append(arg)
    return out


def spread_files(argv, at, flags):
    """One sentence when argv[at] is a file that follows a file flag's value given after a space (--input_file
    st/*.txt, which the shell expands into one argument per file), else None: only the first file became the
    flag's value."""
    key = argv[at - 2][2:] if at >= 2 and argv[at - 2].startswith('--') and '=' not in argv[at - 2] else None
    spec = flags.get(key)
    if spec is None or spec.path not in ('file', 'text') or not os.path.isfile(argv[at - 1]):
        return None
    files = [argv[at - 1]] + list(itertools.takewhile(lambda a: not a.startswith('--') and os.path.isfile(a), argv[at:]))
    if len(files) < 2:
        return None
    folder, ending = os.path.dirname(files[0]), os.path.splitext(files[0])[1]
    pattern = shlex.quote(os.path.join(folder, '')) + f"*{ending}" if folder else f"*{ending}"
    if spec.items:  # several files, comma-separated: the shell can write that list
        return (f"--{key} is followed by {len(files)} files apart by spaces (a pattern such as {pattern}, which the "
                f"shell expands into one argument per file), and only the first became its value: give them "
                f"comma-separated, e.g. --{key}=\"$(ls {pattern} | paste -sd, -)\"")
    return (f"--{key} is followed by {len(files)} files apart by spaces (a pattern the shell expanded?), and takes "
            f"one: join them into one first (`cat {pattern} > joined{ending}`) and pass --{key}=joined{ending}")


def split_value(argv, at, flags, positional=None):
    """For a loose word right after a --key=value flag that takes text, and no file of that name: the
    sentence for a value the shell split at its spaces (--start=Once upon a time), else None. A script
    that takes paths as arguments (positional) reads a word with a / in it as one of those."""
    key, _, value = argv[at - 1][2:].partition('=') if at and argv[at - 1].startswith('--') else ('', '', '')
    if key not in flags or flags[key].type is not str or flags[key].choices or not value:
        return None
    if flags[key].path and os.path.exists(os.path.expanduser(value)):  # a path that is there: the value is whole
        return None
    def word(w):  # a bare word: not a flag (nor one pasted with a dash), a path, a config file or a quoted phrase
        return (w.strip() and w == w.strip() and not any(c.isspace() for c in w) and w[0] not in '-' + DASHES
                and not os.path.exists(w) and not w.lower().endswith('.py') and not (positional and '/' in w))
    words = list(itertools.takewhile(word, argv[at:]))
    if not words:
        return None
    whole = ' '.join([value, *words])
    return (f"--{key}={value} is followed by {' '.join(words)!r}: the shell splits a value at its spaces unless it "
            f"is quoted, so quote it whole: --{key}={shlex.quote(whole)}")


def utf16_without_mark(path):
    """Whether a file's first bytes read as UTF-16 little-endian text without its byte-order mark: nearly
    every other byte NUL, after printable ASCII or a line end (a letter beyond ASCII may stand between)."""
    with open(path, 'rb') as f:
        head = f.read(512)
    pairs = len(head) // 2
    text = sum(head[2 * k + 1] == 0 and (32 <= head[2 * k] < 127 or head[2 * k] in b'\t\r\n') for k in range(pairs))
    return pairs > 0 and text >= 0.9 * pairs


# The words YAML reads as null and booleans (1.1's, which many configs still use), as Python writes them.
YAML_WORDS = {'null': 'None', '~': 'None', 'true': 'True', 'yes': 'True', 'on': 'True', 'false': 'False',
              'no': 'False', 'off': 'False'}


def read_file(path, values, flags, prog):
    if not path.strip():
        raise FlagError(f"argument {path!r} is blank (a space after a backslash that ends a line?): remove it")
    named = path if path == path.strip() and path.isprintable() else repr(path)  # a stray space made visible
    clean = ''.join(c for c in path.strip() if c not in INVISIBLE)
    if clean != path and os.path.isfile(clean):
        raise FlagError(f"{named} holds spaces or invisible characters around the file name: write {clean}")
    if os.path.isdir(path):
        raise FlagError(f"{named} is a folder, not a config file (a file such as config/taper_internal_512.py)"
                        f"{path_flag_hint(path, flags, prog)}")
    piped = os.path.exists(path) and stat.S_ISFIFO(os.stat(path).st_mode)  # train.py <(printf 'max_iters = 8')
    if special_kind(path) and not piped:  # a link to /dev/zero would be read forever
        raise FlagError(f"config file {named} is {special_kind(path)} ({os.path.realpath(path)}), not a file: name "
                        f"the config file itself")
    if not path.lower().endswith('.py') and not piped and os.path.isfile(path + '.py'):
        raise FlagError(f"{named} is not a config file; did you mean {path}.py?")
    if not path.lower().endswith('.py') and not piped and not os.path.exists(path) and \
            missing_config_hint(path + '.py').startswith('; did you mean'):  # taper_internal_512: config/'s own
        raise FlagError(f"{named} is not a config file{missing_config_hint(path + '.py')}")
    if not path.lower().endswith('.py') and not os.path.exists(path) and 'start' in flags:
        raise FlagError(f"{path!r} is neither a flag nor a config file: a prompt is given as --start=..., e.g. "
                        f"--start={shlex.quote(path)}")
    if not path.lower().endswith('.py') and not piped:  # config/Mine.PY too
        raise FlagError(f"{named} is not a config file: a config file is Python (.py) that assigns values, "
                        f"e.g. learning_rate = 3e-4" + checkpoint_hint(path, flags, prog))
    if not os.path.isfile(path) and not piped:
        raise FlagError(f"config file {named} not found{missing_config_hint(path)}")
    namespace = dict(values)
    try:
        with open(path, encoding='utf-8-sig') as f:  # a byte-order mark from a Windows editor
            source = f.read()
    except UnicodeDecodeError:
        raise FlagError(f"config file {path} is not UTF-8 text: save it as UTF-8") from None
    try:
        tree = ast.parse(source, path)
    except SyntaxError as e:
        line = source.splitlines()[e.lineno - 1] if e.lineno and e.lineno <= len(source.splitlines()) else ''
        zero = re.search(r'(?<![\w.])0+(\d+)(?![\w.])', line) if 'leading zeros' in e.msg else None
        if zero:  # max_iters = 012: Python reads no leading zero (0o12 is octal), where a flag reads 012 as 12
            raise FlagError(f"config file {path}, line {e.lineno}: {zero.group(0)} has a leading zero, which Python "
                            f"does not take in a number: write {zero.group(1)}") from None
        raise FlagError(f"config file {path}, line {e.lineno}: {e.msg}; a config file is Python that "
                        f"assigns values, e.g. learning_rate = 3e-4") from None
    if os.path.dirname(os.path.abspath(path)) == HERE and any(
            isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body):
        raise FlagError(f"{path} is one of the repository's scripts, not a config file: name a config file "
                        f"first, e.g. python {prog} config/quick_cpu.py")
    for node in tree.body:  # for lr in [...]: learning_rate = lr, a sweep: only the last value would stay
        if isinstance(node, ast.For) and isinstance(node.iter, (ast.List, ast.Tuple, ast.Set)) and len(node.iter.elts) > 1:
            swept = sorted({t.id for sub in ast.walk(node) if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                            for t in (sub.targets if isinstance(sub, ast.Assign) else [sub.target])
                            if isinstance(t, ast.Name) and t.id in flags})
            if swept:
                raise FlagError(f"config file {path}, line {node.lineno}, sets {', '.join(swept)} in a loop, which "
                                f"leaves only its last value: a config file describes one run; start one run per value "
                                f"instead, e.g. `for v in 1e-3 3e-4; do python {script_path(prog)} {shlex.quote(path)} "
                                f"--{swept[0]}=$v --out_dir=out-$v; done`")
    own = script_functions(prog)
    for node in tree.body:  # def get_lr(...) in a config file: the script's function, which no config replaces
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in own:
            instead = {'get_lr': "; the schedule is set by learning_rate, warmup_iters, lr_decay_iters and min_lr",
                       'get_gate': "; the taper's schedule is set by taper_start and taper_end"}.get(node.name, "")
            raise FlagError(f"config file {path}, line {node.lineno}, defines {node.name}, which is {prog}'s own "
                            f"function: a config file sets {prog}'s flags, and {prog} never reads a function from it"
                            f"{instead} (`python {script_path(prog)} --help` lists them)")
    for node in tree.body:  # `taper: all`, YAML's way: checked before it runs (`taper: internal` is a NameError)
        if isinstance(node, ast.AnnAssign) and node.value is None:
            value = node.annotation
            word = isinstance(value, ast.Name) and value.id not in ('True', 'False', 'None')
            meant = repr(value.id) if word else ast.unparse(value)  # a word of YAML is a string in Python
            spec = flags.get(ast.unparse(node.target))
            if word and value.id.lower() in YAML_WORDS:  # YAML's null, true, yes, off ...: not strings there
                meant = YAML_WORDS[value.id.lower()]
                if meant == 'None' and spec is not None and spec.choices and 'none' in spec.choices:
                    meant = "'none'"  # the flag's own word for nothing (aux_loss, taper)
            advice = f"write `{ast.unparse(node.target)} = {meant}`"
            if meant == 'None' and spec is not None and spec.default is not None:  # the flag takes no None
                advice = f"drop the line for {ast.unparse(node.target)}'s default ({spec.default!r})"
            elif word and meant.startswith("'") and spec is not None and value.id.lower() not in YAML_WORDS and (
                    spec.type is not str or value.id in TYPE_WORDS or (spec.choices and value.id not in spec.choices)):
                # learning_rate: float or taper: str, a type where the value goes; taper: Internal, no choice
                near = closest_choice(value.id, spec.choices) if spec.choices and value.id not in TYPE_WORDS else None
                advice = (f"give {ast.unparse(node.target)} a value, which is {spec.rule()}, e.g. "
                          f"`{ast.unparse(node.target)} = {(near if near is not None else spec.default)!r}`")
            raise FlagError(f"config file {path}, line {node.lineno}: `{ast.unparse(node)}` assigns nothing "
                            f"(a YAML habit?): {advice}")
    argv = list(sys.argv)
    try:
        namespace['__name__'] = '__main__'  # as `python config.py` would run it: an `if __name__` block too
        namespace['__file__'] = os.path.abspath(path)  # a config that places out_dir beside itself
        exec(compile(tree, path, 'exec'), namespace)
        if sys.argv != argv:  # sys.argv += ['--max_iters=20']: the script read its arguments already
            added = [a for a in sys.argv if a not in argv] or sys.argv[1:]
            sys.argv[:] = argv
            raise FlagError(f"config file {path} changes sys.argv ({' '.join(added)[:60]}), which {prog} read before "
                            f"it ran the file: a config file assigns values, e.g. "
                            + (f"{added[0][2:].partition('=')[0]} = {added[0].partition('=')[2]}"
                               if added and added[0].startswith('--') and '=' in added[0] else "max_iters = 20"))
    except SyntaxError as e:
        raise FlagError(f"config file {path}, line {e.lineno}: {e.msg}; a config file is Python that "
                         f"assigns values, e.g. learning_rate = 3e-4") from None
    except FlagError:
        raise
    except SystemExit:
        raise FlagError(f"config file {path} calls exit(): a config file only assigns values, e.g. "
                        f"learning_rate = 3e-4") from None
    except Exception as e:  # it runs as Python: a NameError, a division by zero, ...
        line = next((f.lineno for f in reversed(traceback.extract_tb(e.__traceback__))
                     if f.filename == path), '?')
        word = getattr(e, 'name', None) if isinstance(e, NameError) else None
        if word and word.lower() in YAML_WORDS:  # tied_head = yes: YAML's word for True, which Python lacks
            meant = YAML_WORDS[word.lower()]
            raise FlagError(f"config file {path}, line {line}: {word} is YAML's word for {meant}, which Python does "
                            f"not know: " + (f"write {meant}" if meant != 'None' else
                                             "drop the line for the flag's default")) from None
        node = next((n for n in tree.body if isinstance(n, ast.Assign) and n.lineno == line and len(n.targets) == 1
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id in flags), None)
        spec = flags[node.targets[0].id] if word and node is not None else None
        if spec is not None and spec.type is str and not spec.items:  # taper = internal: a text value unquoted
            written = ast.get_source_segment(source, node.value)
            meant = closest_choice(written, spec.choices) if spec.choices else written
            raise FlagError(f"config file {path}, line {line}: {word} is not defined: a text value is written in "
                            f"quotes in Python, " + (f"`{node.targets[0].id} = {meant!r}`" if meant else
                                                     f"and {node.targets[0].id} takes {spec.rule()}")) from None
        raise FlagError(f"config file {path}, line {line}: {type(e).__name__}: {e}") from None
    for node in tree.body:  # a statement at the top that looks like an assignment but assigns nothing
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Compare) and \
                isinstance(node.value.ops[0], ast.Eq) and isinstance(node.value.left, ast.Name):
            raise FlagError(f"config file {path}, line {node.lineno}: `{ast.unparse(node)}` compares and "
                            f"assigns nothing: write `{ast.unparse(node.value.left)} = "
                            f"{ast.unparse(node.value.comparators[0])}`")
        if isinstance(node, ast.Expr) and not isinstance(node.value, (ast.Call, ast.Await)) and not (
                isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):  # not a docstring
            shown = ast.unparse(node)
            raise FlagError(f"config file {path}, line {node.lineno}: `{shown if len(shown) < 60 else shown[:57] + '...'}`"
                            f" is a value that assigns nothing (JSON or a dict?): a config file assigns each "
                            f"value, e.g. max_iters = 20")
    imported = set()  # names an import binds (from math import pi, or *): the module's, not settings
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == '*' and isinstance(node, ast.ImportFrom) and node.module:
                    imported |= set(dir(sys.modules.get(node.module) or importlib.import_module(node.module)))
                else:
                    imported.add((alias.asname or alias.name).partition('.')[0])
    assigned, bound = {}, bound_names(tree) | imported
    for key, value in namespace.items():
        if key.startswith('_') or isinstance(value, (types.ModuleType, types.FunctionType, type)) or \
                (callable(value) and key not in flags) or (key in imported and key not in flags):  # from math import *
            continue  # a helper of the file's own (_base = 64), or an import
        if key not in flags and isinstance(value, dict) and any(k in flags for k in value):  # mmcv's config = dict(...)
            raise FlagError(f"config file {path} puts its settings in a dict, {key} = dict(...): a config file "
                            f"assigns each at the top level, e.g. {next(k for k in value if k in flags)} = "
                            f"{value[next(k for k in value if k in flags)]!r}")
        spec = known(key, flags, prog, f"in {path} (another script's config file? a helper's name starts with _)")
        if value is values.get(key) and key not in bound:  # read, not set (taper = 'internal',
            continue  # the default, is set: the name is bound, though CPython's interning makes it the same object)
        try:
            assigned[key] = convert(key, value, spec)
        except FlagError as e:
            raise FlagError(f"{path}: {e}") from None
    return assigned, derived_values(tree, flags, {key: assigned.get(key, values[key]) for key in flags})


@functools.lru_cache(maxsize=None)
def script_functions(prog):
    """The functions and classes the script prog (one of the repository's) defines at its top level."""
    try:
        with open(os.path.join(HERE, prog), encoding='utf-8') as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    return frozenset(node.name for node in tree.body
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def bound_names(tree):
    """The names a config file binds at its top level (in an if or a for too), whatever their values."""
    names, todo = set(), list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp,
                             ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their names are their own
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def derived_values(tree, flags, ran):
    """For a config file: {a flag it computes other flags' values from: (the value it used, those flags)},
    following its statements in order, through helper names (out_dir = f'out-{n_layer}', lr_decay_iters =
    max_iters, if device == 'cpu': compile = False)."""
    def names(node, ctx):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}
    derived = {}
    for key in flags:
        tainted = {key}
        for statement in tree.body:
            if names(statement, ast.Load) & tainted:
                tainted |= names(statement, ast.Store)
        if tainted & set(flags) - {key}:
            derived[key] = (ran[key], sorted(tainted & set(flags) - {key}))
    return derived


def usage(flags, prog, doc, configs, positional):
    head = (f"usage: python {prog}" + (" [config.py ...]" if configs else "")
            + (f" {positional} [{positional} ...]" if positional else "") + " [--key=value ...]")
    if not doc and sys.flags.optimize >= 2:  # python -OO or PYTHONOPTIMIZE=2 strips the script's docstring
        doc = f"(the description and examples of {prog} are its docstring, which python -OO strips: run it without -OO)"
    lines = [head, "", (doc or "").strip(), "", "flags (--key=value; a bare --key sets a boolean to True; a later value overrides an earlier one):"]
    for key, spec in flags.items():
        default = ','.join(map(str, spec.default)) if isinstance(spec.default, tuple) else spec.default
        shown = "required" if spec.required else f"default {default!r}"
        lines.append(f"  --{key}={'' if spec.required else default}")
        lines += textwrap.wrap(f"{spec.help} [{spec.rule()}; {shown}]", 100, initial_indent=' ' * 6,
                               subsequent_indent=' ' * 6)
    return "\n".join(lines)


def parse_flags(flags, argv=None, positional=None):
    """For a script with main(argv): its declared flags read from argv (default sys.argv[1:]), as an
    object with one attribute per flag."""
    caller = sys._getframe(1).f_globals
    prog = os.path.basename(caller.get('__file__', 'script'))
    values = configure(flags, sys.argv[1:] if argv is None else list(argv), prog, caller.get('__doc__'),
                       positional=positional)
    return types.SimpleNamespace(**values)


def configure_globals(namespace, argv, start=None):
    """For a script whose defaults are its globals: each flag(...) between its rulers becomes the
    value that config files and argv give it, in place; returns the resolved config as a dict.
    start(values) may return a dict that replaces the defaults, given the values argv resolves to
    (train.py's resume starts from the run's own config); config files and argv then apply on top."""
    flags = {k: v for k, v in namespace.items() if isinstance(v, Flag)}
    prog = os.path.basename(namespace.get('__file__', 'script'))
    values = configure(flags, argv, prog, namespace.get('__doc__'), configs=True)
    base = start(values) if start else None
    if base:
        values = configure(flags, argv, prog, namespace.get('__doc__'), configs=True, start=base)
    namespace.update(values)
    return values



def figure_metadata(path, script):
    """matplotlib's savefig metadata that marks a figure as one of this repository's scripts' (a PNG's
    Software field, a PDF's or SVG's Creator), so that a later run may replace it and no other file."""
    return {('Software' if path.lower().endswith('.png') else 'Creator'): f'tapernorm {script}'}


def is_our_figure(path, script):
    """Whether the image file at path carries figure_metadata's mark for script, read from the field
    itself (a PNG's tEXt chunk, a PDF's /Creator, an SVG's dc:creator), not searched for in the bytes."""
    with open(path, 'rb') as f:
        data = f.read(1 << 16)
    mark = f'tapernorm {script}'.encode()
    if data.startswith(b'\x89PNG\r\n\x1a\n'):
        at = 8
        while at + 8 <= len(data):  # chunks: length, type, data, CRC
            length, kind = int.from_bytes(data[at:at + 4], 'big'), data[at + 4:at + 8]
            if kind == b'tEXt' and data[at + 8:at + 8 + length] == b'Software\0' + mark:
                return True
            at += 12 + length
        return False
    if data.startswith(b'%PDF'):
        return b'/Creator (' + mark + b')' in data
    return re.search(rb'<dc:creator>\s*<cc:Agent>\s*<dc:title>' + re.escape(mark) + rb'</dc:title>', data) is not None


# -----------------------------------------------------------------------------
# What the machine lacks. A package that is not installed, or a disk that is full, is the user's to
# fix, wherever in a script or its libraries it surfaces: one sentence, as for a flag, from the hook
# every uncaught exception passes through. Anything else, a bug, keeps its traceback.

# The import name of each package the scripts use, and what pip installs it as (requirements.txt,
# and the optional ones a flag asks for).
PACKAGES = {'torch': 'torch', 'numpy': 'numpy', 'sentencepiece': 'sentencepiece', 'tiktoken': 'tiktoken',
            'datasets': 'datasets', 'transformers': 'transformers', 'tqdm': 'tqdm', 'matplotlib': 'matplotlib',
            'google.protobuf': 'protobuf', 'safetensors': 'safetensors', 'tokenizers': 'tokenizers',
            'huggingface_hub': 'huggingface_hub', 'wandb': 'wandb', 'yaml': 'pyyaml'}
FULL = (errno.ENOSPC, errno.EDQUOT)


def causes(error):
    """error and every exception it was raised from or while handling, outermost first."""
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def lacking(error):
    """One sentence when error comes from what the machine lacks (a package, disk space) or an environment
    variable a library reads as it is imported (TORCH_LOGS), else None."""
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else 'this script'
    if isinstance(error, ValueError) and 'Invalid log settings' in str(error) and 'TORCH_LOGS' in os.environ:
        return (f"TORCH_LOGS={os.environ['TORCH_LOGS']} names a log torch does not know: fix the name (e.g. "
                f"TORCH_LOGS=recompiles; TORCH_LOGS=help lists them), or unset it")
    for cause in causes(error):
        name = getattr(cause, 'name', None) if isinstance(cause, ModuleNotFoundError) else None
        top = next((p for p in PACKAGES if name and (name == p or name.startswith(p + '.'))), None)
        if top:
            return (f"{prog} needs the {PACKAGES[top]} package, which this Python ({sys.executable}) cannot import: "
                    f"`pip install -r requirements.txt` (or `pip install {PACKAGES[top]}`)")
    for cause in causes(error):
        if isinstance(cause, OSError) and cause.errno == errno.EFBIG and size_limit():
            where = f" while writing {cause.filename}" if getattr(cause, 'filename', None) else ""
            return (f"{prog} stopped{where}: the file-size limit of this shell (ulimit -f) is "
                    f"{size_limit() / 1024:.0f} KB: raise it (ulimit -f unlimited), then run again")
        if isinstance(cause, OSError) and cause.errno in FULL or 'No space left on device' in str(cause):
            where = f" while writing {cause.filename}" if getattr(cause, 'filename', None) else ""
            return (f"{prog} stopped: the disk is full{where}: free some space (df -h shows it), or write to a "
                    f"folder on another disk")
        if isinstance(cause, MemoryError) or isinstance(cause, OSError) and cause.errno == errno.ENOMEM or any(
                s in str(cause) for s in ('Cannot allocate memory', 'failed to map segment', 'std::bad_alloc')):
            # a library's mmap, or C++'s allocation failing under torch's import
            limit = resource.getrlimit(resource.RLIMIT_AS)[0]
            if limit != resource.RLIM_INFINITY:
                return (f"{prog} stopped: it ran out of memory under this shell's limit of {limit / 2 ** 30:.1f} GB "
                        f"(ulimit -v): raise it (ulimit -v unlimited), then run again")
            return (f"{prog} stopped: it ran out of memory: close other programs, or run it on a machine with more "
                    f"(for train.py, `python memory.py` with the same flags shows what a run needs)")
        if isinstance(cause, OSError) and cause.errno in (errno.EMFILE, errno.ENFILE):
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            return (f"{prog} stopped: it may open no more files (the limit of this shell, ulimit -n, is {limit}): "
                    f"raise it (ulimit -n 4096), then run again")
    return None


def peer_lost(error):
    """Under torchrun, the sentence for a collective that failed because another rank's process died
    (killed, out of memory): '' on ranks other than 0, which say nothing; None for any other error."""
    lost = ('Connection reset by peer', 'Connection closed by peer', 'Broken pipe', 'Socket Timeout')
    if os.environ.get('WORLD_SIZE', '1').strip() in ('', '1') or not any(
            type(cause).__name__ == 'DistBackendError' or isinstance(cause, RuntimeError) and
            any(s in str(cause) for s in lost) for cause in causes(error)):
        return None
    if os.environ.get('RANK', '0').strip() not in ('', '0'):
        return ''
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else 'this script'
    return (f"{prog} stopped: another rank's process ended (killed, or out of memory?), so this one stops too; the "
            f"run is as of its last checkpoint, and --init_from=resume under the same torchrun command continues it")


def size_limit():
    """The largest file this process may write, in bytes (ulimit -f), or None when there is no limit."""
    import resource
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def write_remedy(reason):
    """What to do about a failed write whose reason (write_failure's) the machine sets, else None."""
    if reason.startswith('the disk is full'):
        return "free space, or write to another disk"
    if reason.startswith('the file-size limit'):
        return "raise the limit (ulimit -f unlimited) in the shell that runs it"
    return None


def write_failure(error, path):
    """Why writing path failed, in words ('the disk is full (0.2 MB free)'), or None when error is no
    failed write (a bug keeps its traceback). torch.save reports a full disk as a RuntimeError of its
    zip writer."""
    text = str(error)
    if not (isinstance(error, OSError) or 'PytorchStreamWriter' in text or 'inline_container' in text):
        return None
    try:
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    except OSError:
        free = None
    if getattr(error, 'errno', None) in FULL or (not isinstance(error, OSError) and free is not None
                                                 and free < 256 << 20):
        return "the disk is full" + (f" ({free / 1e6:.1f} MB free)" if free is not None else "")
    if getattr(error, 'errno', None) == errno.EFBIG or (not isinstance(error, OSError) and size_limit()):
        return f"the file-size limit of this shell (ulimit -f) is {size_limit() / 1024:.0f} KB"
    return error.strerror if isinstance(error, OSError) and error.strerror else text.strip().splitlines()[0]


def excepthook(kind, error, tb):
    cause = error.__context__
    while cause is not None and not isinstance(error, KeyboardInterrupt):  # a library's clean-up that failed as
        if isinstance(cause, KeyboardInterrupt):  # a Ctrl-C unwound it (datasets' pool, asking its stopped
            error = cause                         # workers for results): the stop is what happened
        cause = cause.__context__
    if isinstance(error, StdoutFailed):
        print(error.args[0], file=sys.stderr)
        return
    if isinstance(error, BrokenPipeError):  # `... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    if isinstance(error, KeyboardInterrupt):  # Ctrl-C: the user's own stop, not a failure to explain
        if silent_rank():  # torchrun stops every rank: rank 0 says it
            return
        prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else 'this script'
        print(f"{prog} stopped: {error.args[0] if isinstance(error, Stopped) else 'interrupted (Ctrl-C)'}",
              file=sys.stderr)
        return
    sentence = lacking(error) or peer_lost(error)
    if sentence == '':  # said by rank 0
        return
    if sentence is None:
        sys.__excepthook__(kind, error, tb)
    else:
        print(sentence, file=sys.stderr)


sys.excepthook = excepthook


class Stopped(KeyboardInterrupt):
    """A stop by signal (a scheduler's SIGTERM, a closed terminal's SIGHUP), raised where the script is, so
    that its clean-up runs as after Ctrl-C (a half-written file removed) and the hook says why."""


# The signals that stop a script, each with the words that say why; the kernel's SIGKILL cannot be caught.
# train.py's run rolls back on each (and on Ctrl-C), every other script stops through Stopped.
SIGNALS = {signal.SIGTERM: "terminated (SIGTERM)",
           signal.SIGHUP: "its terminal closed (SIGHUP; nohup or tmux keeps a job going)",
           signal.SIGQUIT: "Ctrl-\\ (SIGQUIT)",
           signal.SIGUSR1: "SIGUSR1 (a scheduler's warning that the job's time is up?)",
           signal.SIGUSR2: "SIGUSR2 (a scheduler's warning that the job's time is up?)",
           signal.SIGXCPU: "the CPU-time limit (ulimit -t) ran out (SIGXCPU)"}


def running_script(frame):
    """Whether frame lies under the script's own code (its module's frame, __main__, is on the stack);
    after the script's last line, exit callbacks run with no such frame."""
    while frame is not None:
        if frame.f_code.co_name == '<module>' and frame.f_globals.get('__name__') == '__main__':
            return True
        frame = frame.f_back
    return False


def stopped(signum, frame):
    if running_script(frame):  # a signal as the interpreter exits, its work done, changes nothing
        stop = Stopped(SIGNALS[signum])
        stop.signum = signum
        raise stop


def stop_again(unraisable):
    """sys.unraisablehook: a stop raised inside a finalizer (a __del__, matplotlib's clean-up of a figure)
    is dropped there by Python with an "Exception ignored" traceback, and the script would go on to exit 0
    as if never stopped: its signal is sent again, to stop the script where it runs next."""
    stop = unraisable.exc_value
    if isinstance(stop, KeyboardInterrupt):  # Ctrl-C, or a Stopped signal
        os.kill(os.getpid(), getattr(stop, 'signum', signal.SIGINT))
        return
    sys.__unraisablehook__(unraisable)


if os.path.dirname(os.path.abspath(getattr(sys.modules['__main__'], '__file__', '') or '.')) == \
        os.path.dirname(os.path.abspath(__file__)):  # a script of this repository, not a program importing it
    for _signum in SIGNALS:
        if signal.getsignal(_signum) == signal.SIG_DFL:  # nohup's ignored SIGHUP stays ignored
            signal.signal(_signum, stopped)
    sys.unraisablehook = stop_again
    # The last exit callback (registered first): the interpreter would next put back the signals' default
    # actions, and a limit's SIGXCPU after the work is done would kill the process without a word.
    atexit.register(lambda: [signal.signal(s, signal.SIG_IGN) for s in SIGNALS if callable(signal.getsignal(s))])


# What keeps the work of each script whose work is files, when its standard output fails; the others'
# work is what they print.
KEPT = {'train.py': "the run folder's log.jsonl keeps every row", 'fold.py': "its files are written as before",
        'prepare_tinystories.py': "its data folder is written as before",
        'prepare_owt.py': "its data folder is written as before", 'plot.py': "its figures are written as before",
        'gpu_check.py': "its report.md is written as before", 'reproduce.py': "its runs and results are written as before"}


class StdoutFailed(Exception):  # not an OSError, which a script takes for a failed file write
    """Standard output failed (a full device) under a script whose work is what it prints."""


class Printing:
    """sys.stdout of a script. When the stream fails (`| head` closed the pipe, or it is on a full device),
    a script whose work is files (KEPT) goes on printing nothing there, and one note on stderr says what
    keeps its work; any other script stops, quietly for a reader that left (`| head` has what it wanted),
    else with one sentence naming standard output, not the disk its files are on."""

    def __init__(self, stream, prog):
        self.stream, self.prog, self.kept, self.why, self.unshown = stream, prog, KEPT.get(prog), None, False

    def write(self, text):
        try:
            return self.guarded(self.stream.write, text) or len(text)
        except UnicodeEncodeError:  # PYTHONIOENCODING=ascii, or a C locale, and a path or a text beyond it
            encoding = self.stream.encoding
            if not self.unshown:
                self.unshown = True
                print(f"note: standard output's encoding, {encoding} (PYTHONIOENCODING or the locale), cannot show "
                      f"every character, so those print as '?': set PYTHONIOENCODING=utf-8 to see them",
                      file=sys.stderr, flush=True)
            return self.guarded(self.stream.write, text.encode(encoding, 'replace').decode(encoding)) or len(text)

    def flush(self):
        self.guarded(self.stream.flush)

    def guarded(self, call, *args):
        if self.why:
            return None
        try:
            return call(*args)
        except OSError as e:  # BrokenPipeError, ENOSPC: the stream, not the work, has failed
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.stream.fileno())  # its buffer's last flush too
            self.why = "closed" if isinstance(e, BrokenPipeError) else f"failed ({e.strerror or e})"
            if self.kept is None and isinstance(e, BrokenPipeError):
                raise
            if self.kept is None:
                raise StdoutFailed(f"{self.prog} stopped: its standard output {self.why}: print to a terminal, or "
                                   f"redirect it to a file on a disk with space") from None
            try:
                print(f"note: {self.prog}'s standard output {self.why}, so it goes on without printing: {self.kept}",
                      file=sys.stderr, flush=True)
            except OSError:  # stderr gone with it: the work still goes on
                pass
            return None

    def __getattr__(self, name):  # fileno, isatty, encoding, reconfigure, ...
        return getattr(self.stream, name)


def printing(prog):
    """sys.stdout as a Printing for prog, made once (the scripts' import of this module makes it). Started
    with standard output closed (`>&-`), where Python prints nothing without a word: a script whose work is
    what it prints stops with one sentence, one whose work is files says so once and goes on; either way
    /dev/null takes descriptor 1, which the next file opened would otherwise take."""
    if sys.stdout is None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != 1:
            os.dup2(devnull, 1)
            os.close(devnull)
        if KEPT.get(prog) is None:
            sys.exit(f"{prog}: its standard output is closed (>&-?), and what it prints is its work: print to a "
                     f"terminal, or redirect it to a file (> out.txt)")
        print(f"note: {prog}'s standard output is closed, so it goes on without printing: {KEPT[prog]}",
              file=sys.stderr, flush=True)
        sys.stdout = open(1, 'w', closefd=False)
    if not isinstance(sys.stdout, Printing):
        sys.stdout = Printing(sys.stdout, prog)
    return sys.stdout


if os.path.dirname(os.path.abspath(getattr(sys.modules['__main__'], '__file__', '') or '.')) == \
        os.path.dirname(os.path.abspath(__file__)):  # a script of this repository
    printing(os.path.basename(sys.modules['__main__'].__file__))
    if bad_thread_count():  # said before torch loads OpenMP, which would print its own complaint first
        sys.exit(bad_thread_count())


def run_as_module(doc, instead):
    """What a module (model.py, hf.py, tokens.py, this file) does when run as a script: --help prints
    its docstring; anything else says, in one sentence, which command to run instead (exit 2)."""
    if {'-h', '--help'} & set(sys.argv[1:]):
        print(doc.strip())
        raise SystemExit(0)
    print(instead, file=sys.stderr)
    raise SystemExit(2)


if __name__ == '__main__':
    run_as_module(__doc__, "configurator.py is the flag layer the scripts share, not a script: run "
                           "`python train.py --help` (or any script's --help) to see their flags")
