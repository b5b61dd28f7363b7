"""
Config overrides for train.py, in nanoGPT's style:

    python train.py config/taper_internal_512.py --batch_size=32 --compile

A config file is Python that assigns globals (it may read the defaults, e.g. to derive warmup_iters
from max_iters). --key=value overrides one value; a bare --flag sets it to True. Every key must be one
of train.py's defaults: a typo stops the run with the closest valid key, instead of being ignored.
"""

import ast
import difflib
import os
import traceback
import types


def configure_globals(namespace, argv):
    """A script's defaults are its plain-valued globals (between its rulers): apply argv to them in
    place and return the resolved config as a dict."""
    keys = [k for k, v in namespace.items()
            if not k.startswith('_') and isinstance(v, (bool, int, float, str, tuple, type(None)))]
    namespace.update(configure({k: namespace[k] for k in keys}, argv))
    return {k: namespace[k] for k in keys}


def configure(defaults, argv):
    """Apply config files and --key=value arguments, in order, to a dict of defaults."""
    config = dict(defaults)
    for arg in argv:
        if arg.startswith('--'):
            key, has_value, raw = arg[2:].partition('=')
            value = parse(raw, defaults.get(key)) if has_value else True
            config[key] = checked(key, value, defaults, f"on the command line ({arg})")
        else:
            config.update(read_file(arg, config, defaults))
    return config


def read_file(path, config, defaults):
    if not os.path.isfile(path):
        raise SystemExit(f"config file {path} not found (arguments that are not --key=value name "
                         f"config files)")
    namespace = dict(config)
    with open(path) as f:
        source = f.read()
    try:
        exec(compile(source, path, 'exec'), namespace)
    except SyntaxError as e:
        raise SystemExit(f"config file {path}, line {e.lineno}: {e.msg}; a config file is Python that "
                         f"assigns values, e.g. learning_rate = 3e-4") from None
    except Exception as e:  # it runs as Python: a NameError, a division by zero, ...
        line = next((f.lineno for f in reversed(traceback.extract_tb(e.__traceback__))
                     if f.filename == path), '?')
        raise SystemExit(f"config file {path}, line {line}: {type(e).__name__}: {e}") from None
    assigned = {}
    for key, value in namespace.items():
        if key.startswith('__') or isinstance(value, (types.ModuleType, types.FunctionType, type)):
            continue
        assigned[key] = checked(key, value, defaults, f"in {path}")
    return assigned


def parse(raw, default):
    """A string default takes the text as it is; anything else is read as a Python literal."""
    if isinstance(default, str):
        return raw
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def checked(key, value, defaults, where):
    if key not in defaults:
        close = difflib.get_close_matches(key, list(defaults), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise SystemExit(f"unknown config key '{key}' {where}{hint}")
    default = defaults[key]
    if default is None or value is None or type(value) is type(default):
        return value
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # --learning_rate=1 means 1.0
    if (isinstance(default, int) and not isinstance(default, bool) and isinstance(value, float)
            and value.is_integer()):
        return int(value)    # --max_iters=1e6 means 1000000
    raise SystemExit(f"config key '{key}' {where} must be of type {type(default).__name__}, "
                     f"not {value!r}")
