"""
Every mistake a user can make stops with one sentence that says what to do: a non-zero exit, at most
two lines on stderr, no traceback, and no file that existed before changed. One table, each row a bad
input run as a subprocess of the real script.

    python test_errors.py        # prints the table with each case's exit code and message
"""

import gzip
import hashlib
import json
import lzma
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from conftest import ScriptServer, SHARED, TINY, gpt2_tokenizer, run, session_server, word_tokenizer

T = [*TINY, '--data_dir={data}', '--out_dir={root}/fresh']           # a valid scratch run, plus one flaw
R = [*TINY, '--data_dir={data}', '--out_dir={root}/run', '--taper=none', '--aux_loss=none',
     '--init_from=resume']                                           # a valid resume, plus one flaw
OFFLINE = {'HF_HUB_OFFLINE': '1'}  # transformers' own no-network path, without minutes of retries
# Progress bars of work that succeeded before the mistake surfaced (datasets' loading, transformers'
# weight loading) are not part of the message.
QUIET = {'HF_DATASETS_DISABLE_PROGRESS_BARS': '1', 'HF_HUB_DISABLE_PROGRESS_BARS': '1'}
LONG = '/'.join(['x' * 200] * 21)  # 21 legal names of 200 bytes: a path past Linux's 4,096 bytes
OWT = ['--input_file={shared}/openwebtext/sample.jsonl', '--out_dir={root}/o7']  # valid, plus one flaw
GPT2_HF = ['--init_from={root}/hf', '--arch=gpt2', '--norm=layernorm', '--taper=none', '--n_head=2',
           '--n_embd=32', '--aux_loss=baroni']

LLAMA_HF = ['--arch=llama', '--norm=rmsnorm', '--taper=all', '--aux_loss=fixed', '--n_head=4', '--n_embd=64',
            '--mlp_hidden=96', '--tied_head=False']  # the tiny Llama's shape, but for n_kv_head

POLISH_L2 = 'Pewnego dnia ma\u0142a \u015bwinka sz\u0142a przez \u0142\u0105k\u0119 do \u017ar\u00f3d\u0142a.'  # ś, ą, ź
GERMAN = 'Das kleine M\u00e4dchen tr\u00e4umte von gro\u00dfen B\u00e4ren und sch\u00f6nen Gr\u00fc\u00dfen.'
CASES = [  # (case, script, arguments, a phrase of the message, environment)
    # configuration
    ('unknown config key', 'train.py', [*T, '--learing_rate=1e-3'], "did you mean 'learning_rate'", None),
    ('value of the wrong type', 'train.py', [*T, '--batch_size=eight'], 'batch_size=eight is not valid', None),
    ('missing config file', 'train.py', ['{root}/nofile.py'], 'not found', None),
    ('config file with a syntax error', 'train.py', ['{root}/syntax.py', *T], 'syntax.py, line 2', None),
    ('config file that raises', 'train.py', ['{root}/nameerror.py', *T], 'NameError', None),
    ('config file with a choice unquoted', 'train.py', ['{root}/bareword.py', *T],
     "internal is not defined: a text value is written in quotes in Python, `taper = 'internal'`", None),
    ('memory: config file with a path unquoted', 'memory.py', ['{root}/barepath.py'],
     "data is not defined: a text value is written in quotes in Python, `data_dir = 'data/ts512'`", None),
    ('config file with an unknown choice unquoted', 'train.py', ['{root}/bareother.py', *T],
     "and taper takes one of 'none', 'internal', 'all'", None),
    ("a config file that sweeps a flag in a loop", 'train.py', ['{root}/sweep.py', *T],
     'sets learning_rate in a loop, which leaves only its last value', None),
    ("a config file that adds to sys.argv", 'train.py', ['{root}/argv_cfg.py', *T],
     'changes sys.argv (--max_iters=20), which train.py read before it ran the file', None),
    ("a config file's relative data_dir, meant from the file's folder", 'train.py',
     ['{root}/cfgsub/relative.py', *TINY, '--out_dir={root}/fresh'], "a path read from the folder you run in", None),
    ("--mask_eot_targets on TinyStories data, which has no end-of-text token", 'train.py', [*T, '--mask_eot_targets'],
     "which has none (each story starts with BOS): drop --mask_eot_targets", None),
    ("a config file that defines train.py's get_lr", 'train.py', ['{root}/own_lr.py', *T],
     "defines get_lr, which is train.py's own function: a config file sets train.py's flags", None),
    ('batch_size 0', 'train.py', [*T, '--batch_size=0'], 'batch_size=0 must be at least 1', None),
    ('batch_size negative', 'train.py', [*T, '--batch_size=-4'], 'batch_size=-4 must be at least 1', None),
    ('eval_interval 0', 'train.py', [*T, '--eval_interval=0'], 'eval_interval=0 must be at least 1', None),
    ('log_interval 0', 'train.py', [*T, '--log_interval=0'], 'log_interval=0 must be at least 1', None),
    ('eval_iters 0', 'train.py', [*T, '--eval_iters=0'], 'eval_iters=0 must be at least 1', None),
    ('gradient_accumulation_steps 0', 'train.py', [*T, '--gradient_accumulation_steps=0'],
     'gradient_accumulation_steps=0 must be at least 1', None),
    ('max_iters negative', 'train.py', [*T, '--max_iters=-1'], 'max_iters=-1 must be at least 1', None),
    ('learning_rate 0', 'train.py', [*T, '--learning_rate=0'], 'learning_rate=0.0 must be above 0', None),
    ('min_lr above learning_rate', 'train.py', [*T, '--min_lr=1'], 'must not exceed learning_rate', None),
    ('warmup as long as the decay', 'train.py', [*T, '--warmup_iters=40', '--max_iters=50'], 'must be below lr_decay_iters',
     None),
    ('warmup longer than the run', 'train.py', [*T, '--warmup_iters=100', '--lr_decay_iters=200'],
     'would never reach its peak', None),
    ('beta2 of 1', 'train.py', [*T, '--beta2=1'], 'beta2=1.0 must lie in [0, 1)', None),
    ('ema_rate 0', 'train.py', [*T, '--ema_rate=0'], 'ema_rate=0.0 must lie in (0, 1]', None),
    ('width not divisible by heads', 'train.py', [*T, '--n_embd=66'], 'not divisible by n_head=4', None),
    ('odd head size with RoPE', 'train.py', [*T, '--n_embd=36'], 'is odd: RoPE', None),
    ('unknown arch', 'train.py', [*T, '--arch=bert'], "arch='bert' is not one of", None),
    ('unknown taper', 'train.py', [*T, '--taper=half'], "taper='half' is not one of", None),
    ('unknown aux loss', 'train.py', [*T, '--aux_loss=l2'], "aux_loss='l2' is not one of", None),
    ('DyT with a taper', 'train.py', [*T, '--norm=dyt'],
     "norm='dyt' leaves no norm to taper or remove: use taper='none' and fakeln=False with it: change the flags", None),
    ("a flag that makes a config file's model none (--arch=gpt2 over a Llama's config)", 'train.py',
     ['config/finetune_smollm2_135m_alltaper.py', '--n_layer=2', '--n_head=3', '--n_embd=96', '--arch=gpt2', '--out_dir={root}/arch_flag'],
     'finetune_smollm2_135m_alltaper.py on its own is a model, and --arch=gpt2 makes it none: drop that flag', None),
    ("memory: a flag that makes a config file's model none", 'memory.py',
     ['config/finetune_gpt2_s_fakeln.py', '--taper=internal', '--nproc', '2'],
     'finetune_gpt2_s_fakeln.py on its own is a model, and --taper=internal makes it none: drop that flag', None),
    ("a config file whose own settings are no model", 'train.py', ['{root}/gpt2_gqa.py', *T],
     "(its MLP is 4 n_embd wide) stay at their defaults: fix ", None),
    ('FakeLN on RMSNorm', 'train.py', [*T, '--fakeln', '--taper=none'], 'fakeln replaces LayerNorms', None),
    ('dtype float16', 'train.py', [*T, '--dtype=float16'], "dtype='float16' is not one of", None),
    ('unknown device', 'train.py', [*T, '--device=tpu'], "device='tpu' is not supported", None),
    ('CUDA on a machine without it', 'train.py', [*T, '--device=cuda'], 'CUDA is not available', None),
    ('taper_start after taper_end', 'train.py', [*T, '--taper_start=30', '--taper_end=20'],
     'taper_start < taper_end <= max_iters', None),
    ('taper never starts', 'train.py', [*T, '--taper_start=50', '--taper_end=60'],
     'taper_start=50, taper_end=60, max_iters=40', None),
    ('taper ends after the run', 'train.py', [*T, '--taper_end=41'], 'taper_end=41, max_iters=40', None),
    ('s_tgt frozen after the run', 'train.py', [*T, '--taper=none', '--taper_start=40'],
     'freezes s_tgt at taper_start=40', None),
    ('stop_iter past max_iters', 'train.py', [*T, '--stop_iter=41'],
     'stop_iter=41 lies past max_iters=40, where the run ends anyway: lower --stop_iter, or raise --max_iters', None),
    ('fsdp without torchrun', 'train.py', [*T, '--fsdp'], 'launch with torchrun', None),
    # each rule of the flag layer (configurator.py), through train.py
    ('a flag without its value', 'train.py', [*T, '--batch_size'], '--batch_size needs a value', None),
    ('a boolean that is not one', 'train.py', [*T, '--compile=maybe'], 'compile=maybe is not valid', None),
    ('a number that is not finite', 'train.py', [*T, '--learning_rate=nan'], 'learning_rate=nan is not valid', None),
    ('an integer given a fraction', 'train.py', [*T, '--n_layer=2.5'], 'n_layer=2.5 is not valid', None),
    ('a misspelt choice', 'train.py', [*T, '--taper=internl'], "did you mean 'internal'", None),
    ('the upper end of a range', 'train.py', [*T, '--dropout=1'], 'dropout=1.0 must lie in [0, 1)', None),
    ('a list of the wrong length', 'train.py', [*T, '--fakeln_start=1,2'], 'fakeln_start has 2 items, not 4', None),
    ('a list holding text', 'train.py', [*T, '--fakeln_gap=1,x,2'], "holds 'x'", None),
    ('None for a flag that needs a value', 'train.py', [*T, '--seed=None'], 'seed=None is not allowed', None),
    ('a config file assigning the wrong type', 'train.py', ['{root}/badtype.py', *T], 'badtype.py: batch_size=', None),
    ('a config file assigning an unknown key', 'train.py', ['{root}/badkey.py', *T],
     "unknown flag 'learning_rat' in", None),
    ('a config file assigning out of range', 'train.py', ['{root}/badrange.py', *T], 'must be at least 1', None),
    # shapes, sizes and the environment
    ('key/value heads that do not divide the heads', 'train.py', [*T, '--n_kv_head=3'],
     'not a multiple of n_kv_head=3', None),
    ('a negative MLP width', 'train.py', [*T, '--mlp_hidden=-5'], 'mlp_hidden=-5 must not be negative', None),
    ('a GPT-2 given another MLP width', 'train.py', [*T, '--arch=gpt2', '--norm=layernorm', '--taper=none',
                                                     '--mlp_hidden=48'], 'mlp_hidden (its MLP is 4 n_embd wide)', None),
    ('a model too large for the machine', 'train.py', [*T, '--n_embd=65536', '--n_head=64', '--n_layer=64'],
     "memory plan needs", None),
    ('an evaluation too large for the machine', 'train.py', [*T, '--eval_iters=1000000000000'],
     'lower eval_iters', None),
    ('a stale RANK without torchrun', 'train.py', T, 'launch with torchrun', {'RANK': '1'}),
    ('a stale WORLD_SIZE without torchrun', 'train.py', T, 'unset WORLD_SIZE', {'WORLD_SIZE': '2'}),
    ('a device that is not one', 'train.py', [*T, '--device=cuda:x'], "device='cuda:x' is not supported", None),
    ('a device in capitals', 'train.py', [*T, '--device=CPU'], "device='CPU' is not supported: use device='cpu'", None),
    ("the CPU as torch's cpu:0", 'sample.py', ['--out_dir={root}/run', '--device=cpu:0'],
     "device='cpu:0' is not supported: use device='cpu'", None),
    ('fold: --export_hf naming a file', 'fold.py', ['--out_dir={root}/trun', '--export_hf={root}/blank.txt'],
     'blank.txt is a file, not a folder: name a new folder to write into', None),
    ('init_from in capitals', 'train.py', [*T, '--init_from=Resume'], 'did you mean --init_from=resume', None),
    ('the taper starting at step 0', 'train.py', [*T, '--taper_start=0', '--warmup_iters=0'],
     'leaves no step at g = 1', None),
    ('wandb without the package', 'train.py', [*T, '--wandb_log'], 'pip install wandb',
     {'PYTHONPATH': '{root}/no_wandb'}),  # a wandb that fails to import, installed or not
    ('a config file that is not Python', 'train.py', ['{root}/cfg.json', *T], 'is not a config file', None),
    ("a stopped run's config.json as a config file", 'train.py', ['{root}/half/config.json', *T],
     "is that run's record of its settings: continue the run with --init_from=resume", None),
    ("a finished run's config.json as a config file", 'train.py', ['{root}/run/config.json', *T],
     "/run has finished (iter 8 of max_iters=8): train it further with --init_from=resume --out_dir=", None),
    ("a finished run's checkpoint as a config file", 'train.py', ['{root}/trun/ckpt.pt', *T],
     "/trun has finished (iter 40 of max_iters=40): train it further with --init_from=resume", None),
    ("a stopped run's checkpoint as a config file", 'train.py', ['{root}/half/ckpt.pt', *T],
     "; a run is continued with --init_from=resume --out_dir=", None),
    ("sample: a run's config.json as a config file", 'sample.py', ['{root}/run/config.json'],
     "a run's checkpoint is read with --out_dir=", None),
    ('init_from misspelt', 'train.py', [*T, '--init_from=resum'], 'did you mean --init_from=resume', None),
    ('overwrite and resume at once', 'train.py', [*R, '--overwrite'], 'choose one', None),
    ('sample: more new tokens than memory holds', 'sample.py', ['--out_dir={root}/run', '--device=cpu',
                                                                 '--max_new_tokens=1e13'],
     'for their token ids alone, more than this machine', None),
    ('overwrite and resume at once, on a finished run', 'train.py',
     [*R, '--overwrite', '--max_iters=8', '--warmup_iters=2', '--lr_decay_iters=8'], 'choose one', None),
    ('data_dir that is a file', 'train.py', [*T, '--data_dir={data}/train.bin'], 'is a file: name the folder', None),
    ('prepare_tinystories: validation text that is also training text', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--val_file={root}/small.txt', '--out_dir={root}/p11'], 'is also an --input_file', None),
    ('fold: non-finite weights', 'fold.py', ['--out_dir={root}/nanrun'], 'holds non-finite weights', None),
    ('fold: an output folder that cannot be written', 'fold.py', ['--out_dir={root}/trun', '--out=/proc/x.pt'],
     'no file can be created in /proc', None),
    ('diagnose: a plot that cannot be written', 'diagnose.py', ['--out_dir={root}/run', '--plot=/proc/x.png'],
     'no file can be created in /proc', None),
    # paths
    ('out_dir that is a file', 'train.py', [*T, '--out_dir={root}/blank.txt'], 'is a file, not a folder', None),
    ('out_dir inside a file', 'train.py', [*T, '--out_dir={root}/blank.txt/run'], 'which is a file', None),
    ('out_dir empty', 'train.py', [*T, '--out_dir='], 'out_dir is empty', None),
    ('out_dir not writable', 'train.py', [*T, '--out_dir=/proc/tapernorm-run'], 'cannot be written', None),
    ('FakeLN removals after the run', 'train.py', [*T, *GPT2_HF, '--init_from={root}/hf50k', '--data_dir={root}/owt',
                                                   '--vocab_size=50257',
                                                   '--fakeln', '--max_iters=10', '--lr_decay_iters=10'],
     'FakeLN removals run from step 20', QUIET),
    ('FakeLN removals given in reverse', 'train.py', [*T, *GPT2_HF, '--init_from={root}/hf50k', '--data_dir={root}/owt',
                                                      '--vocab_size=50257', '--fakeln', '--fakeln_start=13,9,6,2'],
     "removes the LayerNorms out of Baroni et al.'s order (ln_2, then ln_1 on the Q/K path, ln_1 on the V path, ln_f "
     "last), which its four steps give in turn: pass them in that order, e.g. --fakeln_start=2,6,9,13", QUIET),
    # data
    ('missing data folder', 'train.py', [*T, '--data_dir={root}/nodata'], 'python prepare_tinystories.py', None),
    ('empty train.bin', 'train.py', [*T, '--data_dir={root}/empty'], 'holds 0 bytes', None),
    ('odd-length train.bin', 'train.py', [*T, '--data_dir={root}/odd'], 'not a stream of uint16 tokens', None),
    ('uint32 train.bin with half a token', 'train.py', [*T, '--data_dir={root}/odd32'],
     'not a stream of uint32 tokens', None),
    ('meta.json naming an unknown dtype', 'train.py', [*T, '--data_dir={root}/baddtype'], "names dtype 'int8'", None),
    ('garbage train.bin', 'train.py', [*T, '--data_dir={root}/garbage'], "beyond the model's vocab_size=512", None),
    ('vocab_size below the data', 'train.py', [*T, '--vocab_size=100'], 'set --vocab_size=512', None),
    ('block_size beyond train.bin', 'train.py', [*T, '--block_size=1000000'], 'too few for one window', None),
    ('block_size beyond val.bin only', 'train.py', [*T, '--data_dir={root}/shortval', '--block_size=128'],
     'val.bin holds 100 tokens', None),
    ('meta.json not JSON', 'train.py', [*T, '--data_dir={root}/badmeta'], 'meta.json is not valid JSON', None),
    ('a data folder pasted in typographic quotes', 'train.py', [*T, '--data_dir=\u201c{data}\u201d'],
     'is wrapped in typographic quotes (pasted from a document?): type it without them, --data_dir=/', None),
    ('a data folder named by a shell variable left in single quotes', 'train.py', [*T, '--data_dir=$DATA/tiny'],
     'holds $DATA, a shell variable the shell did not expand', None),
    ('prepare: a Windows path as the output folder', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--out_dir=C:\\data\\tiny'], 'is a Windows path', None),
    ('plot: the repository itself as the output folder', 'plot.py', ['{root}/run', '--out_dir=.'],
     "is the repository's own folder", None),
    ('a run into the folder that holds the runs', 'train.py', [*TINY, '--data_dir={data}', '--out_dir={root}'],
     "holds the folders of other runs", None),
    ('a run into the repository itself', 'train.py', [*TINY, '--data_dir={data}', '--out_dir=./'],
     "is the repository's own folder", None),
    ('spaces around the = of a flag', 'train.py', [*T, '--max_iters', '=', '8'], "write the value after '=' without spaces",
     None),
    ('sample: a zero-width space pasted after the run folder', 'sample.py', ['--out_dir={root}/run\u200b', '--device=cpu'],
     'holds an invisible character', None),
    ('two flags joined by a non-breaking space from a web page', 'train.py', [*T, '--max_iters=8\u00a0--eval_iters=2'],
     'holds a non-breaking space (pasted from a web page?)', None),
    ('an output folder that kept its quotes', 'train.py', [*T, '--out_dir="{root}/quoted"'], 'keeps the quotes around it', None),
    ('a data folder given as a file:// address', 'train.py', [*T, '--data_dir=file://{data}'],
     'is a file:// address: give the path itself, --data_dir=/', None),
    ('prepare: an input file pasted in single typographic quotes', 'prepare_tinystories.py',
     ['--input_file=\u2018{root}/small.txt\u2019', '--out_dir={root}/qprep'], 'is wrapped in typographic quotes', None),
    ("sample: an HF model's hub page as --init_from", 'sample.py', ['--init_from=https://huggingface.co/gpt2/'],
     "or the hub model's name, --init_from=gpt2", None),
    ('evaluate: a data folder as a web address', 'evaluate.py', ['--init_from={root}/hf', '--data_dir=https://example.org/owt'],
     'download it first', None),
    ('plot: a config.json cut short, and no checkpoint', 'plot.py', ['{root}/cutcfg_nockpt', '--out_dir={root}/plcut'],
     "put the run's own config.json back", None),
    # out_dir and checkpoints
    ('scratch run over a run', 'train.py', [*T, '--out_dir={root}/run'], '--init_from=resume, or pass --overwrite', None),
    ('eval-only scratch run over a run', 'train.py', [*T, '--out_dir={root}/run', '--eval_only'],
     '--init_from=resume, or pass --overwrite', None),
    ('resume without a checkpoint', 'train.py', [*T, '--init_from=resume'],
     'fresh/ckpt.pt: pass --out_dir=<the run', None),
    # what the folder resumed from is, and where its run or model goes instead
    ('resume from a data folder', 'train.py', [*T, '--init_from=resume', '--out_dir={data}'],
     "is a data folder (it holds train.bin or meta.json), not a run: pass the run's folder", None),
    ('resume from an HF model folder', 'train.py', [*T, '--init_from=resume', '--out_dir={root}/hf'],
     'or fine-tune this model with --init_from=', None),
    ('diagnose: an HF export folder as the run', 'diagnose.py', ['--out_dir={root}/ownexport'],
     '/trun/ckpt.pt: read its run with --out_dir=', None),
    ('diagnose: an HF export folder whose run is gone', 'diagnose.py', ['--out_dir={root}/otherexport'],
     "wrote from /elsewhere/run/ckpt.pt (no longer there): pass a run's folder", None),
    ('sample: an HF model folder as the run folder', 'sample.py', ['--out_dir={root}/hf', '--device=cpu'],
     "is an HF model, not a run's folder: read it with --init_from=", None),
    ('bench: an HF export folder\'s ckpt.pt', 'bench.py', ['--ckpt={root}/ownexport/ckpt.pt', '--device=cpu'],
     '/trun/ckpt.pt: read its run with --ckpt=', None),
    ("bench: a run's folder as the checkpoint", 'bench.py', ['--ckpt={root}/trun', '--device=cpu'],
     'trun is a folder: name the checkpoint file in it, --ckpt=', None),
    ("fold: a run's folder as --ckpt", 'fold.py', ['--out_dir={root}/trun', '--ckpt={root}/trun'],
     "/trun names a run's folder, and --ckpt takes a checkpoint file in --out_dir: pass --out_dir=", None),
    ("sample: a run's folder as --ckpt, inside --out_dir", 'sample.py', ['--out_dir={root}', '--ckpt=trun', '--device=cpu'],
     "cannot sample: --ckpt=trun names a run's folder, and --ckpt takes a checkpoint file in --out_dir: pass "
     "--out_dir=", None),
    ("diagnose: a folder holding a folded checkpoint alone as --ckpt", 'diagnose.py',
     ['--out_dir={root}/run', '--ckpt={root}/foldedonly'], "/foldedonly --ckpt=ckpt_folded.pt", None),
    ("evaluate: a run's folder as --ckpt", 'evaluate.py', ['--out_dir={root}/run', '--ckpt={root}/trun', '--device=cpu'],
     "and drop --ckpt (its ckpt.pt is read)", None),
    ('fold: an HF weight file as the checkpoint', 'fold.py', ['--out_dir={root}/hf', '--ckpt=model.safetensors'],
     'name the ckpt.pt that train.py or fold.py wrote', None),
    # text inputs that arrive compressed: named by their format, whatever the file is called
    ('memory: an HF folder whose weights hold more layers than its config.json', 'memory.py',
     ['--init_from={root}/hf_fewer'], "hf_fewer's weights do not fit its config.json", None),
    ('memory: a config file of another shape than the HF model', 'memory.py',
     ['config/finetune_gpt2_s_alltaper.py', '--init_from={root}/hf'], 'but config/finetune_gpt2_s_alltaper.py sets', None),
    ('memory: a table row of another shape than the HF model', 'memory.py',
     ['--summary', 'config/finetune_gpt2_s_alltaper.py', '--init_from={root}/hf'], "a fine-tune's shape is the model's",
     None),
    ("train's memory plan of a config of another shape than the HF model", 'train.py',
     ['config/finetune_gpt2_s_alltaper.py', '--init_from={root}/hf', '--block_size=64', '--memory_plan'],
     "the config's shape must be the model's", None),
    ('memory: an HF model and a shape flag it contradicts', 'memory.py', ['--init_from={root}/hf', '--n_layer=9'],
     "drop --n_layer (a fine-tune's shape is the model's)", None),
    ('memory: a model name that is nowhere', 'memory.py', ['--init_from=no_such_model'],
     'cannot plan a fine-tune of no_such_model', OFFLINE),
    ('prepare_tinystories: token files without their tokenizer', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--out_dir={root}/orphanbin', '--vocab_size=512'],
     'orphanbin/train.bin was not tokenized with', None),
    ('prepare_tinystories: gzip text', 'prepare_tinystories.py', ['--input_file={root}/stories.txt.gz',
     '--out_dir={root}/p20'], 'is gzip-compressed: unpack it first (`gunzip -c', None),
    ('prepare_tinystories: xz under a .txt name', 'prepare_tinystories.py', ['--input_file={root}/small.txt',
     '--val_file={root}/stories.txt', '--out_dir={root}/p21'], '/stories.txt is xz-compressed', None),
    ('prepare_owt: bzip2 jsonl', 'prepare_owt.py', ['--input_file={root}/docs.jsonl.bz2', '--out_dir={root}/o20'],
     'is bzip2-compressed: unpack it first (`bunzip2 -c', None),
    ('reproduce: gzip text', 'reproduce.py', ['--input_file={root}/small.txt,{root}/stories.txt.gz'],
     'stories.txt.gz is gzip-compressed', None),
    ('resume with another width', 'train.py', [*R, '--n_embd=32'], 'has n_embd=64, and --n_embd=32 would change', None),
    ('resume with another norm, which the rules of a new run would judge first', 'train.py', [*R, '--norm=dyt'],
     "has norm='rmsnorm', and --norm='dyt' would change the model it continues: a resume keeps its run's model; "
     "drop --norm", None),
    ('resume of a Baseline-kind run into a FakeLN one', 'train.py', [*R, '--fakeln'], "drop --fakeln", None),
    ('resume with another setting', 'train.py', [*R, '--taper=all'], "has taper='none', and --taper='all' would change", None),
    ('resume a file that is no checkpoint', 'train.py', [*R, '--out_dir={root}/junk'], 'could not be read', None),
    ('resume over a broken log line', 'train.py', [*R, '--out_dir={root}/badlog'], 'line 2, is not JSON', None),
    ('resume over a log row without its step', 'train.py', [*R, '--out_dir={root}/noiter'], "line 2, has no 'iter'", None),
    ('resume that would train nothing', 'train.py', [*R, '--max_iters=8', '--lr_decay_iters=8', '--warmup_iters=2'],
     'leaves nothing to train', None),
    ('a finished run resumed after raising max_iters in its config.json', 'train.py',
     ['--init_from=resume', '--out_dir={root}/editedcfg'],
     "leaves nothing to train (config.json's max_iters=12 is not read: a resume takes the checkpoint's config, and a "
     "flag changes it: --max_iters=12)", None),
    ('stop_iter at the checkpoint', 'train.py', [*R, '--stop_iter=8'], 'stop_iter=8 leaves nothing to train', None),
    ('scratch run over a log without a checkpoint', 'train.py', [*T, '--out_dir={root}/logonly'],
     'left no checkpoint', None),
    ('meta.json with a vocab_size in words', 'train.py', [*T, '--data_dir={root}/strmeta'], 'not a positive whole number', None),
    ('meta.json without a vocab_size, and vocab_size below its tokenizer', 'train.py',
     [*T, '--data_dir={root}/novocab', '--vocab_size=300'], 'has a vocabulary of 512 tokens', None),
    ('HF name without network', 'train.py', [*T, *GPT2_HF, '--init_from=gpt2'], 'could not download gpt2', OFFLINE),
    ('HF folder that does not exist', 'train.py', [*T, *GPT2_HF, '--init_from={root}/no_model'], 'no folder at', None),
    ('prepare_owt: a model folder holding another model\'s tokenizer', 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl', '--tokenizer={root}/llama_tok1000', '--out_dir={root}/o_tok',
      '--skip_pile'], "tokenizer has 1000 ids, but the model's embedding has 512", QUIET),
    ('sample: an HF Llama whose RoPE base is 0', 'sample.py', ['--init_from={root}/llama_theta0', '--device=cpu'],
     "config.json gives rope_theta=0, which must be positive", None),
    ('evaluate: an HF Llama whose eps is negative', 'evaluate.py', ['--init_from={root}/llama_negeps', '--device=cpu',
                                                                   '--data_dir={root}/owt'],
     "config.json gives rms_norm_eps=-1e-06, which must be at least 0", None),
    ('HF Llama whose heads do not group', 'train.py', [*T, *LLAMA_HF, '--init_from={root}/llama_kv3'],
     "llama_kv3's config.json gives a model this repository refuses (n_head=4 is not a multiple of n_kv_head=3", None),
    ('HF Llama folder holding a GPT-2\'s weights', 'train.py', [*T, *LLAMA_HF, '--n_kv_head=2',
     '--init_from={root}/llama_mixed'], "llama_mixed's weights do not fit its config.json", None),
    ('sample: a quantized HF model', 'sample.py', ['--init_from={root}/llama_gptq', '--device=cpu'],
     'holds a gptq-quantized model', None),
    ('memory: a quantized HF model', 'memory.py', ['--init_from={root}/llama_gptq'], 'holds a gptq-quantized model', None),
    ('memory: an HF folder missing one of its weight shards', 'memory.py', ['--init_from={root}/llama_shards'],
     'weight files its model.safetensors.index.json names (a download cut short?)', None),
    ('fine-tune an HF folder missing one of its weight shards', 'train.py', [*T, *LLAMA_HF, '--init_from={root}/llama_shards'],
     'weight files its model.safetensors.index.json names (a download cut short?)', None),
    ('HF Llama with a GELU MLP', 'train.py', [*T, *LLAMA_HF, '--init_from={root}/llama_gelu'],
     "sets hidden_act='gelu', which this model cannot compute", None),
    ('HF Llama unlike the config', 'train.py', [*T, *LLAMA_HF, '--init_from={root}/llama'],
     'has n_kv_head=2 but the config says n_kv_head=0: set --n_kv_head=2', None),
    ("a Llama fine-tune's config on an HF GPT-2 of a shorter context: the other model said first", 'train.py',
     ['config/finetune_smollm2_135m_alltaper.py', '--init_from={root}/hf', '--memory_plan'],
     "--block_size=64 (the config's shape must be the model's), or start from a config written for gpt2 models", None),
    ('two shipped configs that are each a model, stacked into none', 'train.py',
     ['config/finetune_gpt2_s_fakeln.py', 'config/taper_internal_64.py', '--memory_plan'],
     'each make a model on their own, and stacked (the last file to set a value decides it) they make none: pass one',
     None),
    ("a config file of one's own on a shipped one, stacked into no model", 'train.py',
     ['config/finetune_gpt2_s_fakeln.py', '{root}/taper_on.py', '--memory_plan'],
     "it needs norm='layernorm' and taper='none': fix /", None),
    ('HF folder without config.json', 'train.py', [*T, *GPT2_HF, '--init_from={root}/emptydir'],
     'not a folder written by save_pretrained', None),
    # sample.py
    ('sample: negative temperature', 'sample.py', ['--out_dir={root}/run', '--temperature=-1'],
     'temperature=-1.0 must not be negative', None),
    ('sample: top_k 0', 'sample.py', ['--out_dir={root}/run', '--top_k=0'], 'top_k=0 must be at least 1', None),
    ('sample: no samples', 'sample.py', ['--out_dir={root}/run', '--num_samples=0'], 'must be at least 1', None),
    ('sample: missing prompt file', 'sample.py', ['--out_dir={root}/run', '--start=FILE:{root}/nope.txt'],
     'no prompt file at', None),
    ('sample: no checkpoint', 'sample.py', ['--out_dir={root}/fresh'], 'cannot sample: no checkpoint', None),
    ('sample: HF name without network', 'sample.py', ['--init_from=gpt2', '--device=cpu'],
     'could not download gpt2', OFFLINE),
    ('sample: unknown key', 'sample.py', ['--temprature=1'], "did you mean 'temperature'", None),
    # prepare_tinystories.py
    ('prepare_tinystories: whitespace-only text', 'prepare_tinystories.py',
     ['--input_file={root}/blank.txt', '--out_dir={root}/p1'], 'holds only whitespace', None),
    ('prepare_tinystories: binary file', 'prepare_tinystories.py',
     ['--input_file={root}/binary.txt', '--out_dir={root}/p2'], 'holds a NUL byte on line 1', None),
    ('prepare_tinystories: Latin-1 text', 'prepare_tinystories.py',
     ['--input_file={root}/latin1.txt', '--out_dir={root}/p12'], 'is not UTF-8 text (line 4 holds the byte 0xe9)',
     None),
    ('prepare_tinystories: UTF-16 validation text', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--val_file={root}/utf16.txt', '--out_dir={root}/p13'],
     'is UTF-16 text: convert it', None),
    ('prepare_owt: Latin-1 jsonl', 'prepare_owt.py', ['--input_file={root}/latin1.jsonl', '--skip_pile',
                                                       '--out_dir={root}/o12'],
     'latin1.jsonl is not UTF-8 text (line 2', None),
    ('prepare_owt: a Pile file cut inside a character', 'prepare_owt.py',
     [*OWT, '--pile_file={root}/cut_utf8.jsonl'], 'ends inside a UTF-8 character', None),
    ('reproduce: Latin-1 text', 'reproduce.py', ['--input_file={root}/latin1.txt', '--out_root={root}/r12'],
     'is not UTF-8 text', None),
    ('prepare_tinystories: missing file', 'prepare_tinystories.py',
     ['--input_file={root}/nope.txt', '--out_dir={root}/p3'], 'nope.txt: no such file', None),
    ('prepare_tinystories: hub without network', 'prepare_tinystories.py', ['--out_dir={root}/p5'],
     'Could not download roneneldan/TinyStories', OFFLINE),
    ('prepare_tinystories: vocab beyond uint16', 'prepare_tinystories.py', ['--vocab_size=70000'],
     'vocab_size=70000 must lie in [260, 65535]', None),
    ('prepare_tinystories: a vocabulary learned from one story', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--vocab_docs=1', '--out_dir={root}/p14'],
     'the 1 story it learns from (--vocab_docs=1) holds too little text', None),
    ('prepare_tinystories: --max_stories leaves too little text for the vocabulary', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--max_stories=3', '--vocab_size=2048', '--out_dir={root}/p18'],
     'the 3 stories it learns from (--max_stories=3) hold too little text for more than', None),
    ('prepare_tinystories: vocab too small', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--vocab_size=260', '--out_dir={root}/p4'],
     'SentencePiece could not train', None),  # datasets' progress lines from loading the text are not printed
    # prepare_owt.py
    ('prepare_owt: malformed jsonl line', 'prepare_owt.py', ['--input_file={root}/bad_line.jsonl',
                                                             '--out_dir={root}/o1'], 'line 2, is not valid JSON', None),
    ('prepare_owt: jsonl without text', 'prepare_owt.py', ['--input_file={root}/no_text.jsonl',
                                                           '--out_dir={root}/o2'], "line 1, has no 'text' field", None),
    ('prepare_owt: missing input', 'prepare_owt.py', ['--input_file={root}/nope.jsonl', '--out_dir={root}/o3'],
     'no such file', None),
    ('prepare_owt: malformed Pile line', 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl', '--pile_file={root}/bad_line.jsonl',
      '--out_dir={root}/o4'], 'bad_line.jsonl, line 2', None),
    ('prepare_owt: hub without network', 'prepare_owt.py', ['--skip_pile', '--out_dir={root}/o6'],
     'Could not download openwebtext', OFFLINE),
    ('prepare_owt: val_fraction 2', 'prepare_owt.py', ['--val_fraction=2', '--out_dir={root}/o5'],
     'val_fraction=2.0 must lie in (0, 1)', None),
    ('prepare_owt: missing --tokenizer folder', 'prepare_owt.py', [*OWT, '--tokenizer={root}/no_tokenizer'],
     'no folder at', None),
    ('prepare_owt: --tokenizer folder without a tokenizer', 'prepare_owt.py', [*OWT, '--tokenizer={root}/emptydir'],
     'not a tokenizer folder written by save_pretrained', None),
    ('prepare_owt: --tokenizer hub name without network', 'prepare_owt.py',
     [*OWT, '--tokenizer=HuggingFaceTB/SmolLM2-135M'], 'could not download HuggingFaceTB/SmolLM2-135M', OFFLINE),
    ('prepare_owt: tokenizer without EOS', 'prepare_owt.py', [*OWT, '--tokenizer={root}/no_eos'],
     'has no end-of-sequence token', None),
    ('prepare_tinystories: another vocab into a prepared folder', 'prepare_tinystories.py',
     ['--input_file={shared}/tinystories/train_sample.txt', '--val_file={shared}/tinystories/valid_sample.txt',
      '--vocab_size=1024', '--out_dir={data}'], 'already holds a 512-piece vocabulary, not --vocab_size=1024', None),
    ('prepare_tinystories: other text into a prepared folder', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--vocab_size=512', '--out_dir={data}'], 'already holds data prepared from', None),
    ('prepare_tinystories: a stray comma in input_file', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt,', '--out_dir={root}/p9'], 'holds an empty item (a stray comma?)', None),
    ('prepare_tinystories: one story, none to hold out', 'prepare_tinystories.py',
     ['--input_file={root}/one_story.txt', '--out_dir={root}/p10'], 'reads as one story, and holding some out', QUIET),
    ('prepare_owt: pile_file with skip_pile', 'prepare_owt.py', [*OWT, '--skip_pile', '--pile_file={root}/bad_line.jsonl'],
     '--pile_file would be unused', None),
    ('prepare_owt: one file as input and Pile', 'prepare_owt.py', [*OWT, '--pile_file={shared}/openwebtext/sample.jsonl'],
     'name the same file', None),
    ('prepare_owt: Pile ids as text', 'prepare_owt.py', [*OWT, '--pile_file={root}/pile_text.jsonl'],
     "field 'input_ids' is not a list of token ids", None),
    ('prepare_owt: Pile id beyond GPT-2', 'prepare_owt.py', [*OWT, '--pile_file={root}/pile_big.jsonl'],
     "holds token id 70000, beyond GPT-2's", None),
    ('prepare_owt: other tokens into a prepared folder', 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl', '--tokenizer={root}/words', '--out_dir={root}/owt'],
     "already holds data in gpt2's tokens", None),
    # plot.py, reproduce.py
    ('plot: figures into a data folder', 'plot.py', ['{root}/run', '--out_dir={data}'], 'is a data folder', None),
    ('reproduce: runs into a data folder', 'reproduce.py', ['--out_root={data}'], 'is a data folder', None),
    ('train: an empty init_from', 'train.py', [*T, '--init_from='], 'init_from is empty', None),
    ('sample: an empty init_from', 'sample.py', ['--init_from=', '--device=cpu'], 'init_from is empty', None),
    ('sample: init_from=Resume', 'sample.py', ['--init_from=Resume', '--out_dir={root}/run', '--device=cpu'],
     'did you mean --init_from=resume', None),
    ('bench: init_from=resume', 'bench.py', ['--init_from=resume', '--device=cpu', '--repeats=1'],
     'bench.py has no --init_from=resume', None),
    ('train: a data_dir that is a symbolic-link loop', 'train.py', [*T[:-2], '--data_dir={root}/loopA',
     '--out_dir={root}/fresh'], 'broken symbolic link', None),
    ('memory: a run folder as init_from', 'memory.py', ['--init_from={root}/trun'], 'is a run of this repository', None),
    ('prepare_owt: into another program\'s folder', 'prepare_owt.py', ['--input_file={shared}/openwebtext/sample.jsonl',
     '--out_dir={root}/hf', '--skip_pile'], 'does not write', None),
    ('prepare_tinystories: into another program\'s folder', 'prepare_tinystories.py', ['--input_file={root}/small.txt',
     '--out_dir={root}/hf'], 'does not write', None),
    ('a LOCAL_RANK beyond WORLD_SIZE', 'train.py', T, 'launch with torchrun',
     {'RANK': '0', 'WORLD_SIZE': '1', 'LOCAL_RANK': '5', 'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': '29512'}),
    ('a MASTER_ADDR that does not resolve', 'train.py', T, 'does not resolve',
     {'RANK': '0', 'WORLD_SIZE': '1', 'LOCAL_RANK': '0', 'MASTER_ADDR': 'no.such.host.invalid', 'MASTER_PORT': '29511'}),
    ('plot: a folder of runs (a reproduction\'s out_root) as a run', 'plot.py', ['{root}', '--out_dir={root}/figs'],
     'is no run itself but holds', None),
    ('plot: a run without log.jsonl', 'plot.py', ['{root}/nolog', '--out_dir={root}/figs'], 'but no log.jsonl', None),
    ('plot: a log row without iter', 'plot.py', ['{root}/noiter', '--out_dir={root}/figs'], "it has no 'iter'", None),
    ('plot: a log row that is not an object', 'plot.py', ['{root}/listrow', '--out_dir={root}/figs'],
     'it holds a JSON list, not an object', None),
    ('plot: a copy of a run beside it', 'plot.py', ['{root}/run', '{root}/runcopy', '--out_dir={root}/figs'],
     'hold the same run (identical logs)', None),
    ('plot: two runs\' logs in one file', 'plot.py', ['{root}/twice', '--out_dir={root}/figs'],
     'goes back to iter 0 after iter 8: the rows are out of order (logs appended', None),
    ('plot: train rows without their loss', 'plot.py', ['{root}/noloss', '--out_dir={root}/figs'],
     "a train row without 'loss'", None),
    ('plot: no run dirs', 'plot.py', ['--out_dir={root}/figs'], 'needs at least one run_dirs argument', None),
    ('plot: labels for the wrong number of runs', 'plot.py', ['{root}/run', '--labels=a,b', '--out_dir={root}/figs'],
     '--labels has 2 entries but 1 run dirs', None),
    ('reproduce: a seed twice', 'reproduce.py', ['--seeds=7,7'], 'seeds lists 7 more than once', None),
    ('reproduce: unknown setting', 'reproduce.py', ['--settings=baseline,internal,al'], "did you mean 'all'", None),
    ('reproduce: ablation_seeds beyond the seeds', 'reproduce.py', ['--seeds=1,2', '--ablation_seeds=3'],
     'exceeds the 2 seed(s) of --seeds', None),
    ('reproduce: a per-run flag after --', 'reproduce.py', ['--', '--seed=3'],
     'would override what reproduce.py sets for every run: drop it (the seeds are --seeds (e.g. --seeds=3), before --)',
     None),
    ('reproduce: a setting after --', 'reproduce.py', ['--', '--taper=all'],
     'drop it (the settings trained are --settings (e.g. --settings=baseline,all), before --)', None),
    ('reproduce: a misspelt train.py flag after --', 'reproduce.py', ['--out_root={root}/repro', '--', '--max_iter=20'],
     "did you mean 'max_iters'", None),
    ('reproduce: other text than the prepared data', 'reproduce.py',
     ['--input_file={root}/small.txt', '--data_dir={data}', '--out_root={root}/repro'], 'already holds data prepared from', None),
    # fold.py, evaluate.py
    ('fold: a Baseline', 'fold.py', ['--out_dir={root}/run'], 'no tapered norm', None),
    ('fold: export of a Baseline', 'fold.py', ['--out_dir={root}/run', '--export_hf={root}/run_hf'],
     'train with --taper=all', None),
    ('fold: no checkpoint', 'fold.py', ['--out_dir={root}/fresh'], 'no such folder', None),
    ('fold: a folder without a checkpoint', 'fold.py', ['--out_dir={root}/emptydir'], 'no checkpoint there', None),
    ('sample: prompt file not text', 'sample.py', ['--out_dir={root}/run', '--device=cpu', '--start=FILE:{root}/binary.txt'],
     'binary.txt holds a NUL byte on line 1', None),
    ('sample: a Latin-1 prompt file', 'sample.py', ['--out_dir={root}/run', '--device=cpu', '--start=FILE:{root}/latin1.txt'],
     'latin1.txt is not UTF-8 text (line 4', None),
    ('sample: folded checkpoint not made yet', 'sample.py', ['--out_dir={root}/reprep_run', '--ckpt=ckpt_folded.pt',
                                                             '--device=cpu'], 'fold the run first', None),
    ('sample: the folded checkpoint of a run still mid-taper', 'sample.py',
     ['--out_dir={root}/half', '--ckpt=ckpt_folded.pt', '--device=cpu'],
     "run has not reached its norm-free end (iter 20), which is what folds: train it on with", None),
    ("sample: a Baseline run's folded checkpoint", 'sample.py', ['--out_dir={root}/run', '--ckpt=ckpt_folded.pt',
                                                                 '--device=cpu'],
     'is a Baseline run (its norms stay), which has no norm that folds, so no folded checkpoint: use its ckpt.pt', None),
    ('sample: a run folder as init_from', 'sample.py', ['--init_from={root}/run', '--device=cpu'],
     'is a run of this repository', None),
    ('bench: cuda_graph on the CPU', 'bench.py', ['--device=cpu', '--cuda_graph'], 'captures CUDA graphs', None),
    ('bench: a Baseline checkpoint', 'bench.py', ['--device=cpu', '--ckpt={root}/run/ckpt.pt'],
     'is not a tapered model past its taper start', None),
    ('bench: prompt and new tokens beyond the context', 'bench.py', ['--device=cpu', '--ckpt={root}/trun/ckpt.pt'],
     "exceed the model's context of 64", None),
    ('bench: a model whose context is one token', 'bench.py', ['--device=cpu', '--block_size=1', '--n_layer=1'],
     'holds no prompt and a new token beside it, so decoding cannot be timed', None),
    ('bench: shape flags beside a checkpoint', 'bench.py', ['--device=cpu', '--ckpt={root}/trun/ckpt.pt', '--n_layer=2'],
     'drop --n_layer', None),
    ('bench: width not divisible by heads', 'bench.py', ['--device=cpu', '--n_embd=66'], 'not divisible by n_head=16', None),
    ('evaluate: max_chunks below batch_size', 'evaluate.py', ['--out_dir={root}/run', '--max_chunks=2'],
     'max_chunks=2 is below batch_size=8', None),
    ('evaluate: missing data folder', 'evaluate.py', ['--init_from={root}/hf', '--data_dir={root}/nodata', '--device=cpu'],
     'no folder', OFFLINE),
    ('sample: a LoRA adapter folder as the model', 'sample.py', ['--init_from={root}/lora', '--device=cpu'],
     'holds a PEFT adapter (adapter_config.json), not a whole model: merge it into its base model '
     '(HuggingFaceTB/SmolLM2-135M)', None),
    ('train: a LoRA adapter folder to fine-tune', 'train.py', [*T, *LLAMA_HF, '--init_from={root}/lora'],
     'holds a PEFT adapter', None),
    ('prepare_owt: plain text given as the jsonl', 'prepare_owt.py', ['--input_file={root}/one_story.txt', '--skip_pile',
                                                                      '--out_dir={root}/o_plain'],
     'for plain text, stories apart by blank lines, use prepare_tinystories.py', None),
    ('prepare_tinystories: more processes than cores', 'prepare_tinystories.py',
     ['--input_file={root}/one_story.txt', '--vocab_size=512', '--out_dir={root}/np', '--num_proc=100000'],
     'num_proc=100000 must lie in [0, ', None),
    ('sample: a curl-style @file that does not exist', 'sample.py',
     ['--out_dir={root}/run', '--device=cpu', '--start=@{root}/nothere.txt'], 'looks like a file name, but there is no such file',
     None),
    ('sample: a prompt file name alone that does not exist', 'sample.py',
     ['--out_dir={root}/run', '--device=cpu', '--start=my_prompt.txt'], 'name an existing prompt file with --start=FILE:path',
     None),
    ('plot: figures into another run', 'plot.py', ['{root}/run', '--out_dir={root}/trun'],
     'is another training run, none of those plotted', None),
    ("reproduce: results among another reproduction's runs", 'reproduce.py',
     ['--assets={root}/rr_root', '--out_root={root}/rr_new'], 'holds training runs (results)', None),
    ("memory: a run's folded checkpoint as the model", 'memory.py', ['--init_from={root}/trun/ckpt_folded.pt'],
     'is a checkpoint of a run of this repository, whose config is in its checkpoint: python train.py --init_from=resume',
     None),
    ('evaluate: an HF Llama without a data folder: the advice prepares its tokens', 'evaluate.py',
     ['--init_from={root}/llama_words', '--data_dir={root}/nodata', '--device=cpu'],
     "prepare it with `python prepare_owt.py --tokenizer=", OFFLINE),
    ('evaluate: an HF Llama with its own tokenizer on GPT-2 tokens', 'evaluate.py',
     ['--init_from={root}/llama_words', '--data_dir={root}/owt', '--device=cpu'], "/llama_words`, or pass the --data_dir",
     OFFLINE),
    ('evaluate: a run without a data folder, its own still there', 'evaluate.py',
     ['--out_dir={root}/gpt2tok_run', '--device=cpu'], '/owt (the data the run trained on)', None),
    ('evaluate: GPT-2 on TinyStories tokens', 'evaluate.py', ['--init_from={root}/hf', '--data_dir={data}', '--device=cpu'],
     "is TinyStories data (prepare_tinystories.py's), and evaluate.py scores OpenWebText and the Pile "
     "(prepare_owt.py's): prepare it with `python prepare_owt.py`", QUIET),
    ('fold: no out_dir', 'fold.py', [], 'fold.py needs --out_dir', None),
    ('fold: --out naming the checkpoint being folded', 'fold.py', ['--out_dir={root}/trun', '--out=ckpt.pt'],
     'names the checkpoint being folded', None),
    ('fold: --out naming a training checkpoint', 'fold.py', ['--out_dir={root}/trun', '--out={root}/run/ckpt.pt'],
     "is named ckpt.pt, train.py's checkpoint", None),
    ('fold: --out over a file fold.py did not write', 'fold.py', ['--out_dir={root}/trun', '--out=log.jsonl'],
     'is not a checkpoint fold.py wrote', None),
    ('fold: export of a fine-tune of a norm-free export', 'fold.py', ['--out_dir={root}/ft_export', '--export_hf={root}/ft_hf'],
     'is a fine-tune of the norm-free export', None),
    ('fold: export of an Internal-Taper run', 'fold.py', ['--out_dir={root}/trun', '--export_hf={root}/trun_hf'],
     'real final norm', None),
    ('fold: export over a folder fold.py did not write', 'fold.py', ['--out_dir={root}/trun', '--export_hf={root}/run'],
     'holds files fold.py did not export', None),
    ('fold: a folded checkpoint', 'fold.py', ['--out_dir={root}/trun', '--ckpt=ckpt_folded.pt'], 'already folded', None),
    ('diagnose: a split the data lacks', 'diagnose.py', ['--out_dir={root}/run', '--split=pile'],
     'choose --split among the splits', None),
    ('diagnose: a plot named bare, from the clone (it would lie among the scripts)', 'diagnose.py',
     ['--out_dir={root}/run', '--plot=resid.png'], "plot=resid.png lies in the repository's own folder", None),
    ('diagnose: a plot into the repository\'s docs/', 'diagnose.py', ['--out_dir={root}/run', '--plot=docs/resid.png'],
     "lies in the repository's docs/ folder, where no script writes its outputs: name a file elsewhere, e.g. "
     "--plot=", None),
    ('diagnose: plot not an image', 'diagnose.py', ['--out_dir={root}/run', '--plot={root}/plot.txt'],
     'is not a .png, .pdf or .svg file name', None),
    ('diagnose: token ids beyond the vocabulary', 'diagnose.py', ['--out_dir={root}/run', '--data_dir={root}/garbage',
                                                                  '--split=train'], "beyond the model's vocabulary of 512", None),
    ('gpu_check: ddp on fewer than two GPUs', 'gpu_check.py', ['--device=cpu', '--only=ddp', '--out_dir={root}/gc'],
     'needs more than one CUDA GPU', None),
    ('gpu_check: a fold without its fine-tune', 'gpu_check.py', ['--device=cpu', '--only=fold_alltaper',
     '--out_dir={root}/gc2'], 'reads what the finetune_alltaper step writes, which has not run in', None),
    ('gpu_check: out_dir of another script', 'gpu_check.py', ['--device=cpu', '--out_dir={root}/run'],
     'holds files that gpu_check.py did not write', None),
    ('evaluate: a damaged Pile set: the advice reads the local file it came from', 'evaluate.py',
     ['--init_from={root}/hf', '--data_dir={root}/owtpile', '--device=cpu'], 'pile_short.jsonl --out_dir=', None),
    ('evaluate: a data folder that is a file', 'evaluate.py', ['--init_from={root}/hf', '--data_dir={root}/blank.txt', '--device=cpu'],
     'is a file, not a data folder', None),
    ('evaluate: a Pile set copied in from another folder', 'evaluate.py',
     ['--init_from={root}/hf', '--data_dir={root}/owtstray', '--device=cpu'],
     "pile.bin is not one of this folder's sets: its meta.json records the tokens of every set", None),
    ('evaluate: a token file shorter than one chunk', 'evaluate.py', ['--init_from={root}/hf', '--data_dir={root}/owtshort',
     '--device=cpu', '--batch_size=1'], 'holds 30 tokens, less than one chunk of 64', None),
    ('evaluate: a TinyStories checkpoint', 'evaluate.py', ['--out_dir={root}/run', '--data_dir={data}',
                                                           '--device=cpu'], 'evaluate.py scores OpenWebText', None),
    ('evaluate: HF name without network', 'evaluate.py', ['--init_from=gpt2', '--data_dir={data}', '--device=cpu'],
     'could not download gpt2', OFFLINE),
    # files and folders read: each kind named for what it is (the flag layer's path='file' and path='dir')
    ('prepare_tinystories: a folder as the text', 'prepare_tinystories.py', ['--input_file={root}/emptydir',
     '--out_dir={root}/p12'], 'is a folder, not a file', None),
    ('prepare_owt: a folder as the jsonl', 'prepare_owt.py', ['--input_file={root}/emptydir', '--out_dir={root}/o9'],
     'is a folder, not a file', None),
    ('fold: a file as the run folder', 'fold.py', ['--out_dir={root}/blank.txt'], 'is a file, not a folder', None),
    ('a YAML line in a config file', 'train.py', ['{root}/yaml_habit.py', *T], "assigns nothing (a YAML habit?): write `max_iters = 12`", None),
    ('a YAML word in a config file', 'train.py', ['{root}/yaml_word.py', *T], "write `taper = 'all'`", None),
    ('sample: a compressed prompt file', 'sample.py', ['--out_dir={root}/run', '--start=FILE:{root}/prompt.txt.gz'],
     'prompt.txt.gz is gzip-compressed: unpack it first', None),
    ('bench: a renamed checkpoint', 'bench.py', ['--ckpt={root}/backup/ckpt.pt', '--device=cpu'],
     'backup holds ckpt_backup.pt: pass --ckpt=/', None),  # the path bench.py reads, not a name in a run
    ('bench: a checkpoint that links to nothing', 'bench.py', ['--ckpt={root}/linkrun/ckpt.pt', '--device=cpu'],
     'is a broken symbolic link', None),
    ('plot: a log that links to nothing', 'plot.py', ['{root}/linkedlog', '--out_dir={root}/pl'],
     'log.jsonl is a broken symbolic link', None),
    ('plot: a run folder with a zero-width space', 'plot.py', ['{root}/run\u200b', '--out_dir={root}/pl'],
     'holds an invisible character or a non-breaking space', None),
    ('plot: a run folder in typographic quotes', 'plot.py', ['\u201c{root}/run\u201d', '--out_dir={root}/pl'],
     'is wrapped in typographic quotes', None),
    ('sample: a run folder with a trailing space', 'sample.py', ['--out_dir={root}/run ', '--device=cpu'],
     'begins or ends with a space', None),
    ('evaluate: a data folder with a trailing space', 'evaluate.py', ['--out_dir={root}/run', '--data_dir={root}/owt '],
     'begins or ends with a space', None),
    ('a comparison in a config file', 'train.py', ['{root}/compares.py', *T], 'compares and assigns nothing', None),
    ('a flag pasted with an em dash', 'train.py', [*T, '\u2014max_iters=10'], "not '--' (text pasted", None),
    ('a boolean flag and its value apart', 'train.py', [*T, '--compile', 'False'], 'write --compile=False', None),
    ('sample: a checkpoint that links to nothing', 'sample.py', ['--out_dir={root}/linkrun', '--device=cpu'],
     'is a broken symbolic link', None),
    ('fold: a checkpoint that links to nothing', 'fold.py', ['--out_dir={root}/linkrun'], 'is a broken symbolic link', None),
    ('resume: a checkpoint that links to nothing', 'train.py', [*R, '--out_dir={root}/linkrun'], 'is a broken symbolic link', None),
    ('token file of zeros', 'train.py', [*T, '--data_dir={root}/zeros'], 'holds only zeros', None),
    ('an out_dir name longer than the file system takes', 'train.py', [*T, '--out_dir={root}/' + 'x' * 300],
     'this file system takes at most', None),
    ('an out_dir ending in a carriage return', 'train.py', [*T, '--out_dir={root}/fresh\r'], 'line break', None),
    ("Baroni's aux loss weighted 0", 'train.py', [*T, '--aux_loss=baroni', '--aux_weight=0'], 'turns the Baroni loss off', None),
    ('sample: the checkpoint file as the run folder', 'sample.py', ['--out_dir={root}/run/ckpt.pt', '--device=cpu'],
     'is a file, not a folder: name the folder that holds it (', None),
    ('evaluate: the checkpoint file as the run folder', 'evaluate.py', ['--out_dir={root}/run/ckpt.pt'],
     'is a file, not a folder: name the folder that holds it', None),
    ('resume with the checkpoint file as the run folder', 'train.py', [*R, '--out_dir={root}/run/ckpt.pt'],
     "is a file (a checkpoint?), not a folder: name a folder to write into, e.g. the one that holds it (", None),
    ('diagnose: a data folder that is not there', 'diagnose.py', ['--out_dir={root}/run', '--data_dir={root}/nodata'],
     'no such folder', None),
    ('reproduce: a folder as the text', 'reproduce.py', ['--input_file={root}/emptydir'], 'is a folder, not a file', None),
    ('sample: a folder as the prompt file', 'sample.py', ['--out_dir={root}/run', '--device=cpu', '--start=FILE:{root}/emptydir'],
     'is a folder: --start=FILE:path names a text file', None),
    ('sample: a prompt file named with file: in lower case', 'sample.py', ['--out_dir={root}/run', '--device=cpu',
     '--start=file:{root}/one_story.txt'], 'write FILE: in capitals', None),
    ('sample: an empty prompt file', 'sample.py', ['--out_dir={root}/run', '--device=cpu', '--start=FILE:{root}/empty.txt'],
     'is empty: write the prompt in it', None),
    # damaged files: what happened, and what to do
    ('sample: a checkpoint cut short', 'sample.py', ['--out_dir={root}/cut', '--device=cpu'],
     'a copy cut short', None),
    ('train: resuming a checkpoint cut short', 'train.py', [*R, '--out_dir={root}/cut'], 'a copy cut short', None),
    ('sample: a checkpoint with NaN weights', 'sample.py', ['--out_dir={root}/nanrun', '--device=cpu'],
     'holds non-finite weights', None),
    ('evaluate: a checkpoint with NaN weights', 'evaluate.py', ['--out_dir={root}/nanrun', '--data_dir={data}',
     '--device=cpu'], 'holds non-finite weights', None),
    ('sample: an HF folder whose weights are cut short', 'sample.py', ['--init_from={root}/llama_cut', '--device=cpu'],
     'write it again with save_pretrained', None),
    ('sample: GPT-2 tokens without tiktoken files offline', 'sample.py', ['--init_from={root}/hf', '--device=cpu'],
     'set TIKTOKEN_CACHE_DIR', {'TIKTOKEN_CACHE_DIR': '{root}/emptydir', **OFFLINE}),
    ('prepare_owt: GPT-2 tokens without tiktoken files offline', 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl', '--out_dir={root}/o9', '--skip_pile'], 'set TIKTOKEN_CACHE_DIR',
     {'TIKTOKEN_CACHE_DIR': '{root}/emptydir', **OFFLINE}),
    # runs that would do nothing, or mean nothing
    ('reschedule on a scratch run', 'train.py', [*T, '--reschedule'], '--reschedule changes the schedule', None),
    ('eval_only with stop_iter', 'train.py', [*R, '--eval_only', '--stop_iter=10'], 'drop one of them', None),
    ('diagnose: data of another tokenizer', 'diagnose.py', ['--out_dir={root}/run', '--data_dir={root}/other_tok'],
     'holds tokens of another tokenizer', None),
    ('memory: a shape the model refuses', 'memory.py', ['config/taper_internal_512.py', '--n_head=7'],
     'not divisible by n_head=7', None),
    ('memory: a resume', 'memory.py', ['--init_from=resume', '--out_dir={root}/trun'], '--memory_plan', None),
    ('memory: several ranks without FSDP', 'memory.py', ['config/taper_internal_512.py', '--nproc=8', '--fsdp=False'],
     'drop --fsdp=False', None),
    ('train: the memory plan of a resume without a checkpoint', 'train.py',
     ['--init_from=resume', '--out_dir={root}/fresh', '--memory_plan'], 'cannot plan a resume', None),
    ('prepare_tinystories: HF_HOME naming a file', 'prepare_tinystories.py', ['--vocab_size=512', '--out_dir={root}/p20'],
     'HF_HOME=', {'HF_HOME': '{root}/blank.txt'}),
    ('prepare_owt: HF_DATASETS_CACHE naming a file', 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl', '--out_dir={root}/o20', '--skip_pile'], 'HF_DATASETS_CACHE=',
     {'HF_DATASETS_CACHE': '{root}/blank.txt'}),
    ('memory: ranks that cannot share the batch', 'memory.py', ['config/finetune_gpt2_xl_alltaper.py', '--nproc=5'],
     '5 ranks cannot split the global batch', None),
    ('a torchrun world that cannot share the batch', 'train.py', [*T, '--batch_size=3'],
     '2 ranks cannot split the global batch', {'RANK': '0', 'WORLD_SIZE': '2', 'LOCAL_RANK': '0',
                                               'MASTER_ADDR': 'localhost', 'MASTER_PORT': '29999'}),
    # a run writes only where it owns the files; a script replaces only what it wrote
    ('a scratch run into a save_pretrained folder', 'train.py', [*T, '--out_dir={root}/hf'], 'did not write', None),
    ('--overwrite over a save_pretrained folder', 'train.py', [*T, '--out_dir={root}/hf', '--overwrite'],
     'did not write', None),
    ('a run into its data folder', 'train.py', [*T, '--out_dir={data}'], 'is a data folder', None),
    ('a run over an earlier run\'s folded checkpoint', 'train.py', [*T, '--out_dir={root}/foldedonly'],
     'ckpt_folded.pt of an earlier run', None),
    ('eval_only with overwrite', 'train.py', [*T, '--eval_only', '--overwrite'], 'drop one of them', None),
    ('fold over a model folded from another run', 'fold.py', ['--out_dir={root}/trun2'],
     'holds a model folded from', None),
    ('fold over a file it did not write: the advice names a free file', 'fold.py', ['--out_dir={root}/linkfold'],
     'e.g. --out=ckpt_folded_2.pt', None),
    ('diagnose: a plot over a figure it did not write', 'diagnose.py', ['--out_dir={root}/run', '--plot={root}/mine.png'],
     'is not a figure that diagnose.py wrote', None),
    ('plot: over a figure it did not write', 'plot.py', ['{root}/run', '--out_dir={root}/userfigs'],
     'is not a figure that plot.py wrote', None),
    # each script replaces only its own figures: the mark is read from the image's own field
    ('diagnose: a plot over plot.py\'s figure', 'diagnose.py', ['--out_dir={root}/run', '--plot={root}/plotfigs/loss.png'],
     'is not a figure that diagnose.py wrote', None),
    ('plot: over diagnose.py\'s figure', 'plot.py', ['{root}/run', '--out_dir={root}/diagfigs'],
     'loss.png exists and is not a figure that plot.py wrote', None),
    ('diagnose: over an SVG whose title names the project', 'diagnose.py', ['--out_dir={root}/run',
     '--plot={root}/mine.svg'], 'is not a figure that diagnose.py wrote', None),
    ('a reschedule that reopens a finished taper', 'train.py', [*TINY, '--data_dir={data}', '--out_dir={root}/trun',
     '--init_from=resume', '--reschedule', '--taper_end=60', '--max_iters=80', '--lr_decay_iters=80'],
     'after the taper ended, would bring the gate back up from 0 to', None),
    # another program's checkpoint, and a folder of runs, named for what they are
    ('train: resume a nanoGPT checkpoint', 'train.py', ['--init_from=resume', '--out_dir={root}/nanogpt', '--device=cpu'],
     "is not a checkpoint of this repository's model: its model_args hold bias", None),
    ('sample: a nanoGPT checkpoint', 'sample.py', ['--out_dir={root}/nanogpt', '--device=cpu'],
     "nanoGPT's checkpoints hold 'bias'", None),
    ('fold: a nanoGPT checkpoint', 'fold.py', ['--out_dir={root}/nanogpt'], "is not a checkpoint of this repository's", None),
    ('sample: a run written by a newer version of this repository (a model field this model.py lacks)', 'sample.py',
     ['--out_dir={root}/newer', '--device=cpu'], 'was written by another version of this repository: its model_args '
     'hold qk_norm', None),
    ('train: resume a folder of runs', 'train.py', ['--init_from=resume', '--out_dir={root}', '--device=cpu'],
     'it is a folder of runs (', None),
    ('fold: an export over another run\'s export', 'fold.py', ['--out_dir={root}/trun', '--out=ckpt_f2.pt',
     '--export_hf={root}/otherexport'], 'holds an export of /elsewhere/run/ckpt.pt, not of', None),
    # arguments and folders a new user gets wrong in ways no flag names
    ('a blank argument (a space after a continuing backslash)', 'train.py', [*T, ' '], "argument ' ' is blank", None),
    ('a config file with a trailing space', 'train.py', ['{root}/cfg_ok.py ', *T],
     'holds spaces or invisible characters around the file name', None),
    ('train: a folder named ckpt.pt.tmp in the run folder', 'train.py', [*T, '--out_dir={root}/tmpdir_out'],
     'is a folder where the run writes its ckpt.pt first', None),
    ('train: a W&B server it cannot reach', 'train.py', [*T, '--wandb_log'], 'cannot be reached from here',
     {'WANDB_BASE_URL': 'http://127.0.0.1:9', 'WANDB_MODE': 'online', 'WANDB_API_KEY': '0' * 40}),
    ('fold: --out inside the export folder', 'fold.py', ['--out_dir={root}/trun', '--out={root}/exp_in/f.pt',
     '--export_hf={root}/exp_in'], 'lies inside export_hf', None),
    ("reproduce: a kept run of another setting under a setting's name", 'reproduce.py',
     ['--data_dir={data}', '--out_root={root}/keptroot', '--settings=baseline,internal', '--', '--vocab_size=512'],
     'holds a run with', None),
    # an empty value is refused wherever the default is not itself empty
    # the prepare command a data folder is named with: the script its meta.json records, not its name's
    ('prepare_owt.py data under another name, val.bin gone', 'train.py', [*T, '--data_dir={root}/gpt2_tokens'],
     'prepare the data with `python prepare_owt.py --skip_pile --out_dir=', None),
    ("TinyStories data under a name holding 'owt', val.bin gone", 'train.py', [*T, '--data_dir={root}/growth_stories'],
     'prepare the data with `python prepare_tinystories.py --vocab_size=512 --out_dir=', None),
    # a run folder whose files are of two runs, or whose data changed under it
    ('resume a checkpoint copied in from another run', 'train.py',
     ['--init_from=resume', '--out_dir={root}/swapped', '--device=cpu', '--max_iters=60', '--lr_decay_iters=60'],
     "swapped/ckpt.pt is another run's checkpoint (its model has taper='internal', aux_loss='fixed', where "
     "config.json here records taper='none', aux_loss='none', and log.jsonl here lacks its evaluation at iter 40", None),
    ("resume a ckpt.pt that links to another run's checkpoint", 'train.py',
     ['--init_from=resume', '--out_dir={root}/linkedckpt', '--device=cpu', '--max_iters=60', '--lr_decay_iters=60'],
     "linkedckpt/ckpt.pt is a link to", None),
    ("resume a ckpt.pt that links to another run's checkpoint, its log moved aside", 'train.py',
     ['--init_from=resume', '--out_dir={root}/linkednolog', '--device=cpu', '--max_iters=60', '--lr_decay_iters=60'],
     "trun/ckpt.pt, another run's checkpoint (its model has taper='internal', aux_loss='fixed', where config.json here "
     "records taper='none', aux_loss='none'): put this run's own ckpt.pt in the link's place, or resume that run in its own folder with --out_dir=", None),
    ("resume a ckpt.pt that links to a checkpoint of the same setting whose evaluation the log lacks", 'train.py',
     ['--init_from=resume', '--out_dir={root}/linkedtwin', '--device=cpu', '--max_iters=60', '--lr_decay_iters=60'],
     "another run's checkpoint (log.jsonl here lacks its evaluation at iter 8)", None),
    ("resume a run whose log.jsonl is another run's", 'train.py',  # the checkpoint and config.json agree: the log is odd
     ['--init_from=resume', '--out_dir={root}/mixedlog', '--device=cpu', '--max_iters=60', '--lr_decay_iters=60'],
     "mixedlog/log.jsonl is not the whole log of", None),
    ('a resume whose every step runs at learning rate 0', 'train.py',
     ['--init_from=resume', '--out_dir={root}/run', '--device=cpu', '--max_iters=12', '--min_lr=0'],
     'would run at learning rate 0 (min_lr=0.0 past lr_decay_iters=8)', None),
    ('resume on data that grew since the run began', 'train.py', [*R, '--data_dir={root}/grown'],
     'the data changed since the run began', None),
    ('resume on its own data folder, prepared again', 'train.py',
     ['--init_from=resume', '--out_dir={root}/reprep_run', '--device=cpu', '--max_iters=8', '--lr_decay_iters=8'],
     'was prepared again since, with another tokenizer: prepare the run\'s data once more, with a 512-token', None),
    ('diagnose: a run whose data folder was prepared again', 'diagnose.py', ['--out_dir={root}/reprep_run'],
     'was prepared again since, with another tokenizer', None),
    ('resume a run whose data path is a link since repointed', 'train.py',
     ['--init_from=resume', '--out_dir={root}/linkrep_run', '--device=cpu', '--max_iters=8', '--lr_decay_iters=8'],
     'a path through a symbolic link, now to', None),
    ('prepare: one text file twice, under two spellings', 'prepare_tinystories.py',
     ['--input_file={shared}/tinystories/train_sample.txt,{shared}/tinystories/../tinystories/train_sample.txt',
      '--out_dir={root}/twice'], 'names one file twice, as', None),
    ('sample: a run whose ckpt.pt was gzip-ed in place', 'sample.py', ['--out_dir={root}/gzrun', '--device=cpu'],
     'ckpt.pt is gzip-compressed: unpack it in place first', None),
    ('evaluate: a checkpoint kept as .pt.xz', 'evaluate.py', ['--ckpt={root}/gzrun/old.pt.xz', '--data_dir={data}', '--device=cpu'],
     'old.pt.xz is xz-compressed: unpack it first (`unxz -c', None),
    ('train: a resume from a ckpt.pt gzip-ed in place', 'train.py', [*T, '--out_dir={root}/gzrun', '--init_from=resume'],
     'ckpt.pt is gzip-compressed: unpack it in place first', None),
    ('sample: an HF folder cloned without git-lfs', 'sample.py', ['--init_from={root}/llama_lfs', '--device=cpu'],
     'is a Git LFS pointer, not the weights', None),
    ('train: fine-tune an HF folder cloned without git-lfs', 'train.py', [*T, '--init_from={root}/llama_lfs', *LLAMA_HF],
     'is a Git LFS pointer, not the weights', None),
    ('plot: a log compressed under its own name', 'plot.py', ['{root}/gzlog', '--out_dir={root}/plgz'],
     'log.jsonl is gzip-compressed: unpack it in place first', None),
    ('plot: a stray text file among the runs', 'plot.py', ['{root}/run', '{root}/small.txt', '--out_dir={root}/plstray'],
     'or leave the file out', None),
    ('plot: a config.json of another run beside the checkpoint', 'plot.py', ['{root}/swapcfg', '--out_dir={root}/plswap'],
     "config.json is another run's", None),
    ('plot: a log of another run beside a Baseline config', 'plot.py', ['{root}/mixedlog', '--out_dir={root}/plmix'],
     'the log holds rows of another run', None),
    ('fine-tune a norm-free export whose eps was edited back', 'train.py',
     [*T, *LLAMA_HF, '--n_kv_head=2', '--taper=none', '--aux_loss=none', '--init_from={root}/llama_epsedit'],
     "is fold.py's norm-free export, whose norms are fixed maps only at rms_norm_eps=67108864.0", None),
    ('evaluate: a norm-free export whose eps was edited back', 'evaluate.py',
     ['--init_from={root}/llama_epsedit', '--data_dir={data}', '--device=cpu'],
     "but its config.json gives rms_norm_eps=1e-05: put 67108864.0 back, or export the run again", None),
    ('memory: a norm-free export whose eps was edited back', 'memory.py', ['--init_from={root}/llama_epsedit'],
     "is fold.py's norm-free export, whose norms are fixed maps only at rms_norm_eps=67108864.0", None),
    ('fine-tune a norm-free export with a taper', 'train.py', [*T, '--init_from={root}/otherexport'],
     "norm-free export: its norms are identities already, so there is nothing to taper", None),
    ("fine-tune a Llama norm-free export with GPT-2's FakeLN config", 'train.py',
     ['config/finetune_gpt2_s_fakeln.py', *T, '--init_from={root}/allrun_hf', '--mask_eot_targets=False'],
     "nothing to replace with FakeLN: fine-tune it with a config written for llama models, such as "
     "config/finetune_smollm2_135m_alltaper.py, and --taper=none", None),
    ('resume a finished taper with another taper_end behind the run', 'train.py',
     ['--init_from=resume', '--out_dir={root}/trun', '--device=cpu', '--taper_end=36', '--max_iters=48',
      '--lr_decay_iters=48'], "taper_end 32 -> 36 at iter 40 changes nothing: the taper ended at iter 32", None),
    ('reschedule a finished taper to another taper_end behind the run', 'train.py',
     ['--init_from=resume', '--out_dir={root}/trun', '--device=cpu', '--taper_end=24', '--reschedule', '--max_iters=48',
      '--lr_decay_iters=48'], "taper_end 32 -> 24 at iter 40 changes nothing", None),
    ("meta.json with vocab_size as a string of digits", 'train.py', [*T, '--data_dir={root}/digitmeta'],
     "not a positive whole number: fix that in meta.json, or remove ", None),
    ("evaluate: meta.json with vocab_size as a string of digits", 'evaluate.py',
     ['--init_from={root}/hf', '--data_dir={root}/digitowt', '--device=cpu', '--max_chunks=1', '--batch_size=1'],
     "and then prepare it again with `python prepare_owt.py", None),
    ('fold: an empty --ckpt', 'fold.py', ['--out_dir={root}/trun', '--ckpt='], "ckpt is empty: drop --ckpt for its default", None),
    ('prepare_owt: an empty --tokenizer', 'prepare_owt.py', [*OWT, '--tokenizer='], 'tokenizer is empty: drop --tokenizer', None),
    ('train: an empty --wandb_project', 'train.py', [*T, '--wandb_project='], 'wandb_project is empty', None),
    ('diagnose: an empty --plot', 'diagnose.py', ['--out_dir={root}/run', '--plot='], 'plot is empty', None),
    ('diagnose: a JPEG plot', 'diagnose.py', ['--out_dir={root}/run', '--plot={root}/new.jpg'],
     'is not a .png, .pdf or .svg file name', None),
    # resumes that would change what the run is drawn from
    ('a resume with another seed', 'train.py', [*R, '--seed=7', '--max_iters=12', '--lr_decay_iters=12'],
     'a resume keeps the run\'s seed', None),
    ('a resume with another data layout', 'train.py', [*R, '--data_layout=blocks', '--max_iters=12',
     '--lr_decay_iters=12'], 'keeps the run\'s data_layout', None),
    ('a reschedule of a taper that has started', 'train.py', ['--init_from=resume', '--out_dir={root}/trun',
     '--max_iters=48', '--lr_decay_iters=48', '--taper_start=12', '--taper_end=44', '--reschedule'],
     'the taper has started', None),
    # values, files and data that cannot be what they claim
    ('a seed beyond 64 bits', 'train.py', [*T, '--seed=99999999999999999999999'], 'must lie in [0, ', None),
    ('a config file that is not UTF-8', 'train.py', ['{root}/utf16.py', *T], 'is not UTF-8 text', None),
    ('`--` given to train.py', 'train.py', [*T, '--', '--max_iters=20'], 'only reproduce.py passes', None),
    ('meta.json holding a list', 'train.py', [*T, '--data_dir={root}/listmeta'], 'holds a JSON list', None),
    ('tokens of another dtype than meta.json says', 'train.py', [*T, '--data_dir={root}/wide16'],
     'uint32 tokens read as uint16', None),
    ('tokens fewer than meta.json records', 'train.py', [*T, '--data_dir={root}/shorttrain'],
     'but meta.json records', None),
    ('a damaged tokenizer in meta\'s folder', 'train.py', [*T, '--data_dir={root}/badspm'],
     'cannot be read without it: remove', None),
    ('GPT-2 fine-tuned on SentencePiece tokens', 'train.py', [*T, *GPT2_HF], 'tokens of another tokenizer than', None),
    ('sample: a checkpoint carrying a damaged tokenizer', 'sample.py', ['--out_dir={root}/badtok', '--device=cpu'],
     'damaged SentencePiece tokenizer', None),
    ('sample: --ckpt beside an HF model', 'sample.py', ['--init_from={root}/hf', '--ckpt=ckpt_folded.pt', '--device=cpu'],
     'drop one of them', None),
    ('sample: from scratch', 'sample.py', ['--init_from=scratch', '--device=cpu'], 'samples a trained model', None),
    ('sample: a ckpt.pt that is a folder', 'sample.py', ['--out_dir={root}/ckptdir', '--device=cpu'],
     'is a folder, not a checkpoint file', None),
    ('sample: an HF folder without a tokenizer', 'sample.py', ['--init_from={root}/llama', '--device=cpu'],
     'holds no tokenizer files', None),
    ('a train.bin that is a folder', 'train.py', [*T, '--data_dir={root}/bindir'], 'is a folder, not a token file', None),
    ('bench: a prompt length for a training step', 'bench.py', ['--train', '--prompt_len=64', '--device=cpu'],
     'drop --prompt_len', None),
    ('reproduce: more jobs than cores', 'reproduce.py', ['--jobs=1000'], 'exceeds this machine', None),
    ('prepare_owt: every text empty', 'prepare_owt.py', ['--input_file={root}/emptytexts.jsonl', '--out_dir={root}/o10'],
     'is empty: there is nothing to tokenize', None),
    ('prepare_owt: a Pile file shorter than one chunk', 'prepare_owt.py', [*OWT, '--pile_file={root}/pile_short.jsonl'],
     'fewer than the one 1024-token chunk', None),
    ('prepare_tinystories: JSON lines', 'prepare_tinystories.py', ['--input_file={shared}/openwebtext/sample.jsonl',
     '--out_dir={root}/p14'], 'is JSON lines', None),
    ('prepare_tinystories: a pretty-printed JSON array of stories', 'prepare_tinystories.py',
     ['--input_file={root}/stories_array.json', '--out_dir={root}/p15'], "for records with a 'text' field) and pass", None),
    ('prepare_tinystories: JSON lines named .txt', 'prepare_tinystories.py',
     ['--input_file={root}/docs_lines.txt', '--out_dir={root}/p16'], 'is JSON lines', None),
    ('prepare_owt: a JSON array of documents on one line', 'prepare_owt.py',
     ['--input_file={root}/docs_array.jsonl', '--out_dir={root}/o11'], 'is one JSON array of records, not JSON lines', None),
    ('fold: --reset_unseen with --export_hf of a model whose export ties its head to the embeddings', 'fold.py',
     ['--out_dir={root}/allrun', '--reset_unseen', '--out=ckpt_reset.pt', '--export_hf={root}/allrun_reset_hf'],
     'reads its head from the input embeddings', None),
    ('fold: an earlier checkpoint put back as ckpt.pt, beside the fold of a later step', 'fold.py',
     ['--out_dir={root}/putback'], 'a later step than', None),
    ('fold: an earlier checkpoint put back, exported over the export of a later step', 'fold.py',
     ['--out_dir={root}/putback', '--out=ckpt_folded_2.pt', '--export_hf={root}/putback_hf'],
     'holds the export of iter 8, a later step than', None),
    ('fold: a folded checkpoint shared alone as ckpt.pt', 'fold.py', ['--out_dir={root}/packaged'],
     "this model is already folded: sample or score it as it is", None),
    ('sample: an empty prompt for a tokenizer with neither an end- nor a beginning-of-sequence token', 'sample.py',
     ['--init_from={root}/llama_noeos', '--device=cpu', '--max_new_tokens=2'], 'give the prompt some text with --start',
     None),
    ('plot: a run whose log has a broken line in the middle (a torn last line is only noted)', 'plot.py',
     ['{root}/badlog', '--out_dir={root}/plbad'], 'line 2 is not valid JSON; fix or delete that line', None),
    ('evaluate: an OpenWebText folder whose meta.json was copied from a TinyStories folder', 'evaluate.py',
     ['--init_from={root}/hf', '--data_dir={root}/owtmeta'], "train tokens, but train.bin beside it holds 2,000: the "
     "meta.json is another folder's", None),
    ("plot: the repository's assets/ folder as out_dir, where the README's figures are", 'plot.py',
     ['{root}/run', '--out_dir=assets'], "is the repository's assets/ folder (its committed results)", None),
    ("diagnose: --plot into the repository's assets/ folder, over the figure the docs show", 'diagnose.py',
     ['--out_dir={root}/trun', '--plot=assets/diagnose.png'], "lies in the repository's assets/ folder", None),
    ("plot: a label in LaTeX that matplotlib's math cannot read", 'plot.py',
     ['{root}/run', '{root}/trun', '--labels=$\\textbf{{Base}}$,taper', '--out_dir={root}/pltex'],
     'matplotlib reads the text between $ signs as math, and cannot read this', None),
    ("plot: a label that begins with _, which matplotlib leaves out of legends", 'plot.py',
     ['{root}/run', '{root}/trun', '--labels=_base,taper', '--out_dir={root}/plunder'],
     "begins with '_', and matplotlib leaves such labels out of the legend", None),
    ("sample: an HF model folder given another model's far smaller tokenizer", 'sample.py',
     ['--init_from={root}/hf50k_wordtok', '--device=cpu', '--max_new_tokens=2', '--start=w1 w2'],
     "tokenizer has 64 ids for the model's 50,257 embedding rows, far fewer than a vocabulary padded", None),
    ("sample: a snapshot of the HF cache copied with cp -r (its files broken links to ../../blobs/)", 'sample.py',
     ['--init_from={root}/cachecopy', '--device=cpu'], 'copy it again with cp -rL, which copies the files the links '
     'point to', None),
    ("sample: an HF folder whose tokenizer is the model's own code (auto_map, trust_remote_code)", 'sample.py',
     ['--init_from={root}/llama_owncode', '--device=cpu', '--start=w1 w2'],
     "names classes of the folder's own code (auto_map: tokenization_internlm2.InternLM2Tokenizer)", None),
    ("fold: --export_hf naming a symbolic link to the run's earlier export", 'fold.py',
     ['--out_dir={root}/allrun', '--export_hf={root}/latest_hf'], 'is a symbolic link (to allrun_hf), and an export '
     'replaces its folder whole', None),
    ("diagnose: --data_dir naming the folder of the text the run's data was prepared from", 'diagnose.py',
     ['--out_dir={root}/trun', '--data_dir={root}/storytext'], "holds text, not tokens, and a prepare of it would learn "
     "another tokenizer than the run's: pass the run's own --data_dir=", None),
    ("sample: a GPT-2-token run, tiktoken's cached vocab.bpe cut short (tiktoken would remove it)", 'sample.py',
     ['--out_dir={root}/gpt2tok_run', '--device=cpu', '--max_new_tokens=2'], 'is not that file (its sha256 differs',
     {'TIKTOKEN_CACHE_DIR': '{root}/tkcut', 'HF_HUB_OFFLINE': '1'}),
    ('prepare_tinystories: --input_file followed by the files a shell pattern expanded to', 'prepare_tinystories.py',
     ['--input_file', '{root}/globbed/a.txt', '{root}/globbed/b.txt', '{root}/globbed/c.txt', '--out_dir={root}/p19'],
     'is followed by 3 files apart by spaces (a pattern such as', None),
    ('prepare_tinystories: --val_file a byte-identical copy of --input_file', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--val_file={root}/globbed/a.txt', '--out_dir={root}/p20'],
     'holds the same bytes as --input_file=', None),
    # checkpoints that cannot be what they claim
    ('a folded checkpoint resumed as ckpt.pt', 'train.py', ['--init_from=resume', '--out_dir={root}/foldasckpt'],
     'is a folded checkpoint', None),
    ('a checkpoint whose iter_num is text', 'train.py', ['--init_from=resume', '--out_dir={root}/iterstr'],
     'not a step number', None),
    ('a checkpoint without optimizer state', 'train.py', ['--init_from=resume', '--out_dir={root}/noopt'],
     'it has no optimizer', None),
    ('a checkpoint with a damaged random state', 'train.py', [*R, '--out_dir={root}/badrng', '--max_iters=12',
     '--lr_decay_iters=12'], 'damaged random-number state', None),
    ('sample: --ckpt without its .pt', 'sample.py', ['--out_dir={root}/trun', '--ckpt=ckpt_folded', '--device=cpu'],
     'pass --ckpt=ckpt_folded.pt', None),
    ('diagnose: --ckpt misspelt', 'diagnose.py', ['--out_dir={root}/run', '--ckpt=ckpt.tp'], 'pass --ckpt=ckpt.pt', None),
    ('sample: --ckpt with the run folder written again in it', 'sample.py',
     ['--out_dir={root}/trun', '--ckpt=trun/ckpt_folded.pt', '--device=cpu'],
     '--ckpt is read inside --out_dir, so name it alone: --ckpt=ckpt_folded.pt', None),
    ('evaluate: a checkpoint that is a named pipe', 'evaluate.py', ['--out_dir={root}/fiforun', '--data_dir={root}/owt',
                                                                    '--device=cpu'],
     'is a named pipe (as mkfifo or <(...) make), not a file', None),
    ('prepare_tinystories: the stories through a pipe (<(...)), read more than once', 'prepare_tinystories.py',
     ['--input_file={root}/fifo.txt', '--vocab_size=512', '--out_dir={root}/o_fifo'], 'it can be read only once', None),
    ('prepare_owt: the documents through a pipe', 'prepare_owt.py', ['--input_file={root}/fifo.txt',
                                                                     '--out_dir={root}/o_fifo'], 'save it to a file first', None),
    ("train: a data folder whose train.bin is a named pipe", 'train.py', [*TINY, '--data_dir={root}/fifodata',
                                                                          '--out_dir={root}/fresh'], 'train.bin, in data_dir=', None),
    ('plot: a run whose log.jsonl is a named pipe', 'plot.py', ['{root}/fifolog', '--out_dir={root}/figs'],
     'is a named pipe', None),
    ('a device name typed with a Cyrillic letter', 'train.py', [*T, '--device=\u0441pu'], 'U+0441, CYRILLIC SMALL LETTER ES',
     None),
    ('an out_dir whose name holds a Latin-1 byte (not UTF-8)', 'train.py', [*TINY, '--data_dir={data}',
     '--out_dir={root}/caf\udce9'], 'holds the byte 0xE9, which is not UTF-8', None),
    ('fold: a run folder named under Latin-1', 'fold.py', ['--out_dir={root}/r\udce9sum\udce9'],
     'holds the byte 0xE9, which is not UTF-8', None),
    ('a config file named under Latin-1', 'train.py', ['{root}/caf\udce9.py', *T], 'holds the byte 0xE9', None),
    ('a choice typed with a Greek letter', 'train.py', [*T, '--taper=\u03bfne'], 'U+03BF, GREEK SMALL LETTER OMICRON', None),
    ('a run into the home folder itself (--out_dir=~, meant ~/runs/...)', 'train.py',
     [*TINY, '--data_dir={data}', '--out_dir=~'], 'is your home folder itself, where the outputs would lie among your '
     'own files', {'HOME': '{root}'}),
    ('prepare_owt: the file system root as out_dir', 'prepare_owt.py', [OWT[0], '--out_dir=/'], "is the file system's root",
     None),
    ('a data folder under ~ that is not there (~ read as the home folder)', 'train.py',
     [*TINY, '--data_dir=~/nodata', '--out_dir={root}/fresh'], 'nodata/train.bin not found: prepare the data with '
     '`python prepare_tinystories.py --vocab_size=512 --out_dir=/', {'HOME': '{root}'}),
    ('sample: a checkpoint renamed ckpt.pth', 'sample.py', ['--out_dir={root}/pthrun', '--device=cpu'],
     'holds ckpt.pth: pass --ckpt=ckpt.pth', None),
    ('resume: a checkpoint renamed ckpt.pth', 'train.py', ['--init_from=resume', '--out_dir={root}/pthrun', '--device=cpu'],
     'rename ckpt.pth to ckpt.pt', None),
    ('fold: a checkpoint renamed ckpt.pth', 'fold.py', ['--out_dir={root}/pthrun'], 'pass --ckpt=ckpt.pth', None),
    ('fold: --out named as safetensors', 'fold.py', ['--out_dir={root}/trun', '--out=ckpt_folded.safetensors'],
     'pass --export_hf=<a folder> for the safetensors', None),
    ('fold: --out named as JSON', 'fold.py', ['--out_dir={root}/trun', '--out=folded.json'], "ends in .json", None),
    ('bench: a GPT-2-layout run trained from scratch', 'bench.py', ['--ckpt={root}/gpt2scratch/ckpt.pt', '--device=cpu'],
     'which a run trained from scratch is not', None),
    ('a training run folder as the data folder', 'train.py', [*TINY, '--data_dir={root}/run', '--out_dir={root}/fresh'],
     "is a training run's folder, not a data folder", None),
    ('diagnose: a training run folder as the data folder', 'diagnose.py', ['--out_dir={root}/run', '--data_dir={root}/trun'],
     "is a training run's folder, not a data folder: pass the folder a prepare script wrote", None),
    ('sample: a checkpoint with a damaged model config', 'sample.py', ['--out_dir={root}/bogusargs', '--device=cpu'],
     'damaged model config', None),
    ('sample: a checkpoint whose rope_scaling is not Llama-3\'s', 'sample.py', ['--out_dir={root}/yarnargs', '--device=cpu'],
     "is not Llama-3's frequency rescaling", None),
    ('a reschedule that ends the taper behind the run', 'train.py', ['--init_from=resume', '--out_dir={root}/half',
     '--taper_end=15', '--reschedule'], 'would drop the gate to 0 at once', None),
    ('a reschedule of a taper_end on a Baseline run, which has no taper', 'train.py',
     ['--init_from=resume', '--out_dir={root}/run', '--device=cpu', '--reschedule', '--taper_end=30', '--max_iters=12',
      '--lr_decay_iters=12'], "--reschedule changes nothing: the run in progress has no schedule for taper_end to move "
     "(taper='none', aux_loss='none', fakeln=False), so --taper_end has no effect in it: drop --reschedule and "
     "--taper_end", None),
    ('a reschedule beside an lr_decay_iters edited into config.json', 'train.py',
     ['--init_from=resume', '--out_dir={root}/editedlr', '--device=cpu', '--reschedule', '--max_iters=60'],
     "(config.json's lr_decay_iters=60 is not read: a resume takes the checkpoint's config): pass --lr_decay_iters=60 "
     "without --reschedule, which only taper_start or taper_end need", None),
    ('the scale loss weighted 0', 'train.py', [*T, '--aux_weight=0'], 'turns the fixed-target scale loss off', None),
    # the environment, and files that are not what they seem
    ('a MASTER_PORT that is not a port', 'train.py', T, 'is not a port number',
     {'RANK': '0', 'WORLD_SIZE': '1', 'LOCAL_RANK': '0', 'MASTER_ADDR': 'localhost', 'MASTER_PORT': 'notaport'}),
    ('a config file that calls exit()', 'train.py', ['{root}/exits.py', *T], 'calls exit()', None),
    ('sample: a train.py config file', 'sample.py', ['config/quick_cpu.py', '--out_dir={root}/run'],
     "another script's config file", None),
    ('out_dir a broken symbolic link', 'train.py', [*T, '--out_dir={root}/deadlink'], 'broken symbolic link', None),
    ('meta.json a folder', 'train.py', [*T, '--data_dir={root}/metadir'], 'is a folder, not the JSON', None),
    ('meta.json holding null', 'train.py', [*T, '--data_dir={root}/metanull'], 'holds a JSON null', None),
    ('meta.json naming an unknown tokenizer', 'train.py', [*T, '--data_dir={root}/metabpe'],
     'which none of the prepare scripts writes', None),
    ('meta.json with bos_id beyond the vocabulary', 'train.py', [*T, '--data_dir={root}/metabos'],
     'outside its vocabulary', None),
    ('train.bin a link to a device', 'train.py', [*T, '--data_dir={root}/devbin'], 'is a device, not a file', None),
    ('prepare_tinystories: into a training run', 'prepare_tinystories.py', ['--input_file={root}/small.txt',
     '--out_dir={root}/run'], 'holds a training run', None),
    ('sample: --out_dir beside an HF model', 'sample.py', ['--init_from={root}/hf', '--out_dir={root}/run',
     '--device=cpu'], 'names a run to load (its folder, or its checkpoint file), but --init_from=', None),
    ('an OpenMP thread count that is not a number', 'sample.py', ['--out_dir={root}/run', '--device=cpu'],
     'OMP_NUM_THREADS=abc', {'OMP_NUM_THREADS': 'abc'}),
    # seventh sweep: each row a class (the case that found it in parentheses)
    ('prepare_tinystories: a HOME where the datasets cache cannot be made', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--vocab_size=512', '--out_dir={root}/homeless'], 'the default HF_DATASETS_CACHE',
     {'HOME': '{root}/mine.png'}),
    ('prepare_tinystories: stories without blank lines between them', 'prepare_tinystories.py',
     ['--input_file={root}/no_blank_lines.txt', '--vocab_size=512', '--out_dir={root}/nbl'],
     'lines in a row with no blank line between them', None),
    ('resume after a kill during the first checkpoint', 'train.py', [*R, '--out_dir={root}/cutfirst'],
     'stopped while it wrote its first checkpoint', None),
    ('resume with a relative data_dir from another folder', 'train.py',
     ['--init_from=resume', '--out_dir={root}/relrun', '--max_iters=12', '--device=cpu'],
     'is relative, and relative_data_elsewhere/train.bin not found', None),
    ('resume with a --data_dir that is not there', 'train.py', [*R, '--data_dir=relative_data_elsewhere'],
     'pass --data_dir=<the folder the run was trained on> (its checkpoint names', None),
    ('missing data: the prepare command names the vocabulary and folder', 'train.py', [*T, '--data_dir={root}/nodata2'],
     'prepare_tinystories.py --vocab_size=512 --out_dir=', None),
    ('plot: one label for two methods', 'plot.py', ['{root}/run', '{root}/trun', '--labels=mine,mine',
                                                    '--out_dir={root}/s08'], 'give them two labels', None),
    ('plot: the figures folder named like a figure', 'plot.py', ['{root}/run', '--out_dir={root}/figs/loss.png'],
     'ends in .png, like a file', None),
    ('fold: the HF folder named like a weight file', 'fold.py', ['--out_dir={root}/trun',
                                                                '--export_hf={root}/export.safetensors'],
     'ends in .safetensors, like a file', None),
    ('train: the run folder named like a checkpoint', 'train.py', [*T, '--out_dir={root}/newrun.pt'],
     'ends in .pt, like a file', None),
    ('reproduce: a data folder of another vocabulary', 'reproduce.py', ['--data_dir={data}', '--out_root={root}/rp'],
     'not the 2048-piece SentencePiece TinyStories', None),
    ('reproduce: an OpenWebText data folder', 'reproduce.py', ['--data_dir={root}/owtlike', '--out_root={root}/rp'],
     'holds tiktoken tokens', None),
    ('sample: an HF folder whose weights are not its config\'s size', 'sample.py',
     ['--init_from={root}/llama_vocab600', '--device=cpu'], 'config.json makes it 600 x 64', OFFLINE),
    ('plot: a package this Python cannot import', 'plot.py', ['{root}/run', '--out_dir={root}/pk'],
     'needs the matplotlib package', {'PYTHONPATH': '{root}/shadow'}),
    ('sample: a tokenizer package this Python cannot import', 'sample.py', ['--out_dir={root}/run', '--device=cpu'],
     'needs the sentencepiece package', {'PYTHONPATH': '{root}/shadow'}),
    ('resume a checkpoint whose bytes were damaged', 'train.py', [*R, '--out_dir={root}/flipped'], 'is damaged', None),
    ('sample a checkpoint whose bytes were damaged', 'sample.py', ['--out_dir={root}/flipped', '--device=cpu'],
     'does not match the checksum stored with it', None),
    ('evaluate: a run folder as a bare argument', 'evaluate.py', ['{root}/run'],
     'a folder is named with a flag, e.g. --out_dir=', None),
    ('sample: the prompt as a bare argument', 'sample.py', ['--out_dir={root}/run', 'Once upon a time'],
     "a prompt is given as --start=..., e.g. --start='Once upon a time'", None),
    ('sample: a misspelt local HF folder that reads like a hub name', 'sample.py', ['--init_from=config/finetune_gpt',
                                                                                    '--device=cpu'],
     'no folder at config/finetune_gpt', OFFLINE),
    ('sample: standard input as the prompt', 'sample.py', ['--out_dir={root}/run', '--start=-'], 'FILE:/dev/stdin', None),
    ('eval_only and memory_plan together', 'train.py', [*R, '--eval_only', '--memory_plan'], 'pass one of them', None),
    ("meta.json's vocabulary beyond its tokenizer's", 'train.py', [*T, '--data_dir={root}/meta600', '--vocab_size=600'],
     'tokenizer.model has 512 pieces', None),
    ('plot: labels given apart', 'plot.py', ['{root}/run', '{root}/trun', '--labels', 'a', 'b', '--out_dir={root}/pl'],
     'write the labels comma-separated, --labels=a,b', None),
    ('plot: figures into an HF model folder', 'plot.py', ['{root}/run', '--out_dir={root}/llama'],
     'is an HF model', None),
    ("fold: a rank 1's torchrun variables left in a shell, without torchrun", 'fold.py', ['--out_dir={root}/trun'],
     'or unset WORLD_SIZE RANK LOCAL_RANK if a shell left them set', {'WORLD_SIZE': '2', 'RANK': '1', 'LOCAL_RANK': '1'}),
    ('sample under torchrun', 'sample.py', ['--out_dir={root}/run', '--device=cpu'], 'runs in one process',
     {'WORLD_SIZE': '2'}),
    ('an unknown flag that resembles no declared one', 'train.py', [*T, '--backend=gloo'],
     "unknown flag 'backend' on the command line (`python train.py --help` lists them)", None),
    ('evaluate: a label with a line break', 'evaluate.py', ['--init_from={root}/hf', '--label=my\nrun'],
     'holds a line break', None),
    ('prepare_owt: a Pile set to download, offline', 'prepare_owt.py', [*OWT, '--pile_file={root}/pile_1024.jsonl'],
     'would be downloaded, and the hub cannot be reached', OFFLINE),
    # eighth sweep
    ('a config file holding a dict, as JSON would', 'train.py', ['{root}/json_cfg.py', *T],
     'is a value that assigns nothing', None),
    ('a config file after the flag it would undo', 'train.py', [*T, '{root}/sets_lr.py'],
     'sets learning_rate, which --learning_rate= before it already set', None),
    ("bench: an HF folder whose rope_theta is text", 'bench.py', ['--init_from={root}/llama_ropestr', '--device=cpu'],
     "rope_parameters.rope_theta='10000.0'", OFFLINE),
    ("bench: an HF folder whose width is no multiple of its heads", 'bench.py',
     ['--init_from={root}/llama_heads3', '--device=cpu'], 'is not a multiple of the number of attention heads', OFFLINE),
    ("sample: an HF folder whose tokenizer is larger than its embedding", 'sample.py',
     ['--init_from={root}/llama_tok1000', '--device=cpu'], "tokenizer has 1000 ids, but the model's embedding has 512",
     OFFLINE),
    ("sample: an HF folder with a tokenizer_config.json and no tokenizer", 'sample.py',
     ['--init_from={root}/llama_tokcfg', '--device=cpu'], 'holds no vocabulary', OFFLINE),
    ('resume a folder that holds only a folded checkpoint', 'train.py', [*R, '--out_dir={root}/foldedonly'],
     'has no optimizer state to go on from: sample or score it with --ckpt=ckpt_folded.pt (sample.py, diagnose.py', None),
    ('a number with a typographic minus', 'train.py', [*T, '--learning_rate=3e\u22124'], 'typographic dash or minus',
     None),
    ("argparse's --config", 'train.py', [*T, '--config=config/quick_cpu.py'], '--config is no flag', None),
    ('prepare_tinystories: two files apart by a space', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt {root}/one_story.txt', '--out_dir={root}/sp'], 'separate them with commas', None),
    ("plot: a run's checkpoint as the run", 'plot.py', ['{root}/run/ckpt.pt', '--out_dir={root}/pl'],
     "is a file, not a run's folder", None),
    ('reproduce: results into a training run', 'reproduce.py', ['--assets={root}/run', '--out_root={root}/rp'],
     'is a training run', None),
    ('sample a folder whose --overwrite run was killed before its first checkpoint', 'sample.py',
     ['--out_dir={root}/killed_overwrite', '--device=cpu'], 'the run it replaced waits in', None),
    # ninth sweep
    ('one dash before a flag', 'train.py', [*T, '-max_iters=12'], 'has one dash: flags take two, --max_iters=12', None),
    ('prepare_tinystories: into an OpenWebText data folder', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt', '--vocab_size=512', '--out_dir={root}/owtlike'], 'holds tiktoken tokens', None),
    ('bench: a folded checkpoint', 'bench.py', ['--ckpt={root}/trun/ckpt_folded.pt', '--device=cpu'],
     "is a folded checkpoint (fold.py's)", None),
    ('meta.json with a vocabulary beyond uint16', 'train.py', [*T, '--data_dir={root}/meta70k', '--vocab_size=70000'],
     'prepare it again with `python prepare_tinystories.py --vocab_size=512 --out_dir=', None),
    # tenth sweep
    ('a folder of TinyStories text as the data folder', 'train.py', [*TINY, '--data_dir={shared}/tinystories',
                                                                      '--out_dir={root}/fresh'],
     'not the tokens a prepare script writes: prepare it into a folder of its own, e.g. `python prepare_tinystories.py',
     None),
    ('a data folder a killed prepare left with only its first file', 'train.py',
     [*TINY, '--data_dir={root}/stopped_prepare', '--out_dir={root}/fresh'],
     'holds only tokenizer_train.txt, the file prepare_tinystories.py writes first: a prepare stopped part-way', None),
    ('evaluate: a folder of OpenWebText documents as the data folder', 'evaluate.py',
     ['--init_from={root}/hf50k', '--data_dir={shared}/openwebtext', '--device=cpu'],
     'e.g. `python prepare_owt.py --input_file=', OFFLINE),
    ("resume a run whose config.json is a folder", 'train.py', [*R, '--out_dir={root}/cfgdir'],
     'config.json is a folder where the run writes its config.json: remove or rename it', None),
    ("a scratch run over a log.jsonl that is a folder", 'train.py', [*T, '--out_dir={root}/logdir', '--overwrite'],
     'log.jsonl is a folder where the run writes its log.jsonl', None),
    ("fine-tune an HF Llama on another tokenizer's data of a larger vocabulary", 'train.py',
     [*T, *LLAMA_HF, '--n_kv_head=2', '--init_from={root}/llama', '--data_dir={root}/owt'],
     "has 512: the data is another tokenizer's; prepare it in the model's tokens with `python prepare_owt.py --tokenizer=",
     None),
    ("a fine-tune that names two of the model's shape fields wrong", 'train.py',
     [*T, *LLAMA_HF, '--init_from={root}/llama', '--n_layer=3'],
     'has n_layer=2, n_kv_head=2 but the config says n_layer=3, n_kv_head=0: set --n_layer=2 --n_kv_head=2', None),
    ('a tokenizer.model copied into a prepared folder', 'train.py', [*T, '--data_dir={root}/swaptok'],
     "tokenizer.model's sha256 is not the one meta.json records", None),
    ('sample: a prompt file named without FILE:', 'sample.py', ['--out_dir={root}/run', '--device=cpu',
                                                                '--start={root}/prompt.txt'],
     'names a file, but reads as the prompt text itself: --start=FILE:', None),
    ("sample: an HF folder whose config ties the head it holds apart", 'sample.py',
     ['--init_from={root}/llama_tiedhead', '--device=cpu'], 'holds an lm_head.weight of its own, which that would drop',
     OFFLINE),
    ("sample: an HF sequence classifier", 'sample.py', ['--init_from={root}/llama_cls', '--device=cpu'],
     'holds a LlamaForSequenceClassification, which has no language-model head', OFFLINE),
    ("memory: the repository's model.py as a config file", 'memory.py', ['model.py'],
     "model.py is one of the repository's scripts, not a config file", None),
    ("a script of the repository as train.py's config file", 'train.py', ['fold.py', *T],
     "fold.py is one of the repository's scripts, not a config file", None),
    ('plot: a run whose every loss is null', 'plot.py', ['{root}/nullloss', '--out_dir={root}/pl'],
     'logs no finite training loss', None),
    # eleventh sweep
    ('a config file that puts its settings in a dict', 'train.py', ['{root}/dict_cfg.py', *T],
     'puts its settings in a dict, config = dict(...): a config file assigns each at the top level', None),
    ('a resume mid-taper with max_iters below its step', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half', '--max_iters=16', '--device=cpu'],
     'is already at iter 20, so max_iters=16 leaves nothing to train', None),
    ('an HF offline switch that is neither on nor off', 'sample.py', ['--out_dir={root}/run', '--device=cpu'],
     'HF_HUB_OFFLINE=maybe is neither on nor off: set HF_HUB_OFFLINE=1', {'HF_HUB_OFFLINE': 'maybe'}),
    ('memory: an HF GPT2Model folder (no language-model head)', 'memory.py', ['--init_from={root}/gpt2base'],
     'holds a GPT2Model, which has no language-model head', OFFLINE),
    ('bench: a checkpoint given where config files go', 'bench.py', ['{root}/trun/ckpt.pt', '--device=cpu'],
     'a checkpoint is named with --ckpt=', None),
    ('sample: a checkpoint given where config files go', 'sample.py', ['{root}/trun/ckpt_folded.pt', '--device=cpu'],
     "a run's checkpoint is read with --out_dir=", None),
    ("meta.json's tokenizer hash emptied by hand", 'train.py', [*T, '--data_dir={root}/nullsha'],
     'gives tokenizer_sha256=None, not the sha256', None),
    ("meta.json naming tiktoken's encoding wrong", 'train.py', [*T, '--data_dir={root}/owtname', '--vocab_size=50257'],
     "names tiktoken's 'gpt-2' encoding", None),
    ("a checkpoint missing a weight", 'sample.py', ['--out_dir={root}/missingweight', '--device=cpu'],
     'its weights do not fit its own config (Missing key(s)', None),
    # twelfth sweep
    ('plot: a run whose every loss is NaN', 'plot.py', ['{root}/nanloss', '--out_dir={root}/pl'],
     'logs no finite training loss (every row', None),
    ('plot: an HF model folder among the runs', 'plot.py', ['{root}/run', '{root}/hf', '--out_dir={root}/pl'],
     'is an HF model (written by save_pretrained), not a train.py run', None),
    ('prepare_tinystories: every story on one line', 'prepare_tinystories.py',
     ['--input_file={root}/oneline.txt', '--vocab_size=512', '--out_dir={root}/ol'], 'reads as one story', None),
    ('a TORCH_LOGS name torch does not know', 'train.py', T, 'TORCH_LOGS=recompile names a log torch does not know',
     {'TORCH_LOGS': 'recompile'}),
    ("sample: an HF folder whose config.json an editor saved with a byte-order mark", 'sample.py',
     ['--init_from={root}/llama_bom', '--device=cpu'], 'starts with a byte-order mark', OFFLINE),
    # thirteenth sweep
    ('resume a checkpoint whose optimizer state is None', 'train.py', [*R, '--out_dir={root}/optnone'],
     'is not a whole training checkpoint (it has no optimizer: a file edited', None),
    ('a config file given to a resume that would change its run', 'train.py',
     ['config/quick_cpu.py', '--init_from=resume', '--out_dir={root}/run', '--device=cpu'],
     'a resume continues its run\'s own config, and config/quick_cpu.py would change its data_dir, vocab_size, n_layer',
     None),
    ('plot: a log whose rows were reversed by hand', 'plot.py', ['{root}/reversed', '--out_dir={root}/pl'],
     'goes back to iter 4 after iter 8: the rows are out of order', None),
    ('plot: an empty object appended to a log', 'plot.py', ['{root}/emptyrow', '--out_dir={root}/pl'],
     "it has neither 'lr' (a train row) nor 'val_loss' (an eval row)", None),
    # twenty-second sweep
    ('a boolean switched off the argparse way', 'train.py', [*T, '--no_compile'], 'switched off with --compile=False',
     None),
    ('bench: a boolean switched off in dashes', 'bench.py', ['--no-compile', '--device=cpu'],
     'switched off with --compile=False', None),
    ('a config file that switches a boolean off the argparse way', 'train.py', ['{root}/negated.py', *T],
     'switched off with --tied_head=False', None),
    ('an out_dir longer than the system takes a path', 'train.py', [*T, '--out_dir={root}/' + LONG],
     'the files the scripts write under it included', None),
    ('sample: a run folder longer than the system takes a path', 'sample.py', ['--out_dir={root}/' + LONG, '--device=cpu'],
     'the files the scripts write under it included', None),
    ('a data folder typed in one Unicode form and named on disk in the other', 'train.py',
     [*T, '--data_dir={root}/donn\u00e9es'], "but 'donne\\u0301es', the same letters in another Unicode form", None),
    ('fold: a folder whose --overwrite run was killed before its first checkpoint', 'fold.py',
     ['--out_dir={root}/killed_overwrite'], 'the run it replaced waits in', None),
    ('bench: the checkpoint of a folder whose --overwrite run was killed', 'bench.py',
     ['--ckpt={root}/killed_overwrite/ckpt.pt', '--device=cpu'], 'the run it replaced waits in', None),
    ('plot: a folder whose --overwrite run was killed (its log is the killed run\'s)', 'plot.py',
     ['{root}/killed_overwrite', '--out_dir={root}/pl'], 'the run it replaced waits in', None),
    ("fold: --ckpt naming another run's checkpoint, beside which nothing is written", 'fold.py',
     ['--out_dir={root}/run', '--ckpt={root}/trun/ckpt.pt'], 'fold.py writes beside the checkpoint it folds', None),
    ('memory: one config file named twice in a summary', 'memory.py',
     ['--summary', 'config/quick_cpu.py', 'config/../config/quick_cpu.py'], 'name each config file once', None),
    # twenty-third sweep
    ("reproduce: a smoke test into an --assets that holds a full reproduction's results", 'reproduce.py',
     ['--assets={root}/assets_full', '--out_root={root}/rp', '--seeds=1', '--settings=baseline,internal'],
     'holds the results of another reproduction (seeds 1337,1338,1339; ', None),
    ("a script run inside a Jupyter kernel, whose command line is the kernel's", 'train.py',
     ['-f', '{root}/jupyter/runtime/kernel-4f1c.json'], "this one is a Jupyter kernel's", None),
    ("sample: run inside a Jupyter kernel", 'sample.py', ['-f', '{root}/kernel-1.json'],
     "run `!python sample.py --key=value ...` in a cell", None),
    ("a run into a reproduction's results folder", 'train.py', [*T, '--out_dir={root}/assets_full'],
     "is a reproduction's results (it holds results.json", None),
    ("reproduce: its default results folder (under --out_root) holds a training run", 'reproduce.py',
     ['--out_root={root}/rr_root', '--seeds=1'], 'rr_root/results is a training run (it holds ckpt.pt', None),
    ('a config file that is a link to /dev/zero', 'train.py', ['{root}/zero.py', *T], 'is a device (/dev/zero), not a file',
     None),
    ('sample: FILE: with no file after it', 'sample.py', ['--out_dir={root}/run', '--device=cpu', '--start=FILE:'],
     '--start=FILE: names no file', None),
    ('plot: labels given empty', 'plot.py', ['{root}/run', '--labels=', '--out_dir={root}/pl_empty'],
     'labels takes comma-separated names', None),
    ('sample: a prompt file that is a link to /dev/zero', 'sample.py', ['--out_dir={root}/run', '--device=cpu',
                                                                        '--start=FILE:{root}/zero.txt'],
     'is a device (/dev/zero), not a text file', None),
    ("a run into the repository's config folder", 'train.py', [*T, '--out_dir=config'],
     "is the repository's config/ folder", None),
    ("plot: figures into the repository's docs folder", 'plot.py', ['{root}/run', '--out_dir=docs'],
     "is the repository's docs/ folder", None),
    ('a UTF-8 prompt under an ASCII locale', 'sample.py', ['--out_dir={root}/run', '--start=été'],
     "and this shell's locale (C) lets Python read ASCII alone: run with PYTHONUTF8=1",
     {'LC_ALL': 'C', 'PYTHONUTF8': '0', 'PYTHONCOERCECLOCALE': '0'}),
    ("a run into a folder inside the repository's docs folder", 'train.py', [*T, '--out_dir=docs/out-quick'],
     "is a folder inside the repository's docs/ folder, where the outputs would lie among its files: name a folder "
     "for them, e.g. --out_dir=out-quick", None),
    ("fold: an export into a folder inside config/", 'fold.py', ['--out_dir={root}/trun', '--export_hf=config/x/hf'],
     "is a folder inside the repository's config/ folder", None),
    ("the docs' '...' placeholder left in a folder", 'train.py', [*T, '--out_dir=...'],
     "holds '...', a placeholder left in from the docs", None),
    ("a placeholder of dots inside a path", 'plot.py', ['{root}/run', '--out_dir={root}/..../figs'],
     "holds '....', a placeholder left in from the docs", None),
    ('an HF Llama folder given to the GPT-2 FakeLN recipe', 'train.py',
     ['config/finetune_gpt2_s_fakeln.py', '--init_from={root}/llama', '--data_dir={root}/owt', '--device=cpu',
      '--out_dir={root}/fresh'], "is a llama model with rmsnorm: fine-tune it with a config written for llama models, "
     "such as config/finetune_smollm2_135m_alltaper.py", None),
    ('a run into the folder that holds the data folders', 'train.py', [*T, '--out_dir={root}/datas'],
     'holds the folders of other runs or data (ts)', None),
    ('reproduce: --stop_iter after --, which leaves every run unfinished', 'reproduce.py',
     ['--out_root={root}/rp', '--', '--stop_iter=4'], 'would leave every run unfinished', None),
    # twenty-fifth sweep
    ('a resume of a folder without a run, with a longer schedule', 'train.py',
     ['--init_from=resume', '--out_dir={root}/no_such_run', '--max_iters=48', '--lr_decay_iters=48'],
     'cannot resume: no checkpoint at', None),
    ("a resume of a run's log without its checkpoint, with a longer schedule", 'train.py',
     ['--init_from=resume', '--out_dir={root}/logonly', '--max_iters=60', '--warmup_iters=8'],
     'cannot resume: no checkpoint at', None),
    ("fold: the export into the run's own folder", 'fold.py', ['--out_dir={root}/trun', '--export_hf={root}/trun'],
     'holds the checkpoint being exported', None),
    ("fold: the export into the folder above the run", 'fold.py', ['--out_dir={root}/trun', '--export_hf={root}',
                                                                  '--out=ckpt_folded_2.pt'],
     'holds the checkpoint being exported', None),
    ('prepare_owt: two files apart by a comma', 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl,{root}/pile_1024.jsonl', '--out_dir={root}/o7'],
     'names 2 files apart by commas, and input_file takes one', None),
    ('prepare_tinystories: stories apart by blank lines, with <|endoftext|> lines added', 'prepare_tinystories.py',
     ['--input_file={root}/mixed_sep.txt', '--vocab_size=512', '--out_dir={root}/mixprep'],
     'separates stories by <|endoftext|> lines, but has', None),
    ('prepare_tinystories: a folder whose tokenizer was damaged, and its token files whole', 'prepare_tinystories.py',
     ['--input_file={shared}/tinystories/train_sample.txt', '--val_file={shared}/tinystories/valid_sample.txt',
      '--vocab_size=512', '--out_dir={root}/badspm'], 'tokenizer.model is not a SentencePiece model (cut short', None),
    ('evaluate: a TinyStories run, without a data folder', 'evaluate.py', ['--out_dir={root}/run', '--device=cpu'],
     'cannot evaluate a model with a sentencepiece tokenizer', None),
    ("gpu_check: a rerun of one step on the CPU into a GPU's report", 'gpu_check.py',
     ['--device=cpu', '--only=data', '--out_dir={root}/gc_h100'], 'holds the report of a check on NVIDIA H100', None),
    ("gpu_check: a CPU check into a GPU's report", 'gpu_check.py', ['--device=cpu', '--out_dir={root}/gc_h100'],
     'and this one runs on cpu', None),
    # twenty-sixth sweep
    ('memory: a summary whose one config splits over no rank count the others do', 'memory.py',
     ['--summary', 'config/finetune_gpt2_m_alltaper.py', 'config/finetune_gpt2_s_alltaper.py', '--nproc=8', '--fsdp=True'],
     'config/finetune_gpt2_m_alltaper.py: 8 ranks cannot split the global batch', None),
    ("fold: the folded checkpoint into another run's folder", 'fold.py', ['--out_dir={root}/trun', '--out={root}/run/mine.pt'],
     'the folder of another run (it holds ckpt.pt)', None),
    ('a resume given a config file whose taper_start the run has passed', 'train.py',
     ['{root}/sets_taper.py', '--init_from=resume', '--out_dir={root}/half_jq'],
     'sets_taper.py, which a resume does not need) at iter', None),
    # twenty-ninth sweep
    ('fold: --ckpt a path from --out_dir to no file', 'fold.py', ['--out_dir={root}/trun', '--ckpt=../nowhere/ckpt.pt'],
     'was looked for: name a file in --out_dir, or pass the folder of the run', None),
    ('sample: a run whose ckpt.pt was removed and its folded model kept', 'sample.py',
     ['--out_dir={root}/foldedkept', '--device=cpu'], 'holds the folded model, ckpt_folded.pt, but no ckpt.pt: pass --ckpt=ckpt_folded.pt', None),
    ('evaluate: a run whose ckpt.pt was removed and its folded model kept', 'evaluate.py',
     ['--out_dir={root}/foldedkept', '--device=cpu'], 'pass --ckpt=ckpt_folded.pt', None),
    ('bench: a run whose ckpt.pt was removed and its folded model kept', 'bench.py',
     ['--ckpt={root}/foldedkept/ckpt.pt', '--device=cpu'], 'foldedkept/ckpt_folded.pt', None),
    ('fold: a run whose ckpt.pt was removed and its folded model kept', 'fold.py', ['--out_dir={root}/foldedkept'],
     "folding or exporting needs the run's ckpt.pt, which is gone", None),
    ('fold: the folded model of a run whose ckpt.pt is gone', 'fold.py',
     ['--out_dir={root}/foldedkept', '--ckpt=ckpt_folded.pt', '--export_hf={root}/fo_export'], 'sample or score it as it is (sample.py --out_dir=', None),
    ('resume: the checkpoint renamed to a name of its own', 'train.py', ['--init_from=resume', '--out_dir={root}/backuprun'],
     'holds ckpt_backup.pt: a resume reads ckpt.pt, so rename ckpt_backup.pt to ckpt.pt', None),
    ('diagnose: the checkpoint renamed to a name of its own', 'diagnose.py', ['--out_dir={root}/backuprun'],
     'holds ckpt_backup.pt: pass --ckpt=ckpt_backup.pt', None),
    ('plot: a finished run whose log was emptied', 'plot.py', ['{root}/emptylog', '--out_dir={root}/pl_empty'],
     "though the run's checkpoint is at iter 8: its log was emptied or replaced since", None),
    ('fine-tune: a GPT-2 config on a Llama with grouped key/value heads', 'train.py',
     ['config/finetune_gpt2_s_alltaper.py', '--init_from={root}/llama', '--data_dir={data}', '--out_dir={root}/ft_gqa',
      '--device=cpu', '--block_size=64', '--mask_eot_targets=False', '--n_head=2', '--n_embd=32'],  # 2 heads: as many as
     # the Llama's key/value heads, so that n_kv_head=0 (n_head's) matches them until n_head is set as said
     "--n_kv_head=2 --mlp_hidden=96 --tied_head=False (the config's shape must be the model's), or start from a config "
     "written for llama models", None),
    ("fine-tune: GPT-2's config on data in a SentencePiece vocabulary", 'train.py',
     ['config/finetune_gpt2_s_alltaper.py', *GPT2_HF[:1], '--n_layer=2', '--n_head=2', '--n_embd=32', '--data_dir={data}',
      '--out_dir={root}/ft_sp', '--device=cpu', '--block_size=64'], 'holds tokens of another tokenizer than', None),
    ('sample: a prompt the shell split at its spaces', 'sample.py', ['--out_dir={root}/run', '--start=Once', 'upon', 'a', 'time'],
     "the shell splits a value at its spaces unless it is quoted, so quote it whole: --start='Once upon a time'", None),
    ('train: a run name the shell split', 'train.py', [*T, '--wandb_run_name=first', 'try'],
     "--wandb_run_name=first is followed by 'try'", None),
    ('fold: a run folder given without its flag', 'fold.py', ['{root}/trun'],
     'takes flags written --key=value (`python fold.py --help` lists them); a folder is named with a flag, e.g. --out_dir=',
     None),
    ('evaluate: a data folder given without its flag', 'evaluate.py', ['--device=cpu', '{data}'],
     'is a folder, not a config file (a file such as config/taper_internal_512.py); a folder is named with a flag, e.g. '
     '--data_dir=', None),
    ('prepare_owt: the input file given without its flag', 'prepare_owt.py', ['{shared}/openwebtext/sample.jsonl'],
     'a file is named with a flag, e.g. --input_file=', None),
    ('prepare_owt: a GPT-2 model folder saved without its tokenizer as --tokenizer', 'prepare_owt.py',
     [*OWT, '--tokenizer={root}/hf'], "whose tokens are GPT-2's BPE, which prepare_owt.py writes without --tokenizer", None),
    ('prepare_owt: a Llama model folder saved without its tokenizer as --tokenizer', 'prepare_owt.py',
     [*OWT, '--tokenizer={root}/llama'], "pass the folder the model's tokenizer was saved to, or its hub name", None),
    ("prepare_owt: the hub's Parquet form of the text", 'prepare_owt.py', ['--input_file={root}/owt.parquet', '--out_dir={root}/pq'],
     "is a Parquet file, not text: input_file takes jsonl, one {\"text\": ...} per line; convert it first (`python -c "
     "\"import pandas; pandas.read_parquet(", None),
    ('prepare_tinystories: a Parquet file as the text', 'prepare_tinystories.py',
     ['--input_file={root}/owt.parquet', '--vocab_size=512', '--out_dir={root}/pq'],
     'is a Parquet file, not text: input_file takes plain text, documents split by blank lines', None),
    ('sample: a token file as the prompt file', 'sample.py', ['--out_dir={root}/run', '--start=FILE:{data}/train.bin'],
     'it is binary (a token file, a checkpoint?), not text; pass a UTF-8 text file', None),
    ('prepare_tinystories: UTF-16 text without its byte-order mark', 'prepare_tinystories.py',
     ['--input_file={root}/utf16le.txt', '--vocab_size=512', '--out_dir={root}/p16'],
     'is UTF-16 text without a byte-order mark: convert it first (`iconv -f utf-16le -t utf-8', None),
    # thirtieth sweep
    ("memory: a run's folder as a bare argument", 'memory.py', ['{root}/run'],
     "a run's plan is `python train.py --init_from=resume --out_dir=", None),
    ("train: a run's folder as a bare argument", 'train.py', ['{root}/run'],
     "a run's folder is continued with --init_from=resume --out_dir=", None),
    ("bench: a run's folder as a bare argument", 'bench.py', ['{root}/run', '--device=cpu'],
     "a run's checkpoint is named with --ckpt=", None),
    ('a resume that ends the run before its taper does', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half', '--max_iters=24', '--device=cpu'],
     "a resume that ends the run sooner moves taper_end as well, which changes the run's schedule: --taper_end=24 "
     "--reschedule", None),
    ('train: a folder inside the data folder as data_dir', 'train.py', [*TINY, '--data_dir={data}/tokenizer',
                                                                        '--out_dir={root}/fresh'],
     '/tokenizer lies inside the data folder', None),
    # thirty-first sweep
    ("evaluate: a TinyStories run's HF export on its TinyStories data", 'evaluate.py',
     ['--init_from={root}/allrun_hf', '--data_dir={data}', '--device=cpu'],
     "(prepare_owt.py's): diagnose.py --out_dir=", None),
    ("evaluate: a TinyStories run's HF export: the advice names its run", 'evaluate.py',
     ['--init_from={root}/allrun_hf', '--data_dir={data}', '--device=cpu'], "/allrun scores the run ", None),
    ("sample: an HF folder's weights file as the model", 'sample.py', ['--init_from={root}/llama/model.safetensors',
                                                                       '--device=cpu'],
     'is one file of the save_pretrained folder /', None),
    ("train: an HF folder's config.json as the model", 'train.py', [*T, *GPT2_HF, '--init_from={root}/hf/config.json'],
     'is one file of the save_pretrained folder /', None),
    ('evaluate: a text file as the HF model', 'evaluate.py', ['--init_from={root}/stories.txt', '--device=cpu'],
     'pass the folder that holds its config.json and weights, or a hub name such as gpt2', None),
    ("sample: a run's folded checkpoint file as the HF model", 'sample.py',
     ['--init_from={root}/trun/ckpt_folded.pt', '--device=cpu'],
     "names a checkpoint file, and sample.py reads a run's checkpoint from its folder: --out_dir=", None),
    ("evaluate: a run's checkpoint file as the HF model", 'evaluate.py', ['--init_from={root}/run/ckpt.pt', '--device=cpu'],
     "/run", None),
    ("bench: a run's folded checkpoint file as the HF model", 'bench.py',
     ['--init_from={root}/trun/ckpt_folded.pt', '--device=cpu'], "/trun/ckpt.pt", None),
    ("train: a run's checkpoint file as the HF model, the data not there", 'train.py',
     [*TINY, '--init_from={root}/run/ckpt.pt', '--data_dir={root}/nodata', '--out_dir={root}/fresh'],
     "is a checkpoint file, not a folder written by save_pretrained: a new run starts from an HF folder (fold.py "
     "exports only All-Taper and FakeLN runs, and this run keeps a norm)", None),
    ("train: an All-Taper run's checkpoint file as the HF model", 'train.py',
     [*TINY, '--init_from={root}/allrun/ckpt.pt', '--data_dir={root}/nodata', '--out_dir={root}/fresh'],
     "is a checkpoint file, not a folder written by save_pretrained: a new run starts from an HF folder, which "
     "`python fold.py --out_dir=", None),
    ("train: a run's folder as the HF model, the data not there", 'train.py',
     [*TINY, '--init_from={root}/run', '--data_dir={root}/nodata', '--out_dir={root}/fresh'],
     "is a run of this repository (it holds ckpt.pt), not a folder written by save_pretrained", None),
    ('train: the folder of data folders as data_dir', 'train.py',
     [*TINY, '--data_dir={root}/datafolders', '--out_dir={root}/fresh'], "/datafolders/ts512, in the model's tokens", None),
    ('evaluate: the folder of data folders as data_dir', 'evaluate.py',
     ['--init_from={root}/hf', '--data_dir={root}/datafolders', '--device=cpu'], "/datafolders/owt, in the model's tokens",
     None),
    ('diagnose: the folder of data folders as data_dir', 'diagnose.py',
     ['--out_dir={root}/run', '--data_dir={root}/datafolders'], "/datafolders/ts512, in the model's tokens", None),
    ('sample: a data folder as the run', 'sample.py', ['--out_dir={data}', '--device=cpu'],
     "is a data folder (prepare's tokens and meta.json), not a run's: pass --out_dir=<a run's folder>", None),
    ('fold: a data folder as the run', 'fold.py', ['--out_dir={data}'], "is a data folder (prepare's tokens", None),
    ("bench: a checkpoint named in a data folder", 'bench.py', ['--ckpt={data}/ckpt.pt', '--device=cpu'],
     "not a run's: pass --ckpt=<a run's folder>/ckpt.pt", None),
    # thirty-second sweep
    ("evaluate: a GPT-2 fine-tune's export on TinyStories data", 'evaluate.py',
     ['--init_from={root}/gpt2export', '--data_dir={data}', '--device=cpu'],
     "(prepare_owt.py's): prepare it with `python prepare_owt.py`, or pass the --data_dir it wrote", QUIET),
    ("train: a Baseline config made another setting by a flag, into the Baseline's folder", 'train.py',
     ['config/baseline_64.py', '--taper=internal', '--device=cpu'],
     "--taper=internal makes config/baseline_64.py's run (taper='none') another setting, and the file's "
     "out_dir=out-baseline-64 names its own: pass --out_dir=", None),
    ("train: an ablation by --aux_loss keeps its config's folder (refused only for its missing data)", 'train.py',
     ['config/taper_internal_64.py', '--aux_loss=none', '--data_dir={root}/nodata', '--device=cpu'],
     'nodata/train.bin not found', None),
    ("memory: a run's config.json as the config file", 'memory.py', ['{root}/run/config.json'],
     "a run's plan is `python train.py --init_from=resume --out_dir=", None),
    ("train: a GPT-2 fine-tune's run folder as the model of a new fine-tune", 'train.py',
     ['config/finetune_gpt2_s_fakeln.py', '--init_from={root}/gpt2ft', '--out_dir={root}/fresh', '--device=cpu'],
     "/gpt2ft (copy the folder first to go on in a new one); a new fine-tune starts from an HF model, e.g. "
     "--init_from=", None),
    ("bench: a GPT-2 run trained from scratch, as the HF model", 'bench.py', ['--init_from={root}/gpt2scratch',
     '--device=cpu'], 'which a run trained from scratch is not (train with --arch=llama to time one)', None),
    ("bench: a Baseline run's folder as the HF model", 'bench.py', ['--init_from={root}/run', '--device=cpu'],
     "not a tapered one past its taper start, which is what bench.py times", None),
    ("bench: a tapered run's folder as the HF model", 'bench.py', ['--init_from={root}/trun', '--device=cpu'],
     "is a run of this repository, not an HF model: time its checkpoint with --ckpt=", None),
    ("bench: a GPT-2 fine-tune's run folder as the HF model", 'bench.py', ['--init_from={root}/gpt2ft', '--device=cpu'],
     "not an HF model, and holds a GPT-2-layout model: bench.py times runs of the Llama layout (TinyStories runs), "
     "and a GPT-2 only as an HF model, e.g. --init_from=", None),
    # A symbolic link to nothing, wherever a script meets one, is said as such: not "not found" (which advises
    # preparing or training again), and not offered back as "did you mean" the same path.
    ("evaluate: the data folder's val.bin a link to nothing", 'evaluate.py',
     ['--init_from={root}/allrun_hf', '--data_dir={root}/deadval', '--device=cpu'],
     "deadval/val.bin is a broken symbolic link (to ", None),
    ("train: the data folder's val.bin a link to nothing", 'train.py', [*T, '--data_dir={root}/deadval'],
     "deadval/val.bin is a broken symbolic link (to ", None),
    ("plot: a run folder that links to nothing", 'plot.py', ['{root}/deadlink', '--out_dir={root}/plots'],
     "deadlink is a broken symbolic link (to ", None),
    ("memory: an HF folder that links to nothing", 'memory.py', ['--init_from={root}/deadlink'],
     "deadlink is a broken symbolic link (to ", None),
    ("prepare_owt: a tokenizer folder that links to nothing", 'prepare_owt.py', [*OWT, '--tokenizer={root}/deadlink'],
     "deadlink is a broken symbolic link (to ", None),
    ("prepare_tinystories: a text file in a folder that links to nothing", 'prepare_tinystories.py',
     ['--input_file={root}/deadlink/stories.txt', '--out_dir={root}/t7', '--vocab_size=512'],
     "/deadlink/stories.txt lies in ", None),
    ("diagnose: the figure in a folder that links to nothing", 'diagnose.py',
     ['--out_dir={root}/run', '--plot={root}/deadlink/residual.png'], "a broken symbolic link", None),
    # A Python list for a flag that takes one path (the list flags read it as their items)
    ("prepare_owt: a one-item Python list for its one input file", 'prepare_owt.py',
     ["--input_file=['{shared}/openwebtext/sample.jsonl']", '--out_dir={root}/o7'],
     "is a Python list, and input_file takes one path, not a list: pass --input_file=", None),
    ("prepare_owt: a two-item Python list for its one input file", 'prepare_owt.py',
     ["--input_file=('{shared}/openwebtext/sample.jsonl', '{root}/other.jsonl')", '--out_dir={root}/o7'],
     "is a Python list of 2 paths, and input_file takes one: join them into one first", None),
    # a file to write (path='outfile') gets the layer's checks of a path to write
    ("diagnose: the docs' '...' placeholder left in the figure's path", 'diagnose.py',
     ['--out_dir={root}/run', '--plot=.../residual.png'], "holds '...', a placeholder left in from the docs", None),
    ("diagnose: the figure's path ending in a space", 'diagnose.py',
     ['--out_dir={root}/run', '--plot={root}/residual.png '], "a space, tab or line break: name the file without it", None),
    ("diagnose: an empty figure path", 'diagnose.py', ['--out_dir={root}/run', '--plot='],
     "plot is empty: name the file to write, or drop --plot", None),
    # a model no machine can hold: a weight past what torch can size, said before anything is built
    ("memory: a width with three zeros too many", 'memory.py', ['config/quick_cpu.py', '--n_embd=1000000000'],
     "whose float32 weights alone would take", None),
    ("bench: a width with three zeros too many", 'bench.py', ['--n_embd=1000000000', '--device=cpu'],
     "whose float32 weights alone would take", None),
    ("train: a vocabulary and width whose embedding no machine holds", 'train.py',
     [*T, '--vocab_size=4000000000', '--n_embd=400000000'], "far past any machine's memory: change the flags that set them", None),
    ("memory: a layer count with many zeros too many", 'memory.py', ['config/quick_cpu.py', '--n_layer=1000000000000000'],
     "make a model of about", None),
    ("train: a layer count with many zeros too many", 'train.py', [*T, '--n_layer=1000000000000'], "make a model of about", None),
    ("bench: a layer count with many zeros too many", 'bench.py', ['--n_layer=1000000000000', '--device=cpu'],
     "far past any machine's memory: pick a smaller model", None),
    ("bench: a vocabulary with many zeros too many", 'bench.py', ['--vocab_size=1000000000000000000', '--device=cpu'],
     "far past any machine's memory: pick a smaller model", None),
    # a resume rewrites config.json, keeping keys a user added: one it cannot read is refused, not replaced
    ("resume: config.json left invalid JSON by a hand edit", 'train.py', [*R, '--out_dir={root}/badjson'],
     "config.json is not valid JSON (line", None),
    ("resume: config.json replaced by another file's JSON", 'train.py', [*R, '--out_dir={root}/foreignjson'],
     "config.json is not a run's config (it lacks init_from, taper or out_dir)", None),
    ("evaluate: a data folder that links to nothing", 'evaluate.py',
     ['--init_from={root}/allrun_hf', '--data_dir={root}/deadlink', '--device=cpu'],
     "/deadlink is a broken symbolic link (to ", None),
    ("sample: a prompt file in a folder that links to nothing", 'sample.py',
     ['--out_dir={root}/run', '--start=FILE:{root}/deadlink/prompt.txt', '--device=cpu'], "a broken symbolic link", None),
    # prepare_owt.py's tokenizer: a file, or a folder transformers cannot read (a config.json field it refuses)
    ("prepare_owt: a run's checkpoint as the tokenizer", 'prepare_owt.py', [*OWT, '--tokenizer={root}/run/ckpt.pt'],
     "is a file of weights, which hold no tokenizer, not a tokenizer's folder", None),
    ("prepare_owt: a tokenizer whose model's config.json gives vocab_size NaN", 'prepare_owt.py',
     [*OWT, '--tokenizer={root}/llama_toknan'], "fix what it names in that folder's config.json or tokenizer files", OFFLINE),
    # YAML's null and booleans in a config file: advised as the flag takes them
    ("train: `aux_loss: null` in a config file", 'train.py', ['{root}/yaml_null.py', '--memory_plan'],
     "`aux_loss: null` assigns nothing (a YAML habit?): write `aux_loss = 'none'`", None),
    ("train: `init_from: null` in a config file", 'train.py', ['{root}/yaml_init.py', '--memory_plan'],
     "`init_from: null` assigns nothing (a YAML habit?): drop the line for init_from's default ('scratch')", None),
    ("train: `compile: yes` in a config file", 'train.py', ['{root}/yaml_yes.py', '--memory_plan'],
     "`compile: yes` assigns nothing (a YAML habit?): write `compile = True`", None),
    # plot.py's run folders as a Python list, where they are its arguments
    ("plot: the run folders as one Python list", 'plot.py', ["['{root}/run', '{root}/trun']", '--out_dir={root}/plots'],
     "is a Python list: name each of the run_dirs as an argument of its own", None),
    ("plot: the run folders joined by a comma", 'plot.py', ['{root}/run,{root}/trun', '--out_dir={root}/plots'],
     "names 2 paths in one argument: name each of the run_dirs as an argument of its own", None),
    ("plot: the run folders quoted as one argument", 'plot.py', ['{root}/run {root}/trun', '--out_dir={root}/plots'],
     "names 2 paths in one argument: name each of the run_dirs as an argument of its own", None),
    ("resume: config.json a link to nothing", 'train.py', [*R, '--out_dir={root}/linkjson'],
     "config.json is a broken symbolic link (to ", None),
    # a resume reads its log before writing it again: rows out of order, or the checkpoint's row edited, are said
    ("resume: a log appended to itself (cat log >> log)", 'train.py', [*R, '--out_dir={root}/duplog'],
     "goes back to iter 0 after iter 4: the rows are out of order (a log appended to itself, or sorted by hand?)", None),
    ("resume: the checkpoint's evaluation row rounded by hand", 'train.py', [*R, '--out_dir={root}/roundlog'],
     "is not among its rows (its row of iter 8 gives val_loss=", None),
    ("resume: a run folder whose checkpoint was removed, its log and config kept", 'train.py', [*R, '--out_dir={root}/nockpt'],
     "or start the run again with --init_from=scratch --overwrite (which replaces its log.jsonl and config.json)", None),
    ("train: an Internal-Taper run's checkpoint as the model to fine-tune", 'train.py',
     [*T, '--init_from={root}/trun/ckpt.pt'], "a new run starts from an HF folder (fold.py exports only All-Taper and "
     "FakeLN runs, and this run keeps a norm), or continue that run in a copy of its folder", None),
    ("memory: a flag's name cut short", 'memory.py', ['config/quick_cpu.py', '--gpu=80'], "did you mean 'gpu_gb'?", None),
    # sweep 45: the paper's names of the settings, several paths in one value, a size set by block_size
    ("reproduce: a setting by the paper's name", 'reproduce.py', ['--settings=baseline,internal,all-taper',
                                                                 '--out_root={root}/rep'], "(did you mean 'all'?)", None),
    ("train: the taper by the paper's name", 'train.py', [*T, '--taper=All-Taper'], "(did you mean 'all'?)", None),
    ("train: Baseline as the taper", 'train.py', [*T, '--taper=Baseline'], "(did you mean 'none'?)", None),
    ("plot: the run folders joined by a colon, as PATH is written", 'plot.py',
     ['{root}/run:{root}/trun', '--out_dir={root}/plots'], "names 2 paths in one argument", None),
    ("diagnose: two run folders joined by a comma", 'diagnose.py', ['--out_dir={root}/run,{root}/trun'],
     "names 2 paths apart by commas, and out_dir takes one: name one, --out_dir=", None),
    ("evaluate: two run folders in one quoted --out_dir", 'evaluate.py', ['--out_dir={root}/run {root}/trun'],
     "names 2 paths apart by spaces, and out_dir takes one: name one, --out_dir=", None),
    ("train: two existing run folders as one out_dir", 'train.py', [*TINY, '--data_dir={data}', '--out_dir={root}/run,{root}/trun'],
     "names 2 paths apart by commas, and out_dir takes one", None),
    ("fold: two run folders joined by a semicolon (quoted)", 'fold.py', ['--out_dir={root}/run;{root}/trun'],
     "names 2 paths apart by semicolons, and out_dir takes one", None),
    ("prepare_tinystories: two text files joined by a colon", 'prepare_tinystories.py',
     ['--input_file={root}/small.txt:{root}/one_story.txt', '--out_dir={root}/colonprep'],
     "names 2 paths apart by colons: separate them with commas, --input_file=", None),
    ("prepare_owt: two jsonl files joined by a semicolon", 'prepare_owt.py',
     ['--input_file={shared}/openwebtext/sample.jsonl;{root}/pile_1024.jsonl', '--out_dir={root}/o8'],
     "names 2 files apart by semicolons, and input_file takes one: join them", None),
    ("train: a context length with many zeros too many", 'train.py', [*T, '--block_size=1000000000000000'],
     "block_size=1000000000000000 with n_embd=", None),
    ("bench: a context length with many zeros too many", 'bench.py', ['--block_size=1000000000000000', '--device=cpu'],
     "block_size=1000000000000000 with n_embd=", None),
    ("train: a Llama MLP width with many zeros too many", 'train.py', [*T, '--arch=llama', '--mlp_hidden=1000000000000'],
     "mlp_hidden=1000000000000 with n_embd=", None),
    ("resume: a run folder whose checkpoint was removed, its folded checkpoint kept", 'train.py',
     [*R, '--out_dir={root}/foldonly'], "or start the run again in a new folder, --init_from=scratch "
     "--out_dir=<a new folder>", None),
    ("resume: a fine-tune's folder whose checkpoint was removed", 'train.py', [*R, '--out_dir={root}/ftnockpt'],
     "/llama --overwrite (which replaces its log.jsonl and config.json)", None),
    ("bench: two checkpoints in one --ckpt", 'bench.py', ['--ckpt={root}/run/ckpt.pt,{root}/trun/ckpt.pt', '--device=cpu'],
     "names 2 paths apart by commas, and ckpt takes one", None),
    ("sample: two checkpoints of the run in one --ckpt", 'sample.py',
     ['--out_dir={root}/trun', '--ckpt=ckpt.pt,ckpt_folded.pt', '--device=cpu'],
     "names 2 checkpoints in one: name one, --ckpt=ckpt.pt", None),
    ("train: two HF folders in one --init_from", 'train.py', [*T, '--init_from={root}/llama:{root}/llama_mha'],
     "names 2 paths apart by colons, and init_from takes one", None),
    ("resume: log.jsonl a link to nothing", 'train.py', [*R, '--out_dir={root}/deadlog'],
     "log.jsonl is a broken symbolic link (to ", None),
    ("train: a type where a config file's value goes (`learning_rate: float`)", 'train.py', ['{root}/ann_float.py', *T],
     "give learning_rate a value, which is a number, above 0, e.g. `learning_rate = ", None),
    ("memory: a type where a text flag's value goes (`taper: str`)", 'memory.py', ['{root}/ann_str.py'],
     "give taper a value, which is one of 'none', 'internal', 'all', e.g. `taper = '", None),
    ("train: a type where a choice's value goes (`norm: str`)", 'train.py', ['{root}/ann_norm.py', *T],
     "give norm a value, which is one of 'rmsnorm', 'layernorm', 'dyt', e.g. `norm = '", None),
    ("train: a YAML line with a choice misspelt (`taper: Internal`)", 'train.py', ['{root}/ann_choice.py', *T],
     "e.g. `taper = 'internal'`", None),
    ("train: a type where a path's value goes (`data_dir: str`)", 'train.py', ['{root}/ann_path.py', *T],
     "give data_dir a value, which is text, e.g. `data_dir = '", None),
    ("sample: a checkpoint as the prompt file", 'sample.py', ['--out_dir={root}/run', '--start=FILE:{root}/run/ckpt.pt',
                                                             '--device=cpu'],
     "ckpt.pt is a PyTorch checkpoint (weights), not text: pass a UTF-8 text file", None),
    ("prepare_tinystories: a checkpoint as the text", 'prepare_tinystories.py',
     ['--input_file={root}/run/ckpt.pt', '--out_dir={root}/ckprep'], "ckpt.pt is a PyTorch checkpoint (weights), not "
     "text: input_file takes plain text", None),
    ("resume: a stop_iter the finished run has passed", 'train.py', [*R, '--stop_iter=4'],
     "raise it, or pass --eval_only instead of --stop_iter to evaluate the checkpoint", None),
    ("train: the README's config named without its folder", 'train.py', ['quick_cpu.py', '--memory_plan'],
     "config/quick_cpu.py?", None),
    ("train: a config named without its folder and .py", 'train.py', ['taper_internal_512', '--memory_plan'],
     "config/taper_internal_512.py?", None),
    ("train: `tied_head = yes` in a config file", 'train.py', ['{root}/yaml_tied.py', *T],
     "yes is YAML's word for True, which Python does not know: write True", None),
    ("train: a number written with a leading zero in a config file", 'train.py', ['{root}/octal.py', *T],
     "016 has a leading zero, which Python does not take in a number: write 16", None),
    ("prepare_tinystories: Polish text in ISO-8859-2", 'prepare_tinystories.py',
     ['--input_file={root}/pl_iso.txt', '--out_dir={root}/plprep'], "iconv -f iso-8859-2 -t utf-8", None),
    ("prepare_tinystories: German text in DOS code page 850", 'prepare_tinystories.py',
     ['--input_file={root}/de_dos.txt', '--out_dir={root}/deprep'], "iconv -f cp850 -t utf-8", None),
    ("reproduce: one seed twice, once with a leading zero", 'reproduce.py', ['--seeds=1,01', '--out_root={root}/rep'],
     "seeds lists 1 more than once", None),
    # a config.json number JSON reads as infinite or NaN
    ("train: an HF folder whose rope_theta is Infinity", 'train.py',
     ['--init_from={root}/llama_thetainf', *LLAMA_HF[:4], '--data_dir={data}', '--out_dir={root}/fresh'],
     "config.json gives rope_theta=inf, not a finite number", OFFLINE),
    ("sample: an HF folder whose rms_norm_eps is NaN", 'sample.py', ['--init_from={root}/llama_epsnan', '--device=cpu'],
     "config.json gives rms_norm_eps=nan, not a finite number", OFFLINE),
    # an export whose config.json lost both its record and its eps: the weights still say what it is
    ("sample: an export whose config.json was cleaned of its record and eps", 'sample.py',
     ['--init_from={root}/stripped_hf', '--device=cpu', '--max_new_tokens=2'],
     "holds fold.py's norm-free export (every internal norm's weight is", OFFLINE),
    ("evaluate: an export whose config.json was cleaned of its record and eps", 'evaluate.py',
     ['--init_from={root}/stripped_hf', '--data_dir={data}', '--device=cpu'],
     "holds fold.py's norm-free export (every internal norm's weight is", OFFLINE),
]


def digest(root):
    return {os.path.join(d, f): hashlib.sha256(open(os.path.join(d, f), 'rb').read()).hexdigest()
            for d, _, files in os.walk(root) for f in files if os.path.isfile(os.path.join(d, f))}  # not /dev/zero


def make_workspace(root, data_dir):
    """A finished Baseline run, data folders with one flaw each, and bad text, jsonl and config files."""
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root}/run', '--taper=none', '--aux_loss=none',
        '--max_iters=8', '--warmup_iters=2', '--lr_decay_iters=8', '--eval_interval=4')
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root}/trun')  # Internal-Taper, at g = 0
    run('fold.py', f'--out_dir={root}/trun')
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root}/allrun', '--taper=all', '--max_iters=8',
        '--warmup_iters=2', '--taper_start=2', '--taper_end=6', '--lr_decay_iters=8', '--eval_interval=4')
    run('fold.py', f'--out_dir={root}/allrun', f'--export_hf={root}/allrun_hf')  # a TinyStories model as HF
    os.symlink('allrun_hf', f'{root}/latest_hf')  # a link to the export, e.g. latest -> exports_v1
    shutil.copytree(f'{root}/allrun', f'{root}/putback')  # its ckpt.pt then replaced by an earlier step's
    shutil.copytree(f'{root}/allrun_hf', f'{root}/putback_hf')
    for name, eps in (('stripped_hf', 1e-5), ('unrecorded_hf', None)):  # the record removed; the eps too, or kept
        shutil.copytree(f'{root}/allrun_hf', f'{root}/{name}')
        config = json.load(open(f'{root}/{name}/config.json'))
        del config['tapernorm_export']
        field = 'rms_norm_eps' if 'rms_norm_eps' in config else 'layer_norm_epsilon'
        config[field] = eps or config[field]
        json.dump(config, open(f'{root}/{name}/config.json', 'w'))
    earlier = torch.load(f'{root}/putback/ckpt.pt', weights_only=True)
    os.makedirs(f'{root}/packaged')  # a folded checkpoint shared alone, under the name ckpt.pt
    shutil.copy(f'{root}/allrun/ckpt_folded.pt', f'{root}/packaged/ckpt.pt')
    torch.save(earlier | {'iter_num': earlier['iter_num'] - 4}, f'{root}/putback/ckpt.pt')
    os.makedirs(f'{root}/nanrun')
    ckpt = torch.load(f'{root}/trun/ckpt.pt', weights_only=True)
    ckpt['model']['transformer.h.0.mlp.w1.weight'] *= float('nan')
    torch.save(ckpt, f'{root}/nanrun/ckpt.pt')
    open(f'{root}/cfg.json', 'w').write('{"max_iters": 12}\n')
    shutil.copytree(f'{root}/run', f'{root}/badlog')
    lines = open(f'{root}/badlog/log.jsonl').read().splitlines()
    lines[1] = lines[1][:10]
    open(f'{root}/badlog/log.jsonl', 'w').write('\n'.join(lines) + '\n')
    shutil.copytree(f'{root}/run', f'{root}/tornlog')  # its log's last line cut short by a kill as it was written
    whole = open(f'{root}/tornlog/log.jsonl').read()
    open(f'{root}/tornlog/log.jsonl', 'w').write(whole[:len(whole) - 20])
    os.makedirs(f'{root}/junk')
    open(f'{root}/junk/ckpt.pt', 'wb').write(b'not a checkpoint')
    train = np.fromfile(f'{data_dir}/train.bin', dtype=np.uint16)
    flaws = {'empty': b'', 'odd': train.tobytes() + b'\0',
             'garbage': np.random.default_rng(0).integers(0, 2**16, len(train), dtype=np.uint16).tobytes()}
    for name, train_bytes in flaws.items():
        shutil.copytree(data_dir, f'{root}/{name}')
        open(f'{root}/{name}/train.bin', 'wb').write(train_bytes)
    shutil.copytree(data_dir, f'{root}/odd32')
    open(f'{root}/odd32/train.bin', 'wb').write(train.astype(np.uint32).tobytes() + b'\0\0')
    shutil.copytree(data_dir, f'{root}/baddtype')
    for name, dtype in (('odd32', 'uint32'), ('baddtype', 'int8')):
        meta = json.load(open(f'{root}/{name}/meta.json'))
        json.dump(meta | {'dtype': dtype}, open(f'{root}/{name}/meta.json', 'w'))
    shutil.copytree(data_dir, f'{root}/shortval')
    np.fromfile(f'{data_dir}/val.bin', dtype=np.uint16)[:100].tofile(f'{root}/shortval/val.bin')
    json.dump(json.load(open(f'{data_dir}/meta.json')) | {'val_tokens': 100}, open(f'{root}/shortval/meta.json', 'w'))
    shutil.copytree(data_dir, f'{root}/badmeta')
    open(f'{root}/badmeta/meta.json', 'w').write('{"vocab_size": 512,')
    shutil.copytree(f'{root}/trun', f'{root}/editedlr')  # its cosine lengthened by hand in config.json
    json.dump(json.load(open(f'{root}/trun/config.json')) | {'lr_decay_iters': 60}, open(f'{root}/editedlr/config.json', 'w'))
    shutil.copytree(f'{root}/run', f'{root}/editedcfg')  # finished at 8; config.json raised by hand to go on
    json.dump(json.load(open(f'{root}/run/config.json')) | {'max_iters': 12}, open(f'{root}/editedcfg/config.json', 'w'))
    shutil.copytree(f'{root}/run', f'{root}/noiter')
    lines = open(f'{root}/noiter/log.jsonl').read().splitlines()
    lines[1] = json.dumps({k: v for k, v in json.loads(lines[1]).items() if k != 'iter'})
    open(f'{root}/noiter/log.jsonl', 'w').write('\n'.join(lines) + '\n')
    os.makedirs(f'{root}/logonly')
    shutil.copy(f'{root}/run/log.jsonl', f'{root}/logonly/log.jsonl')
    shutil.copytree(data_dir, f'{root}/strmeta')
    meta = json.load(open(f'{root}/strmeta/meta.json'))
    json.dump(meta | {'vocab_size': '512'}, open(f'{root}/strmeta/meta.json', 'w'))
    open(f'{root}/one_story.txt', 'w').write('Once upon a time there was one story only.\n')
    shutil.copytree(f'{root}/run', f'{root}/nolog')
    os.remove(f'{root}/nolog/log.jsonl')
    shutil.copytree(f'{root}/run', f'{root}/listrow')
    lines = open(f'{root}/listrow/log.jsonl').read().splitlines()
    lines[1] = '[1, 2, 3]'
    open(f'{root}/listrow/log.jsonl', 'w').write('\n'.join(lines) + '\n')
    os.makedirs(f'{root}/owt')
    json.dump(dict(vocab_size=50257, tokenizer='tiktoken', tokenizer_name='gpt2', eot_token=50256, dtype='uint16',
                   source='elsewhere.jsonl', val_fraction=0.05), open(f'{root}/owt/meta.json', 'w'))
    for split in ('train', 'val'):  # GPT-2 ids
        np.random.default_rng(split == 'val').integers(0, 50257, 2000, dtype=np.uint16).tofile(f'{root}/owt/{split}.bin')
    open(f'{root}/pile_text.jsonl', 'w').write('{"input_ids": "464 3290"}\n')
    open(f'{root}/pile_big.jsonl', 'w').write('{"input_ids": [464, 70000]}\n')
    word_tokenizer(f'{root}/words', 10)
    open(f'{root}/badtype.py', 'w').write("batch_size = 'big'\n")
    os.makedirs(f'{root}/cfgsub')  # a config file naming its data relative to its own folder (../shortval)
    open(f'{root}/cfgsub/relative.py', 'w').write("data_dir = '../shortval'\n")
    open(f'{root}/own_lr.py', 'w').write("def get_lr(it):  # a constant learning rate, nanoGPT-style\n    return 1e-3\n")
    open(f'{root}/sweep.py', 'w').write("for lr in [1e-3, 3e-4]:  # a sweep\n    learning_rate = lr\n")
    open(f'{root}/argv_cfg.py', 'w').write("import sys\nsys.argv += ['--max_iters=20']\n")
    open(f'{root}/loop_ok.py', 'w').write("n_layer = 1\nfor _ in range(2):  # a value computed in a loop\n    n_layer *= 2\n")
    open(f'{root}/helper_fn.py', 'w').write("def width(d):\n    return 4 * d\n\n\nmlp_hidden = width(32)\n")
    open(f'{root}/badkey.py', 'w').write("learning_rat = 1e-3\n")
    open(f'{root}/gpt2_gqa.py', 'w').write("arch = 'gpt2'\nnorm = 'layernorm'\nn_kv_head = 2\n")
    open(f'{root}/badrange.py', 'w').write("n_layer = 0\n")
    open(f'{root}/syntax.py', 'w').write('# a config\nlearning_rate = = 3e-4\n')
    open(f'{root}/nameerror.py', 'w').write('learning_rate = lr * 2\n')
    open(f'{root}/blank.txt', 'w').write('   \n\n \t \n')
    open(f'{root}/binary.txt', 'wb').write(bytes(range(256)) * 8)
    open(f'{root}/latin1.txt', 'w', encoding='latin-1').write('One day.\n\nA story.\nThe caf\u00e9 was open.\n')
    open(f'{root}/utf16.txt', 'w', encoding='utf-16').write('Once upon a time.\n\nThe end.\n')
    open(f'{root}/utf16le.txt', 'w', encoding='utf-16-le').write('Once upon a time.\n\nThe end.\n')  # no mark
    open(f'{root}/latin1.jsonl', 'w', encoding='latin-1').write('{"text": "fine"}\n{"text": "caf\u00e9"}\n')
    open(f'{root}/cut_utf8.jsonl', 'wb').write('{"input_ids": [1]}\n{"input_ids": [2]} \u00e9'.encode()[:-1])
    open(f'{root}/small.txt', 'w').write(open(SHARED / 'tinystories' / 'train_sample.txt').read()[:20_000])
    shutil.copy(f'{root}/small.txt', f'{root}/stories,v2.txt')  # a file whose name holds a comma
    os.makedirs(f'{root}/globbed')  # files a shell pattern expands to, one argument each
    for name in ('a.txt', 'b.txt', 'c.txt'):
        shutil.copy(f'{root}/small.txt', f'{root}/globbed/{name}')
    shutil.copytree(SHARED / 'tiktoken', f'{root}/tkcut')  # tiktoken's cache, its vocab.bpe cut short
    os.chmod(f'{root}/tkcut', 0o755)
    for name in os.listdir(f'{root}/tkcut'):
        os.chmod(f'{root}/tkcut/{name}', 0o644)
    whole = open(f'{root}/tkcut/6d1cbeee0f20b3d9449abfede4726ed8212e3aee', 'rb').read()
    open(f'{root}/tkcut/6d1cbeee0f20b3d9449abfede4726ed8212e3aee', 'wb').write(whole[:100_000])
    os.makedirs(f'{root}/storytext')  # a folder of the text a run's data was prepared from
    shutil.copy(f'{root}/small.txt', f'{root}/storytext/stories.txt')
    stories = [{'text': t} for t in open(f'{root}/small.txt').read().split('\n\n')]
    json.dump(stories, open(f'{root}/stories_array.json', 'w'), indent=2)  # a download's records, one JSON array
    json.dump(stories, open(f'{root}/docs_array.jsonl', 'w'))
    open(f'{root}/docs_lines.txt', 'w').write(''.join(json.dumps(r) + '\n' for r in stories))
    run('prepare_tinystories.py', f'--input_file={root}/small.txt', '--vocab_size=512', f'--out_dir={root}/other_tok',
        env=QUIET)  # the same vocabulary size as the run's data, in another tokenizer
    open(f'{root}/bad_line.jsonl', 'w').write('{"text": "fine", "input_ids": [1]}\n{"text": "torn\n')
    open(f'{root}/no_text.jsonl', 'w').write('{"body": "no text field"}\n')
    os.makedirs(f'{root}/emptydir')
    open(f'{root}/empty.txt', 'w').close()
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from configurator import figure_metadata
    for folder, script in (('plotfigs', 'plot.py'), ('diagfigs', 'diagnose.py')):
        os.makedirs(f'{root}/{folder}')
        fig = plt.figure()
        fig.savefig(f'{root}/{folder}/loss.png', metadata=figure_metadata('loss.png', script))
    open(f'{root}/helper.py', 'w').write(f"import pathlib\n_width = 32\nn_embd = 2 * _width\n"
                                        f"out_dir = pathlib.Path('{root}') / 'fresh'\n")
    os.makedirs(f'{root}/orphanbin')  # token files of some other preparation, and nothing else
    np.arange(1000, dtype=np.uint16).tofile(f'{root}/orphanbin/train.bin')
    for name, edit in (('runcopy', lambda rows: rows), ('twice', lambda rows: rows + rows), ('noloss', lambda rows: [
            json.dumps({k: v for k, v in json.loads(r).items() if k != 'loss'}) for r in rows])):
        shutil.copytree(f'{root}/run', f'{root}/{name}')
        rows = open(f'{root}/{name}/log.jsonl').read().splitlines()
        open(f'{root}/{name}/log.jsonl', 'w').write('\n'.join(edit(rows)) + '\n')
    for name, source in (('digitmeta', data_dir), ('digitowt', f'{root}/owt')):  # vocab_size "512", by hand
        shutil.copytree(source, f'{root}/{name}')
        meta = json.load(open(f'{root}/{name}/meta.json'))
        json.dump(meta | {'vocab_size': str(meta['vocab_size'])}, open(f'{root}/{name}/meta.json', 'w'))
    shutil.copytree(f'{root}/owt', f'{root}/owtshort')  # a val.bin cut short of one chunk
    shutil.copytree(f'{root}/owt', f'{root}/owtmeta')  # its meta.json replaced by a TinyStories folder's
    shutil.copy(f'{data_dir}/meta.json', f'{root}/owtmeta/meta.json')
    shutil.copytree(f'{root}/owt', f'{root}/owtstray')  # prepared without the Pile sets, then one copied in
    json.dump(json.load(open(f'{root}/owt/meta.json')) | {'train_tokens': 2000, 'val_tokens': 2000},
              open(f'{root}/owtstray/meta.json', 'w'))
    np.arange(3000, dtype=np.uint16).tofile(f'{root}/owtstray/pile.bin')
    shutil.copytree(f'{root}/owt', f'{root}/owtpile')  # a Pile set from a local file, its .bin cut mid-token
    np.arange(3000, dtype=np.uint16).tofile(f'{root}/owtpile/pile.bin')
    open(f'{root}/owtpile/pile.bin', 'ab').write(b'\0')
    json.dump(json.load(open(f'{root}/owt/meta.json')) | {'pile_tokens': 3000, 'pile_source': f'{root}/pile_short.jsonl'},
              open(f'{root}/owtpile/meta.json', 'w'))
    np.arange(30, dtype=np.uint16).tofile(f'{root}/owtshort/val.bin')
    shutil.copytree(f'{root}/run', f'{root}/newer')  # a run of a newer version: a model field this model.py lacks
    ckpt = torch.load(f'{root}/newer/ckpt.pt', weights_only=True)
    ckpt['model_args']['qk_norm'] = False
    torch.save(ckpt, f'{root}/newer/ckpt.pt')
    os.makedirs(f'{root}/nanogpt')  # nanoGPT's checkpoint layout: its GPTConfig has a 'bias' field
    torch.save(dict(model={'transformer.wte.weight': torch.zeros(512, 32)}, optimizer={}, iter_num=10,
                    model_args=dict(n_layer=2, n_head=2, n_embd=32, block_size=64, bias=False, vocab_size=512,
                                    dropout=0.0), best_val_loss=3.0, config={'dataset': 'shakespeare_char'}),
               f'{root}/nanogpt/ckpt.pt')
    os.makedirs(f'{root}/otherexport')  # an export of another run's checkpoint
    json.dump({'model_type': 'llama', 'tapernorm_export': dict(sigma=1.0, alpha=1.0, bound=1e-6,
                                                               source='/elsewhere/run/ckpt.pt')},
              open(f'{root}/otherexport/config.json', 'w'))
    shutil.copytree(f'{root}/run', f'{root}/ft_export')  # a Baseline fine-tune of that export
    ckpt = torch.load(f'{root}/ft_export/ckpt.pt', weights_only=True)
    ckpt['config']['init_from'] = f'{root}/otherexport'
    torch.save(ckpt, f'{root}/ft_export/ckpt.pt')
    open(f'{root}/mine.svg', 'w').write('<svg xmlns="http://www.w3.org/2000/svg"><title>tapernorm results, by hand'
                                        '</title></svg>\n')
    import bz2, gzip, lzma
    stories = open(SHARED / 'tinystories' / 'train_sample.txt', 'rb').read()[:20_000]
    open(f'{root}/stories.txt.gz', 'wb').write(gzip.compress(stories))  # downloaded, not unpacked
    open(f'{root}/stories.txt', 'wb').write(lzma.compress(stories))  # xz under a text file's name
    open(f'{root}/docs.jsonl.bz2', 'wb').write(bz2.compress(b'{"text": "a document"}\n' * 50))
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root}/half', '--stop_iter=20')  # mid-taper
    os.makedirs(f'{root}/foldasckpt')
    shutil.copy(f'{root}/trun/ckpt_folded.pt', f'{root}/foldasckpt/ckpt.pt')
    whole = torch.load(f'{root}/run/ckpt.pt', weights_only=True)
    for name, change in (('iterstr', dict(iter_num='20')), ('noopt', dict(optimizer=None)),
                         ('badrng', dict(rng=dict(torch=torch.zeros(3, dtype=torch.uint8)))),
                         ('bogusargs', dict(model_args=whole['model_args'] | dict(taper='bogus'))),
                         ('yarnargs', dict(model_args=whole['model_args'] | dict(rope_scaling=dict(rope_type='yarn',
                                                                                             factor=4.0))))):
        os.makedirs(f'{root}/{name}')
        damaged = {k: v for k, v in (whole | change).items() if v is not None}
        torch.save(damaged, f'{root}/{name}/ckpt.pt')
        shutil.copy(f'{root}/run/log.jsonl', f'{root}/{name}/log.jsonl')
    open(f'{root}/exits.py', 'w').write('import sys\nsys.exit(0)\n')
    open(f'{root}/yaml_habit.py', 'w').write('max_iters: 12\n')
    open(f'{root}/yaml_word.py', 'w').write('taper: all\n')  # a word, which Python reads as the builtin all
    with gzip.open(f'{root}/prompt.txt.gz', 'wt') as f:  # a prompt downloaded compressed
        f.write('Once upon a time')
    os.makedirs(f'{root}/backup')  # a run's checkpoint renamed by hand
    os.symlink(f'{root}/run/ckpt.pt', f'{root}/backup/ckpt_backup.pt')
    os.makedirs(f'{root}/linkedlog')  # a run whose log.jsonl links to nothing
    shutil.copy(f'{root}/run/config.json', f'{root}/linkedlog/config.json')
    os.symlink(f'{root}/nowhere/log.jsonl', f'{root}/linkedlog/log.jsonl')
    open(f'{root}/compares.py', 'w').write('batch_size == 4\n')
    open(f'{root}/main_block.py', 'w').write('if __name__ == "__main__":\n    max_iters = 24\n')
    open(f'{root}/imports.py', 'w').write('from math import sqrt\nimport numpy as np\nn_embd = int(sqrt(4096))\n'
                                          'max_iters = np.int64(24)\nlearning_rate = np.float64(3e-3)\n')
    os.makedirs(f'{root}/linkrun')  # a run folder whose ckpt.pt links to nothing
    os.symlink(f'{root}/nowhere/ckpt.pt', f'{root}/linkrun/ckpt.pt')
    shutil.copytree(data_dir, f'{root}/zeros')  # a token file allocated but never written
    np.zeros(len(train), dtype=np.uint16).tofile(f'{root}/zeros/train.bin')
    open(f'{root}/prompt.txt', 'w').write('Once upon a time')
    os.symlink(f'{root}/nowhere', f'{root}/deadlink')
    shutil.copytree(f'{root}/run', f'{root}/nockpt')  # its checkpoint removed by hand
    os.remove(f'{root}/nockpt/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/linkjson')  # config.json a link to a file since removed
    os.remove(f'{root}/linkjson/config.json')
    os.symlink(f'{root}/nowhere/config.json', f'{root}/linkjson/config.json')
    shutil.copytree(f'{root}/trun', f'{root}/foldonly')  # its ckpt.pt removed, its folded checkpoint kept
    os.remove(f'{root}/foldonly/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/ftnockpt')  # a fine-tune's folder (its config names the HF model)
    os.remove(f'{root}/ftnockpt/ckpt.pt')
    held = json.load(open(f'{root}/ftnockpt/config.json'))
    json.dump(held | {'init_from': f'{root}/llama'}, open(f'{root}/ftnockpt/config.json', 'w'))
    shutil.copytree(f'{root}/run', f'{root}/deadlog')  # log.jsonl a link to a log moved away
    os.remove(f'{root}/deadlog/log.jsonl')
    os.symlink(f'{root}/nowhere/log.jsonl', f'{root}/deadlog/log.jsonl')
    os.makedirs(f'{root}/logs')  # log.jsonl a link to the log kept in another folder
    shutil.copytree(f'{root}/half', f'{root}/linklog')
    os.replace(f'{root}/linklog/log.jsonl', f'{root}/logs/linklog.jsonl')
    os.symlink(f'{root}/logs/linklog.jsonl', f'{root}/linklog/log.jsonl')
    os.link(f'{root}/linklog/config.json', f'{root}/logs/linklog.json')  # and its config.json a hard link
    open(f'{root}/yaml_tied.py', 'w').write('tied_head = yes\n')  # YAML's word in Python's form of a line
    open(f'{root}/ann_float.py', 'w').write('learning_rate: float\n')  # a type where the value goes
    for name, line in (('ann_str', 'taper: str'), ('ann_norm', 'norm: str'), ('ann_choice', 'taper: Internal'),
                       ('ann_path', 'data_dir: str'),  # a type, or a misspelt choice, where a text value goes
                       ('bareword', 'taper = internal'), ('barepath', 'data_dir = data/ts512'),
                       ('bareother', 'taper = mytaper')):  # a text value without its quotes
        open(f'{root}/{name}.py', 'w').write(f'max_iters = 40\n{line}\n')
    open(f'{root}/octal.py', 'w').write('max_iters = 8\nbatch_size = 016\n')  # a number padded with a zero
    open(f'{root}/pl_iso.txt', 'wb').write(('Once upon a time.\n\n' + POLISH_L2 + '\n').encode('iso-8859-2'))
    open(f'{root}/de_dos.txt', 'wb').write(('Once upon a time.\n\n' + GERMAN + '\n').encode('cp850'))
    shutil.copytree(f'{root}/run', f'{root}/duplog')
    open(f'{root}/duplog/log.jsonl', 'a').write(open(f'{root}/run/log.jsonl').read())
    shutil.copytree(f'{root}/run', f'{root}/roundlog')
    rows = [json.loads(line) for line in open(f'{root}/run/log.jsonl')]
    open(f'{root}/roundlog/log.jsonl', 'w').write(''.join(json.dumps(r | ({'val_loss': round(r['val_loss'], 2)}
                                                                          if 'val_loss' in r else {})) + '\n' for r in rows))
    for name, text in (('badjson', None), ('foreignjson', '{"vocab_size": 512}\n')):  # a run's config.json edited
        shutil.copytree(f'{root}/run', f'{root}/{name}')
        held = open(f'{root}/{name}/config.json').read()
        open(f'{root}/{name}/config.json', 'w').write(text or held.rstrip().rstrip('}') + ', "notes": "lr spike",\n}\n')
    shutil.copytree(data_dir, f'{root}/deadval')  # a data folder whose val.bin links to nothing
    os.remove(f'{root}/deadval/val.bin')
    os.symlink(f'{root}/nowhere/val.bin', f'{root}/deadval/val.bin')
    shutil.copy(f'{SHARED}/openwebtext/sample.jsonl', f'{root}/other.jsonl')
    for name in ('metadir', 'metanull', 'metabpe', 'metabos', 'devbin'):
        shutil.copytree(data_dir, f'{root}/{name}')
    os.remove(f'{root}/metadir/meta.json')
    os.makedirs(f'{root}/metadir/meta.json')
    open(f'{root}/metanull/meta.json', 'w').write('null')
    base = json.load(open(f'{data_dir}/meta.json'))
    json.dump(base | {'tokenizer': 'bpe'}, open(f'{root}/metabpe/meta.json', 'w'))
    json.dump(base | {'bos_id': 9999}, open(f'{root}/metabos/meta.json', 'w'))
    os.remove(f'{root}/devbin/train.bin')
    os.symlink('/dev/zero', f'{root}/devbin/train.bin')
    os.makedirs(f'{root}/foldedonly')
    shutil.copy(f'{root}/trun/ckpt_folded.pt', f'{root}/foldedonly/ckpt_folded.pt')
    shutil.copytree(f'{root}/trun', f'{root}/trun2')  # its ckpt_folded.pt was folded from trun's checkpoint,
    other = torch.load(f'{root}/trun/ckpt.pt', weights_only=True)  # and its run is another one now (another seed)
    other['config']['seed'] = 7
    other['run_id'] = 'another run'
    torch.save(other, f'{root}/trun2/ckpt.pt')
    shutil.copytree(f'{root}/trun', f'{root}/trun_copy')  # a run folder copied whole: its fold may be redone
    open(f'{root}/mine.png', 'wb').write(b'\x89PNG\r\n\x1a\n a figure of the user')
    os.makedirs(f'{root}/userfigs')
    open(f'{root}/userfigs/loss.png', 'wb').write(b'\x89PNG\r\n\x1a\n a figure of the user')
    open(f'{root}/utf16.py', 'w', encoding='utf-16').write('learning_rate = 1e-3\n')
    shutil.copytree(data_dir, f'{root}/listmeta')
    json.dump([1, 2], open(f'{root}/listmeta/meta.json', 'w'))
    shutil.copytree(data_dir, f'{root}/wide16')  # uint32 tokens where meta.json says uint16
    wide = np.fromfile(f'{data_dir}/train.bin', dtype=np.uint16)
    wide[:len(wide) // 2].astype(np.uint32).tofile(f'{root}/wide16/train.bin')
    meta = json.load(open(f'{root}/wide16/meta.json'))  # the file's size as meta.json counts it, in uint16 ids
    json.dump(meta | {'train_tokens': len(wide) // 2 * 2}, open(f'{root}/wide16/meta.json', 'w'))
    shutil.copytree(data_dir, f'{root}/badspm')
    open(f'{root}/badspm/tokenizer.model', 'wb').write(b'not a sentencepiece model')
    shutil.copytree(data_dir, f'{root}/shorttrain')
    wide[:len(wide) // 2].tofile(f'{root}/shorttrain/train.bin')
    os.makedirs(f'{root}/badtok')
    ckpt = torch.load(f'{root}/run/ckpt.pt', weights_only=True)
    ckpt['tokenizer']['model'] = torch.tensor(list(b'not a sentencepiece model'), dtype=torch.uint8)
    torch.save(ckpt, f'{root}/badtok/ckpt.pt')
    os.makedirs(f'{root}/ckptdir/ckpt.pt')
    shutil.copytree(data_dir, f'{root}/bindir')
    os.remove(f'{root}/bindir/train.bin')
    os.makedirs(f'{root}/bindir/train.bin')
    open(f'{root}/emptytexts.jsonl', 'w').write('{"text": ""}\n{"text": "  "}\n')
    open(f'{root}/pile_short.jsonl', 'w').write('{"input_ids": [464, 3290, 50256]}\n')
    open(f'{root}/pile_1024.jsonl', 'w').write(json.dumps({'input_ids': list(range(1024))}) + '\n')
    open(f'{root}/no_blank_lines.txt', 'w').write(''.join(f'Story {i} is one line long.\n' for i in range(1500)))
    os.makedirs(f'{root}/cutfirst')  # a run killed while it wrote its first checkpoint
    for name in ('config.json', 'log.jsonl'):
        shutil.copy(f'{root}/run/{name}', f'{root}/cutfirst/{name}')
    whole = open(f'{root}/run/ckpt.pt', 'rb').read()
    open(f'{root}/cutfirst/ckpt.pt.tmp', 'wb').write(whole[:len(whole) // 3])
    shutil.copytree(data_dir, f'{root}/owtlike')
    json.dump(json.load(open(f'{data_dir}/meta.json')) | {'tokenizer': 'tiktoken', 'vocab_size': 50257,
                                                           'tokenizer_name': 'gpt2'},
              open(f'{root}/owtlike/meta.json', 'w'))
    shutil.copytree(data_dir, f'{root}/copied')  # a prepared folder copied: its files' times in another order
    later = os.path.getmtime(f'{root}/copied/train.bin') + 60
    os.utime(f'{root}/copied/tokenizer.model', (later, later))
    shutil.copytree(f'{root}/copied', f'{root}/copied_old')  # and prepared before meta.json held the hash
    meta = json.load(open(f'{root}/copied/meta.json'))
    json.dump({k: v for k, v in meta.items() if k != 'tokenizer_sha256'}, open(f'{root}/copied_old/meta.json', 'w'))
    os.utime(f'{root}/copied_old/tokenizer.model', (later, later))
    for package in ('matplotlib', 'sentencepiece'):  # installed here, but not to a process that reads this first
        os.makedirs(f'{root}/shadow/{package}')
        open(f'{root}/shadow/{package}/__init__.py', 'w').write(
            f'raise ModuleNotFoundError("No module named {package!r}", name={package!r})\n')
    shutil.copytree(f'{root}/run', f'{root}/flipped')  # bytes of a weight flipped on disk
    damaged = bytearray(open(f'{root}/run/ckpt.pt', 'rb').read())
    for i in range(len(damaged) // 2, len(damaged) // 2 + 64):
        damaged[i] ^= 0xFF
    open(f'{root}/flipped/ckpt.pt', 'wb').write(bytes(damaged))
    import zipfile
    assert zipfile.ZipFile(f'{root}/flipped/ckpt.pt').testzip() is not None  # the flip fell on stored data
    for name, prefix in (('dp_prefixed', 'module.'), ('compiled_prefixed', '_orig_mod.')):
        os.makedirs(f'{root}/{name}')  # saved from inside DataParallel, or a torch.compile'd model
        ckpt = torch.load(f'{root}/trun/ckpt.pt', weights_only=True)
        ckpt['model'] = {prefix + k: v for k, v in ckpt['model'].items()}
        torch.save(ckpt, f'{root}/{name}/ckpt.pt')
    os.makedirs(f'{root}/stopped_prepare')  # prepare_tinystories.py killed after its first file
    shutil.copy(f'{SHARED}/tinystories/valid_sample.txt', f'{root}/stopped_prepare/tokenizer_train.txt')
    shutil.copytree(data_dir, f'{root}/meta70k')
    json.dump(json.load(open(f'{data_dir}/meta.json')) | {'vocab_size': 70000}, open(f'{root}/meta70k/meta.json', 'w'))
    shutil.copytree(data_dir, f'{root}/meta600')
    json.dump(json.load(open(f'{data_dir}/meta.json')) | {'vocab_size': 600}, open(f'{root}/meta600/meta.json', 'w'))
    open(f'{root}/json_cfg.py', 'w').write('{"max_iters": 20, "eval_interval": 10}\n')
    open(f'{root}/sets_lr.py', 'w').write('learning_rate = 1e-3\n')
    shutil.copytree(f'{root}/half', f'{root}/half_aux')
    os.makedirs(f'{root}/killed_overwrite/.replaced')  # as a SIGKILL before the new run's first checkpoint leaves it
    for name in ('ckpt.pt', 'config.json', 'log.jsonl'):
        shutil.copy(f'{root}/run/{name}', f'{root}/killed_overwrite/.replaced/{name}')
    shutil.copy(f'{root}/run/config.json', f'{root}/killed_overwrite/config.json')
    shutil.copytree(f'{root}/killed_overwrite', f'{root}/killed_overwrite2')
    os.makedirs(f'{root}/cut')
    whole = open(f'{root}/run/ckpt.pt', 'rb').read()
    open(f'{root}/cut/ckpt.pt', 'wb').write(whole[:len(whole) // 2])
    word_tokenizer(f'{root}/no_eos', 10, eos=False)
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Model, LlamaConfig, LlamaForCausalLM
    llama = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4)
    LlamaForCausalLM(LlamaConfig(**llama, num_key_value_heads=2)).save_pretrained(f'{root}/llama')
    LlamaForCausalLM(LlamaConfig(**llama)).save_pretrained(f'{root}/llama_mha')  # a key/value head per query head
    shutil.copytree(f'{root}/llama', f'{root}/llama_noeos')  # a tokenizer with no special token, nor BOS framing
    word_tokenizer(f'{root}/llama_noeos', 500, eos=False, framed=False)
    for name, change in (('llama_ropestr', {'rope_parameters': {'rope_theta': '10000.0', 'rope_type': 'default'}}),
                         ('llama_heads3', {'num_attention_heads': 3})):  # config.json edited by hand
        shutil.copytree(f'{root}/llama', f'{root}/{name}')
        json.dump(json.load(open(f'{root}/llama/config.json')) | change, open(f'{root}/{name}/config.json', 'w'))
    shutil.copytree(f'{root}/llama', f'{root}/llama_gptq')  # a quantized model's config
    json.dump(json.load(open(f'{root}/llama/config.json')) | {'quantization_config': {'quant_method': 'gptq', 'bits': 4}},
              open(f'{root}/llama_gptq/config.json', 'w'))
    LlamaForCausalLM.from_pretrained(f'{root}/llama').save_pretrained(f'{root}/llama_shards', max_shard_size='100KB')
    shards = sorted(f for f in os.listdir(f'{root}/llama_shards') if f.startswith('model-'))
    os.remove(f'{root}/llama_shards/{shards[1]}')  # a download cut short
    shutil.copytree(f'{root}/llama', f'{root}/llama_tok1000')  # another model's tokenizer beside the weights
    word_tokenizer(f'{root}/llama_tok1000', 997)
    shutil.copytree(f'{root}/llama_tok1000', f'{root}/llama_toknan')  # a hand edit transformers refuses
    json.dump(json.load(open(f'{root}/llama/config.json')) | {'vocab_size': float('nan')},
              open(f'{root}/llama_toknan/config.json', 'w'))
    shutil.copytree(f'{root}/llama', f'{root}/llama_tokcfg')
    json.dump({'tokenizer_class': 'LlamaTokenizerFast', 'bos_token': '<s>', 'eos_token': '</s>'},
              open(f'{root}/llama_tokcfg/tokenizer_config.json', 'w'))
    LlamaConfig(**llama, hidden_act='gelu').save_pretrained(f'{root}/llama_gelu')
    LlamaConfig(**llama, num_key_value_heads=3).save_pretrained(f'{root}/llama_kv3')
    for name, field, value in (('llama_theta0', 'rope_theta', 0), ('llama_negeps', 'rms_norm_eps', -1e-6),
                               ('llama_thetainf', 'rope_theta', float('inf')), ('llama_epsnan', 'rms_norm_eps', float('nan'))):
        shutil.copytree(f'{root}/llama', f'{root}/{name}')  # a config.json edited by hand: a sign or a zero slipped
        edited = json.load(open(f'{root}/{name}/config.json'))
        if field == 'rope_theta' and isinstance(edited.get('rope_parameters'), dict):
            edited['rope_parameters']['rope_theta'] = value  # where transformers 5 keeps it
        else:
            edited[field] = value
        json.dump(edited, open(f'{root}/{name}/config.json', 'w'))
    shutil.copytree(f'{root}/llama', f'{root}/llama_cut')
    whole = open(f'{root}/llama/model.safetensors', 'rb').read()
    open(f'{root}/llama_cut/model.safetensors', 'wb').write(whole[:len(whole) // 2])
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64)).save_pretrained(f'{root}/hf50k')
    shutil.copytree(f'{root}/hf50k', f'{root}/hf50k_wordtok')  # another model's far smaller tokenizer copied in
    os.makedirs(f'{root}/cachecopy')  # an HF cache snapshot copied with cp -r: links to ../../blobs/, broken
    for name in ('config.json', 'model.safetensors'):
        os.symlink(f'../../blobs/{name}-blob', f'{root}/cachecopy/{name}')
    word_tokenizer(f'{root}/hf50k_wordtok', 61)
    shutil.copytree(f'{root}/llama', f'{root}/llama_mixed')  # a Llama config beside a GPT-2's weights
    shutil.copy(f'{root}/hf50k/model.safetensors', f'{root}/llama_mixed/model.safetensors')
    hc = json.load(open(f'{root}/llama/config.json'))
    shutil.copytree(f'{root}/llama', f'{root}/llama_vocab600')
    json.dump(hc | {'vocab_size': 600}, open(f'{root}/llama_vocab600/config.json', 'w'))
    shutil.copytree(f'{root}/llama', f'{root}/llama_epsedit')  # an export whose eps = sigma^2 was "fixed" back
    json.dump(hc | {'rms_norm_eps': 1e-05, 'tapernorm_export': dict(sigma=8192.0, alpha=1.0, bound=1e-9)},
              open(f'{root}/llama_epsedit/config.json', 'w'))
    os.symlink(f'{root}/loopB', f'{root}/loopA')
    os.symlink(f'{root}/loopA', f'{root}/loopB')
    os.makedirs(f'{root}/no_wandb/wandb')
    with open(f'{root}/no_wandb/wandb/__init__.py', 'w') as f:
        f.write("raise ImportError('No module named wandb')\n")
    os.makedirs(f'{root}/relrun')  # a run started elsewhere with a relative data_dir
    ckpt = torch.load(f'{root}/run/ckpt.pt', weights_only=True)
    ckpt['config']['data_dir'] = 'relative_data_elsewhere'
    torch.save(ckpt, f'{root}/relrun/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/keptroot/baseline-s1337')  # a Baseline of another config
    open(f'{root}/cfg_ok.py', 'w').write('max_iters = 20\n')
    os.makedirs(f'{root}/tmpdir_out/ckpt.pt.tmp')  # a stray folder where the checkpoint is first written
    os.makedirs(f'{root}/exp_in')
    shutil.copytree(f'{root}/run', f'{root}/cfgdir')
    os.remove(f'{root}/cfgdir/config.json')
    os.makedirs(f'{root}/cfgdir/config.json')
    os.makedirs(f'{root}/logdir/log.jsonl')
    shutil.copytree(data_dir, f'{root}/swaptok')  # the tokens of one tokenizer, the model file of another
    shutil.copy(f'{root}/other_tok/tokenizer.model', f'{root}/swaptok/tokenizer.model')
    from transformers import LlamaForSequenceClassification
    LlamaForSequenceClassification(LlamaConfig(**llama, num_key_value_heads=2)).save_pretrained(f'{root}/llama_cls')
    LlamaForCausalLM(LlamaConfig(**llama, num_key_value_heads=2, tie_word_embeddings=False)).save_pretrained(
        f'{root}/llama_tiedhead')  # a head of its own, and then config.json edited to tie it
    json.dump(json.load(open(f'{root}/llama_tiedhead/config.json')) | {'tie_word_embeddings': True},
              open(f'{root}/llama_tiedhead/config.json', 'w'))
    shutil.copytree(f'{root}/run', f'{root}/nullloss')
    rows = [json.loads(r) for r in open(f'{root}/run/log.jsonl').read().splitlines()]
    open(f'{root}/nullloss/log.jsonl', 'w').write(''.join(json.dumps(r | {'loss': None} if 'lr' in r else r) + '\n'
                                                          for r in rows))
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root}/padded', '--vocab_size=1024', '--max_iters=4',
        '--warmup_iters=1', '--taper_start=1', '--taper_end=3', '--lr_decay_iters=4', '--eval_interval=4')
    open(f'{root}/upper.PY', 'w').write('max_iters = 40\n')
    open(f'{root}/dict_cfg.py', 'w').write('config = dict(max_iters=20, eval_interval=10)\n')
    os.makedirs(f'{root}/optnone')
    ckpt = torch.load(f'{root}/run/ckpt.pt', weights_only=True)
    torch.save(ckpt | {'optimizer': None}, f'{root}/optnone/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/reversed')  # eval rows (and all) in reverse order
    lines = open(f'{root}/run/log.jsonl').read().splitlines()
    open(f'{root}/reversed/log.jsonl', 'w').write('\n'.join([lines[0], *[l for l in lines[1:] if 'val_loss' in l][::-1]]) + '\n')
    shutil.copytree(f'{root}/run', f'{root}/emptyrow')
    open(f'{root}/emptyrow/log.jsonl', 'a').write('{}\n')
    shutil.copytree(f'{root}/run', f'{root}/nanloss')
    open(f'{root}/nanloss/log.jsonl', 'w').write(''.join(json.dumps(r | {'loss': float('nan')} if 'lr' in r else r) + '\n'
                                                         for r in rows))
    open(f'{root}/oneline.txt', 'w').write(' '.join(stories.decode().split()) + '\n')
    shutil.copytree(f'{root}/llama', f'{root}/llama_bom')
    open(f'{root}/llama_bom/config.json', 'w', encoding='utf-8-sig').write(open(f'{root}/llama/config.json').read())
    GPT2Model(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64)).save_pretrained(f'{root}/gpt2base')
    shutil.copytree(data_dir, f'{root}/nullsha')
    json.dump(json.load(open(f'{data_dir}/meta.json')) | {'tokenizer_sha256': None}, open(f'{root}/nullsha/meta.json', 'w'))
    shutil.copytree(f'{root}/owt', f'{root}/owtname')
    json.dump(json.load(open(f'{root}/owt/meta.json')) | {'tokenizer_name': 'gpt-2'}, open(f'{root}/owtname/meta.json', 'w'))
    os.makedirs(f'{root}/missingweight')
    ckpt = torch.load(f'{root}/trun/ckpt.pt', weights_only=True)
    del ckpt['model']['transformer.h.0.mlp.w1.weight']
    torch.save(ckpt, f'{root}/missingweight/ckpt.pt')
    shutil.copytree(f'{root}/half', f'{root}/half_fm')
    shutil.copytree(f'{root}/half', f'{root}/half_nan')  # its checkpoint's evaluation row holds a NaN val_loss
    nan = torch.load(f'{root}/half/ckpt.pt', weights_only=False)
    mark = json.loads(nan['eval_row']) | {'val_loss': float('nan')}
    rows = open(f'{root}/half/log.jsonl').read().replace(nan['eval_row'], json.dumps(mark))
    nan['eval_row'] = json.dumps(mark)
    torch.save(nan, f'{root}/half_nan/ckpt.pt')
    open(f'{root}/half_nan/log.jsonl', 'w').write(rows)
    shutil.copytree(f'{root}/half', f'{root}/half_bom')  # its log saved by a Windows editor, with a byte-order mark
    open(f'{root}/half_bom/log.jsonl', 'wb').write(b'\xef\xbb\xbf' + open(f'{root}/half/log.jsonl', 'rb').read())
    for name, layout in (('half_jq', lambda row: json.dumps(row, sort_keys=True, separators=(',', ':'))),
                         ('half_round', lambda row: json.dumps({k: float(f'{v:.10g}') if isinstance(v, float) else v
                                                                for k, v in row.items()})),
                         ('half_floats', lambda row: json.dumps({k: float(v) if isinstance(v, int) else v
                                                                 for k, v in row.items()}))):
        shutil.copytree(f'{root}/half', f'{root}/{name}')  # its log rewritten by a tool: the same rows and values
        rows = [json.loads(line) for line in open(f'{root}/half/log.jsonl')]
        open(f'{root}/{name}/log.jsonl', 'w').write(''.join(layout(row) + '\n' for row in rows))
    shutil.copytree(f'{root}/run', f'{root}/bomrun')
    open(f'{root}/bomrun/config.json', 'w', encoding='utf-8-sig').write(open(f'{root}/run/config.json').read())
    GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=512, bos_token_id=2,
                               eos_token_id=2)).save_pretrained(
        f'{root}/hf')
    for name, line in (('yaml_null', 'aux_loss: null'), ('yaml_init', 'init_from: null'), ('yaml_yes', 'compile: yes')):
        open(f'{root}/{name}.py', 'w').write(line + '\n')
    open(f'{root}/taper_on.py', 'w').write("taper = 'internal'\n")  # a model alone, none on a FakeLN config
    import pandas
    pandas.DataFrame({'text': ['One story.', 'Another story.']}).to_parquet(f'{root}/owt.parquet')  # the hub's form
    shutil.copytree(f'{root}/run', f'{root}/swapped')  # a run folder given another run's checkpoint
    shutil.copy(f'{root}/trun/ckpt.pt', f'{root}/swapped/ckpt.pt')
    shutil.copytree(f'{root}/trun', f'{root}/swapcfg')  # a tapered run's folder given a Baseline's config.json
    shutil.copy(f'{root}/run/config.json', f'{root}/swapcfg/config.json')
    for name in ('linkedckpt', 'linkednolog'):  # a Baseline's folder whose ckpt.pt links to a tapered run's
        shutil.copytree(f'{root}/run', f'{root}/{name}')
        os.remove(f'{root}/{name}/ckpt.pt')
        os.symlink(f'{root}/trun/ckpt.pt', f'{root}/{name}/ckpt.pt')
    os.rename(f'{root}/linkednolog/log.jsonl', f'{root}/linkednolog/log.jsonl.old')  # the log moved aside
    shutil.copytree(f'{root}/run', f'{root}/twin')  # a Baseline's folder whose ckpt.pt links to another Baseline's
    torch.save(torch.load(f'{root}/run/ckpt.pt', weights_only=True) | {'eval_row': json.dumps(
        {'iter': 8, 'gate': 1.0, 'eval_gate': 1.0, 'loss': 9.0, 'val_loss': 9.0})}, f'{root}/twin/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/linkedtwin')
    os.remove(f'{root}/linkedtwin/ckpt.pt')
    os.symlink(f'{root}/twin/ckpt.pt', f'{root}/linkedtwin/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/mixedlog')  # a Baseline's folder given a tapered run's log
    shutil.copy(f'{root}/trun/log.jsonl', f'{root}/mixedlog/log.jsonl')
    open(f'{root}/bom.py', 'w', encoding='utf-8-sig').write('learning_rate = 1e-3\n')
    shutil.copytree(f'{root}/run', f'{root}/gzlog')
    open(f'{root}/gzlog/log.jsonl', 'wb').write(gzip.compress(open(f'{root}/run/log.jsonl', 'rb').read()))
    shutil.copytree(f'{root}/run', f'{root}/nocfg')
    os.remove(f'{root}/nocfg/config.json')
    for name in ('cutcfg', 'cutcfg_nockpt'):  # a config.json cut short: with its checkpoint beside it, and without
        shutil.copytree(f'{root}/run', f'{root}/{name}')
        open(f'{root}/{name}/config.json', 'w').write(open(f'{root}/run/config.json').read()[:40])
    os.remove(f'{root}/cutcfg_nockpt/ckpt.pt')
    shutil.copytree(data_dir, f'{root}/grown')  # the run's data with twice the training tokens
    np.concatenate([train, train]).tofile(f'{root}/grown/train.bin')
    json.dump(json.load(open(f'{data_dir}/meta.json')) | {'train_tokens': 2 * len(train)},
              open(f'{root}/grown/meta.json', 'w'))
    shutil.copytree(f'{root}/owt', f'{root}/gpt2_tokens')  # prepare_owt.py's data under a name of its own
    os.remove(f'{root}/gpt2_tokens/val.bin')
    shutil.copytree(data_dir, f'{root}/growth_stories')  # TinyStories under a name that holds 'owt'
    os.remove(f'{root}/growth_stories/val.bin')
    shutil.copytree(data_dir, f'{root}/novocab')  # a meta.json edited by hand: its vocab_size removed
    json.dump({k: v for k, v in json.load(open(f'{data_dir}/meta.json')).items() if k != 'vocab_size'},
              open(f'{root}/novocab/meta.json', 'w'))
    shutil.copytree(f'{root}/hf', f'{root}/hf_fewer')  # config.json edited down to one layer; the weights hold two
    json.dump(json.load(open(f'{root}/hf/config.json')) | {'n_layer': 1}, open(f'{root}/hf_fewer/config.json', 'w'))
    os.mkfifo(f'{root}/fifo.txt')  # an input file given through a pipe
    shutil.copytree(data_dir, f'{root}/fifodata')  # a data folder whose train.bin is a named pipe
    os.remove(f'{root}/fifodata/train.bin')
    os.mkfifo(f'{root}/fifodata/train.bin')
    os.makedirs(f'{root}/fifolog')  # a run whose log.jsonl is a named pipe
    shutil.copy(f'{root}/run/config.json', f'{root}/fifolog/config.json')
    os.mkfifo(f'{root}/fifolog/log.jsonl')
    shutil.copytree(f'{root}/run', f'{root}/pthrun')  # the checkpoint renamed by hand
    os.rename(f'{root}/pthrun/ckpt.pt', f'{root}/pthrun/ckpt.pth')
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={root}/gpt2scratch', '--arch=gpt2', '--norm=layernorm',
        '--taper=none', '--aux_loss=none', '--max_iters=2', '--warmup_iters=1', '--lr_decay_iters=2', '--eval_interval=2')
    os.makedirs(f'{root}/fiforun')  # ckpt.pt a named pipe
    shutil.copy(f'{root}/run/config.json', f'{root}/fiforun/config.json')
    os.mkfifo(f'{root}/fiforun/ckpt.pt')
    os.makedirs(f'{root}/linkfold')  # ckpt_folded.pt a link to another run's checkpoint
    shutil.copy(f'{root}/trun/ckpt.pt', f'{root}/linkfold/ckpt.pt')
    os.symlink(f'{root}/run/ckpt.pt', f'{root}/linkfold/ckpt_folded.pt')
    shutil.copytree(f'{root}/trun', f'{root}/trun_ext')  # a run folder copied whole, then trained further
    run('train.py', '--init_from=resume', f'--out_dir={root}/trun_ext', '--max_iters=44', '--lr_decay_iters=44')
    shutil.copytree(data_dir, f'{root}/reprep')  # a run's data folder, prepared again with another tokenizer
    run('train.py', *TINY, f'--data_dir={root}/reprep', f'--out_dir={root}/reprep_run', '--max_iters=4',
        '--warmup_iters=1', '--taper_start=1', '--taper_end=3', '--lr_decay_iters=4', '--eval_interval=4')
    shutil.copytree(f'{root}/other_tok', f'{root}/reprep', dirs_exist_ok=True)
    shutil.copytree(f'{root}/reprep_run', f'{root}/linkrep_run')  # trained through a link since repointed
    os.symlink(f'{root}/reprep', f'{root}/datalink')
    ckpt = torch.load(f'{root}/linkrep_run/ckpt.pt', weights_only=True)
    ckpt['config']['data_dir'] = f'{root}/datalink'
    torch.save(ckpt, f'{root}/linkrep_run/ckpt.pt')
    open(f'{root}/negated.py', 'w').write('no_tied_head = True\n')
    os.symlink('/dev/zero', f'{root}/zero.py')
    os.symlink('/dev/zero', f'{root}/zero.txt')
    os.makedirs(f'{root}/datas/ts')  # the folder of data folders, as data/ is
    shutil.copy(f'{data_dir}/meta.json', f'{root}/datas/ts/meta.json')
    open(f'{root}/mathstar.py', 'w').write('from math import *\nn_embd = int(sqrt(4096))\n')
    shutil.copytree(data_dir, f'{root}/datafolders/ts512')  # data folders of two tokenizers, in a folder as data/ is
    shutil.copytree(f'{root}/owt', f'{root}/datafolders/owt')
    os.makedirs(f'{root}/assets_full')  # as the committed assets/ hold a full reproduction's results
    json.dump(dict(seeds=[1337, 1338, 1339], settings=dict.fromkeys(['baseline', 'internal', 'all'], {}), train_args=[]),
              open(f'{root}/assets_full/results.json', 'w'))
    open(f'{root}/assets_full/results.md', 'w').write('| setting | val CE |\n')
    shutil.copytree(f'{root}/run', f'{root}/rr_root/results')  # a run trained where reproduce.py puts its results
    open(f'{root}/usefile.py', 'w').write("import os\nout_dir = os.path.join(os.path.dirname(__file__), 'beside')\n")
    os.makedirs(f'{root}/donne\u0301es')  # a name as macOS writes it: e, then the combining acute accent
    shutil.copytree(f'{root}/llama', f'{root}/llama_lfs')  # cloned without git-lfs: pointers for weights
    shutil.copytree(f'{root}/run', f'{root}/gzrun')  # a run's checkpoint compressed to keep, in place and as .pt.xz
    raw = open(f'{root}/run/ckpt.pt', 'rb').read()
    open(f'{root}/gzrun/ckpt.pt', 'wb').write(gzip.compress(raw))
    open(f'{root}/gzrun/old.pt.xz', 'wb').write(lzma.compress(raw))
    open(f'{root}/llama_lfs/model.safetensors', 'w').write('version https://git-lfs.github.com/spec/v1\n'
                                                           'oid sha256:' + '0' * 64 + '\nsize 1234567\n')
    lines = open(SHARED / 'tinystories' / 'train_sample.txt').read().splitlines(keepends=True)[:3000]
    open(f'{root}/mixed_sep.txt', 'w').write(''.join(lines) + '\n<|endoftext|>\nOne more story.\n<|endoftext|>\n')
    open(f'{root}/sets_taper.py', 'w').write('taper_start = 12\n')  # a config file of another schedule
    os.makedirs(f'{root}/gc_h100')  # the kept report of a check on a GPU
    json.dump(dict(environment=dict(torch='2.11.0', python='3.12.3', device='NVIDIA H100 80GB HBM3'),
                   steps=[dict(step='data', ok=True, seconds=4.0, peak_gb=None)]), open(f'{root}/gc_h100/report.json', 'w'))
    os.makedirs(f'{root}/ownexport')  # an export's config.json, its run still there
    json.dump({'model_type': 'llama', 'tapernorm_export': dict(sigma=1.0, alpha=1.0, bound=1e-6, source=f'{root}/trun/ckpt.pt')},
              open(f'{root}/ownexport/config.json', 'w'))
    os.makedirs(f'{root}/lora')  # what PEFT's save_pretrained writes for a LoRA adapter (its weights aside)
    json.dump(dict(peft_type='LORA', base_model_name_or_path='HuggingFaceTB/SmolLM2-135M', r=8),
              open(f'{root}/lora/adapter_config.json', 'w'))
    word_tokenizer(f'{root}/llama_words', 10)  # a Llama with its own tokenizer
    LlamaForCausalLM(LlamaConfig(**llama | {'vocab_size': 13})).save_pretrained(f'{root}/llama_words')
    shutil.copytree(f'{root}/llama_words', f'{root}/llama_owncode')  # a tokenizer of the model's own code
    tokenizer_config = json.load(open(f'{root}/llama_owncode/tokenizer_config.json'))
    json.dump(tokenizer_config | {'tokenizer_class': 'InternLM2Tokenizer', 'auto_map': {
        'AutoTokenizer': ['tokenization_internlm2.InternLM2Tokenizer', None]}},
        open(f'{root}/llama_owncode/tokenizer_config.json', 'w'))
    shutil.copytree(f'{root}/run', f'{root}/gpt2tok_run')  # a run in GPT-2's tokens, trained on {root}/owt
    ckpt = torch.load(f'{root}/run/ckpt.pt', weights_only=True)
    ckpt['tokenizer'] = dict(kind='tiktoken', name='gpt2')
    ckpt['config']['data_dir'] = f'{root}/owt'
    torch.save(ckpt, f'{root}/gpt2tok_run/ckpt.pt')
    shutil.copytree(f'{root}/trun', f'{root}/foldedkept')  # ckpt.pt removed to save space, the folded model kept
    os.remove(f'{root}/foldedkept/ckpt.pt')
    shutil.copytree(f'{root}/run', f'{root}/backuprun')  # the checkpoint renamed by hand to a name of its own
    os.rename(f'{root}/backuprun/ckpt.pt', f'{root}/backuprun/ckpt_backup.pt')
    shutil.copytree(f'{root}/gpt2scratch', f'{root}/gpt2ft')  # a GPT-2 run as a fine-tune of {root}/hf records it
    ckpt = torch.load(f'{root}/gpt2scratch/ckpt.pt', weights_only=True)
    ckpt['config']['init_from'] = f'{root}/hf'
    torch.save(ckpt, f'{root}/gpt2ft/ckpt.pt')
    json.dump(ckpt['config'], open(f'{root}/gpt2ft/config.json', 'w'))  # as train.py records it beside
    shutil.copytree(f'{root}/hf', f'{root}/gpt2export')  # as fold.py --export_hf marks a GPT-2 fine-tune's export
    hc = json.load(open(f'{root}/gpt2export/config.json'))
    hc.update(layer_norm_epsilon=1.0, tapernorm_export=dict(sigma=1.0, alpha=1.0, bound=1e-6, source=f'{root}/gpt2ft/ckpt.pt'))
    json.dump(hc, open(f'{root}/gpt2export/config.json', 'w'))
    gpt2_tokenizer(f'{root}/gpt2export')  # GPT-2's tokenizer travels with the export, as fold.py writes it
    shutil.copytree(f'{root}/run', f'{root}/emptylog')  # a finished run whose log was emptied
    open(f'{root}/emptylog/log.jsonl', 'w').close()


def run_case(case, root, data_dir, servers=None):
    """The row's script on its arguments: in a fork of a warm interpreter started with the row's
    environment (which a fresh process reads as it starts) when servers holds one, else as a
    subprocess. servers: {environment as a tuple of items: ScriptServer}."""
    name, script, args, _, env = case
    args = [a.format(root=root, data=data_dir, shared=SHARED) for a in args]
    if script == 'train.py' and not any(a.startswith('--device') for a in args):
        args.append('--device=cpu')
    server = (servers or {}).get(tuple(sorted((env or {}).items())))
    env = env and {k: v.format(root=root) for k, v in env.items()}
    if server is not None:
        return server.run(script, *args)
    if env and set(env) <= set(RUN_TIME_ENV) and () in (servers or {}):  # read as the script runs: the fork's own
        return servers[()].run(script, *args, env=env)
    return run(script, *args, check=False, env=env, fresh=True)


FRESH_EVERY = 60  # every 60th row, one row of each warm environment and one of RUN_TIME_ENV also run as plain subprocesses
# torchrun's variables, which the scripts read as they run and no import reads: a row that sets only these
# runs in a fork of the plain warm interpreter, with them set in the fork.
RUN_TIME_ENV = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')
SHARED_ENV = 5  # an environment that this many rows set gets a warm interpreter of its own


def run_time_row():
    """The first row whose environment holds RUN_TIME_ENV's variables alone."""
    return next(c for c in CASES if c[4] and set(c[4]) <= set(RUN_TIME_ENV))


def warm_environments():
    """The environments (as sorted tuples of items) that at least SHARED_ENV rows set and that name no
    workspace path, the empty one first."""
    count = Counter(tuple(sorted(c[4].items())) for c in CASES if c[4] and '{' not in ''.join(c[4].values()))
    return [()] + [env for env, n in count.items() if n >= SHARED_ENV]


@pytest.fixture(scope='module')
def outcomes(data_dir, tmp_path_factory):
    """Every case run once, two at a time (this machine's cores), and the files before and after;
    then a sample again as plain subprocesses: every FRESH_EVERY-th case, and one of each warm environment."""
    root = tmp_path_factory.mktemp('errors')
    make_workspace(root, data_dir)
    before = {**digest(root), **digest(data_dir)}
    shared = {env: ScriptServer(tmp_path_factory.mktemp('fork'), dict(env)) for env in warm_environments()[1:]}
    servers = [{(): ScriptServer(tmp_path_factory.mktemp('fork')), **shared} for _ in range(2)]  # for two threads
    halves = [CASES[0::2], CASES[1::2]]
    try:
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(lambda k: [run_case(c, root, data_dir, servers[k]) for c in halves[k]], range(2)))
    finally:
        for server in {s for both in servers for s in both.values()}:
            server.close()
    procs = dict(zip([c[0] for c in halves[0]] + [c[0] for c in halves[1]], done[0] + done[1]))
    sample = CASES[::FRESH_EVERY] + [next(c for c in CASES if tuple(sorted((c[4] or {}).items())) == env)
                                     for env in warm_environments()[1:]] + [run_time_row()]
    with ThreadPoolExecutor(2) as pool:
        fresh = dict(zip([c[0] for c in sample], pool.map(lambda c: run_case(c, root, data_dir), sample)))
    after = {**digest(root), **digest(data_dir)}
    changed = sorted(f for f in before if after.get(f) != before[f])
    return procs, changed, fresh, root


# Inputs next to a rule that are valid: each runs (train.py's memory plan: every check, no training).
ACCEPTED = [  # (case, script, arguments, environment)
    ("a seed with leading zeros, decimal as written", 'train.py', [*T, '--seed=007', '--memory_plan'], None),
    ("sample: an export whose config.json lost its record but kept its eps", 'sample.py',
     ['--init_from={root}/unrecorded_hf', '--device=cpu', '--max_new_tokens=2'], OFFLINE),
    ("a DyT config made another setting by a flag, planned (a plan writes no folder)", 'train.py',
     ['config/dyt_64.py', '--norm=rmsnorm', '--memory_plan'], None),
    ('a data folder under ~, quoted so that the shell left the ~', 'train.py',
     [*TINY, '--data_dir=~/grown', '--out_dir={root}/home_run', '--overwrite', '--max_iters=2', '--warmup_iters=1', '--taper_start=1',
      '--taper_end=2', '--lr_decay_iters=2', '--eval_interval=2'], {'HOME': '{root}'}),
    ('sample: a run folder under ~', 'sample.py', ['--out_dir=~/run', '--device=cpu', '--max_new_tokens=2'],
     {'HOME': '{root}'}),
    ('a folder name in Cyrillic letters', 'train.py', [*TINY, '--data_dir={data}', '--out_dir={root}/\u043f\u0440\u043e\u0433\u043e\u043d',
                                                        '--memory_plan'], None),
    ('a rendezvous address left set alone', 'train.py', [*T, '--memory_plan'],
     {'MASTER_ADDR': 'localhost', 'MASTER_PORT': '29500'}),
    ('an OpenMP thread count per nesting level', 'train.py', [*T, '--memory_plan'], {'OMP_NUM_THREADS': '1,1'}),
    ('a config file with a helper variable and a pathlib.Path', 'train.py', ['{root}/helper.py', *T, '--memory_plan'],
     None),
    ('a config file whose values sit under if __name__', 'train.py', ['{root}/main_block.py', *T, '--memory_plan'], None),
    ('a config file that imports a function and numpy numbers', 'train.py', ['{root}/imports.py', *T, '--memory_plan'],
     None),
    ('a prompt file named after FILE: and a space', 'sample.py', ['--out_dir={root}/run', '--device=cpu',
                                                                  '--start=FILE: {root}/prompt.txt', '--max_new_tokens=4'], None),
    ("n_kv_head=0 (n_head's) for an HF Llama with a key/value head per query head", 'train.py',
     [*T, *LLAMA_HF, '--init_from={root}/llama_mha', '--out_dir={root}/mha_run', '--max_iters=2', '--warmup_iters=1',
      '--taper_start=1', '--taper_end=2', '--lr_decay_iters=2', '--eval_interval=2'], None),
    ('memory: the plan of an HF model folder, shaped by its config.json', 'memory.py', ['--init_from={root}/hf'],
     OFFLINE),
    ('prepare_tinystories: a prepared folder copied, its files in another time order', 'prepare_tinystories.py',
     ['--input_file={shared}/tinystories/train_sample.txt', '--val_file={shared}/tinystories/valid_sample.txt',
      '--vocab_size=512', '--out_dir={root}/copied'], None),
    ('fold: a copied run folder, folded again', 'fold.py', ['--out_dir={root}/trun_copy'], None),
    ('fold: a copied run folder trained further, folded again', 'fold.py', ['--out_dir={root}/trun_ext'], None),
    ('prepare_tinystories: files whose names hold a comma, listed with a space', 'prepare_tinystories.py',
     ['--input_file={root}/small.txt, {root}/stories,v2.txt', '--vocab_size=512', '--out_dir={root}/commaprep'], None),
    ('resume a folder whose --overwrite run was killed before its first checkpoint (the run put back)', 'train.py',
     ['--init_from=resume', '--out_dir={root}/killed_overwrite2', '--eval_only', '--device=cpu'], None),
    ('a resume that changes the scale loss weight (lambda)', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_aux', '--aux_weight=0.5', '--device=cpu'], None),
    ("sample: a checkpoint saved from inside DataParallel ('module.' before every weight)", 'sample.py',
     ['--out_dir={root}/dp_prefixed', '--device=cpu', '--max_new_tokens=4'], None),
    ("fold: a checkpoint of a torch.compile'd model ('_orig_mod.' before every weight)", 'fold.py',
     ['--out_dir={root}/compiled_prefixed'], None),
    ('prepare_tinystories: such a copy, prepared before meta.json held the hash', 'prepare_tinystories.py',
     ['--input_file={shared}/tinystories/train_sample.txt', '--val_file={shared}/tinystories/valid_sample.txt',
      '--vocab_size=512', '--out_dir={root}/copied_old'], None),
    ("sample: a model with more embedding rows than its tokenizer's ids, hot (it draws the tokenizer's alone)",
     'sample.py', ['--out_dir={root}/padded', '--device=cpu', '--temperature=5', '--top_k=1024', '--num_samples=4',
                   '--max_new_tokens=48'], None),
    ('a config file named in capitals (.PY)', 'train.py', ['{root}/upper.PY', *T, '--memory_plan'], None),
    ('a resume of a run whose log an editor saved with a byte-order mark', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_bom', '--stop_iter=24', '--device=cpu'], None),
    ('a resume of a run whose last evaluation logged a NaN loss', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_nan', '--stop_iter=24', '--device=cpu'], None),
    ('a resume of a run whose log a tool rewrote with sorted keys and no spaces', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_jq', '--stop_iter=24', '--device=cpu'], None),
    ('a resume of a run whose log a tool rewrote with numbers to 10 digits', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_round', '--stop_iter=24', '--device=cpu'], None),
    ('a resume of a run whose log a tool rewrote with every number a float ("iter": 8.0)', 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_floats', '--stop_iter=24', '--device=cpu'], None),
    ("a resume of a run without FakeLN that sets FakeLN's momentum (noted: no effect)", 'train.py',
     ['--init_from=resume', '--out_dir={root}/half_fm', '--fakeln_momentum=0.5', '--device=cpu'], None),
    ('sample: a prompt that begins with @', 'sample.py', ['--out_dir={root}/run', '--device=cpu', '--start=@everyone',
                                                           '--max_new_tokens=2'], None),
    ('a config file saved with a byte-order mark', 'train.py', ['{root}/bom.py', *T, '--memory_plan'], None),
    ('a finished run evaluated with --eval_only beside a max_iters no longer past warmup_iters', 'train.py',
     ['--init_from=resume', '--out_dir={root}/run', '--max_iters=2', '--eval_only', '--device=cpu'], None),
    ('a config file with a helper function of its own', 'train.py', ['{root}/helper_fn.py', *T, '--memory_plan'], None),
    ('a config file that computes a value in a loop', 'train.py', ['{root}/loop_ok.py', *T, '--memory_plan'], None),
    ('sample: a prompt file named with ~ after FILE:', 'sample.py', ['--out_dir={root}/run', '--device=cpu',
                                                                    '--start=FILE:~/prompt.txt', '--max_new_tokens=4'],
     {'HOME': '{root}'}),
    ("plot: a run whose log's last line a kill cut short (left out, with a note)", 'plot.py',
     ['{root}/tornlog', '--out_dir={root}/pltorn'], None),
    ("plot: a run whose config.json was removed (its checkpoint holds the config)", 'plot.py',
     ['{root}/nocfg', '--out_dir={root}/plnocfg'], None),
    ('plot: a run whose config.json is cut short (its checkpoint holds the config)', 'plot.py',
     ['{root}/cutcfg', '--out_dir={root}/plcutcfg'], None),
    ("plot: a run whose config.json an editor saved with a byte-order mark", 'plot.py',
     ['{root}/bomrun', '--out_dir={root}/plbom'], None),
    ('plot: a file-name prefix with an en dash', 'plot.py', ['{root}/run', '--out_dir={root}/pldash',
                                                            '--prefix=fig 1 \u2013 '], None),
    ('a config file that places out_dir beside itself with __file__', 'train.py', ['{root}/usefile.py', *T,
                                                                                    '--memory_plan'], None),
    ("a config file that star-imports math (its pi and e are no settings)", 'train.py', ['{root}/mathstar.py', *T,
                                                                                         '--memory_plan'], None),
]


@pytest.mark.parametrize('case', ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_a_valid_input_next_to_a_rule_is_accepted(outcomes, data_dir, case):
    root = outcomes[3]
    proc = run_case((case[0], case[1], case[2], None, case[3]), root, data_dir, {(): session_server()})
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_each_bad_input_is_one_sentence(outcomes, case):
    proc = outcomes[0][case[0]]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert 'Traceback' not in proc.stderr and 1 <= len(lines) <= 2, proc.stderr[-3000:]
    assert case[3] in lines[-1], lines[-1]


def test_a_resume_puts_its_log_in_place_of_a_link_and_says_so(outcomes):
    """A run writes its files in its own folder: a resume whose log.jsonl links to a log kept elsewhere notes the
    link, puts the log (the linked rows, then the resumed ones) in its place, and leaves the linked file as it was;
    a config.json with another name (a hard link) is noted too, and its other name keeps what it held."""
    root = outcomes[3]
    target, other = f'{root}/logs/linklog.jsonl', f'{root}/logs/linklog.json'
    before, config = open(target, 'rb').read(), open(other, 'rb').read()
    proc = run('train.py', '--init_from=resume', f'--out_dir={root}/linklog', '--stop_iter=24', '--device=cpu')
    assert 'log.jsonl is a symbolic link (to' in proc.stdout and 'keeps what it holds' in proc.stdout, proc.stdout
    assert 'config.json has 1 other name (a hard link)' in proc.stdout, proc.stdout
    assert open(target, 'rb').read() == before and open(other, 'rb').read() == config
    log = f'{root}/linklog/log.jsonl'
    assert not os.path.islink(log) and open(log, 'rb').read().startswith(before) and \
        json.loads(open(log).read().splitlines()[-1])['iter'] == 24


def test_a_finished_runs_settings_given_as_a_config_file_train_again_as_advised(outcomes, tmp_path):
    """A finished run's config.json named as a config file is told how to train those settings again: the
    command it gives, run in a shell, writes a config file from which train.py trains the same run again (the same
    seed and data: the same losses, row for row), and the run's own folder is left as it was."""
    root = outcomes[3]
    shutil.copytree(f'{root}/run', tmp_path / 'done')
    before = digest(tmp_path / 'done')
    proc = run('train.py', str(tmp_path / 'done' / 'config.json'), check=False, cwd=tmp_path)
    assert proc.returncode == 1 and 'has finished (iter 8 of max_iters=8)' in proc.stderr, proc.stderr
    write = re.search(r"`(python -c .*? > rerun\.py)`", proc.stderr).group(1)
    subprocess.run(write, shell=True, cwd=tmp_path, check=True)
    run('train.py', 'rerun.py', f'--out_dir={tmp_path / "again"}', cwd=tmp_path)
    rows = [[json.loads(line) for line in open(folder / 'log.jsonl')] for folder in (tmp_path / 'done', tmp_path / 'again')]
    assert [r['iter'] for r in rows[0]] == [r['iter'] for r in rows[1]]
    for old, new in zip(*rows):  # the same computation again: equal up to rounding at worst
        assert math.isclose(old['loss'], new['loss'], rel_tol=1e-6), (old, new)
    assert digest(tmp_path / 'done') == before


def test_fold_puts_its_checkpoint_in_place_of_a_link_and_says_so(outcomes, tmp_path):
    """fold.py over a ckpt_folded.pt that is a symbolic link (to a folder of models) notes it, writes its own file
    in the link's place, and leaves the linked file as it was."""
    root = outcomes[3]
    shutil.copytree(f'{root}/trun', tmp_path / 'run')
    os.replace(tmp_path / 'run' / 'ckpt_folded.pt', tmp_path / 'kept.pt')
    os.symlink(tmp_path / 'kept.pt', tmp_path / 'run' / 'ckpt_folded.pt')
    before = (tmp_path / 'kept.pt').read_bytes()
    proc = run('fold.py', f'--out_dir={tmp_path / "run"}')
    assert f"ckpt_folded.pt is a symbolic link (to {tmp_path / 'kept.pt'}): fold.py writes its own file" in proc.stdout
    assert (tmp_path / 'kept.pt').read_bytes() == before and not os.path.islink(tmp_path / 'run' / 'ckpt_folded.pt')


@pytest.mark.parametrize('script', ['plot.py', 'diagnose.py'])
def test_a_figure_that_is_a_link_is_replaced_not_written_through(outcomes, tmp_path, script):
    """plot.py's and diagnose.py's figure at a path that is a symbolic link (to a shared folder of figures)
    is noted and written in the link's place: the figure it linked to keeps every byte."""
    root = outcomes[3]
    (tmp_path / 'shared').mkdir()
    (tmp_path / 'figs').mkdir()
    draw = {'plot.py': lambda out: ('plot.py', f'{root}/run', f'--out_dir={out}'),
            'diagnose.py': lambda out: ('diagnose.py', f'--out_dir={root}/trun', '--max_windows=4',
                                        f'--plot={out}/loss.png')}[script]
    run(*draw(tmp_path / 'shared'))  # the script's own figure, which it may replace
    os.symlink(tmp_path / 'shared' / 'loss.png', tmp_path / 'figs' / 'loss.png')
    before = (tmp_path / 'shared' / 'loss.png').read_bytes()
    proc = run(*draw(tmp_path / 'figs'))
    assert f"loss.png is a symbolic link (to {tmp_path / 'shared' / 'loss.png'}): {script} writes its own file" \
        in proc.stdout, proc.stdout
    assert (tmp_path / 'shared' / 'loss.png').read_bytes() == before
    assert not os.path.islink(tmp_path / 'figs' / 'loss.png') and (tmp_path / 'figs' / 'loss.png').stat().st_size > 0


def test_a_summary_says_that_its_flags_replace_the_config_files_own_values():
    """memory.py --summary plans each config file with the flags given after them: a flag that replaces a file's own
    value (--n_embd=64 beside a file of width 128) is noted, naming the file and its value; none is noted without."""
    files = ['config/taper_internal_64.py', 'config/taper_internal_128.py']
    proc = run('memory.py', '--summary', *files, '--n_embd=64')
    assert "note: the flags apply to every config file of the summary" in proc.stdout and \
        "--n_embd replaces config/taper_internal_128.py's n_embd=128" in proc.stdout, proc.stdout
    assert 'note:' not in run('memory.py', '--summary', *files).stdout


def test_no_file_that_existed_is_changed(outcomes):
    assert outcomes[1] == []


def test_a_fresh_process_gives_what_the_fork_gave(outcomes):
    """The rows run in forks of a warm interpreter; a sample of them, run as plain subprocesses, ends
    the same way: the same exit code and the same stderr."""
    procs, _, fresh, _ = outcomes
    sampled = {tuple(sorted((c[4] or {}).items())) for c in CASES if c[0] in fresh}
    assert len(fresh) >= len(CASES) // FRESH_EVERY and sampled >= set(warm_environments())
    assert run_time_row()[0] in fresh
    for name, proc in fresh.items():
        assert (proc.returncode, proc.stderr.strip()) == (procs[name].returncode, procs[name].stderr.strip()), name


if __name__ == '__main__':  # the table, for the README and notes
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, 'data')
        import prepare_tinystories
        prepare_tinystories.main(['--input_file', str(SHARED / 'tinystories' / 'train_sample.txt'),
                                  '--val_file', str(SHARED / 'tinystories' / 'valid_sample.txt'),
                                  '--vocab_size', '512', '--out_dir', data])
        root = os.path.join(tmp, 'ws')
        os.makedirs(root)
        make_workspace(root, data)
        before = {**digest(root), **digest(data)}
        print('| case | script | exit | message | traceback |\n|---|---|---|---|---|')
        for case in CASES:
            proc = run_case(case, root, data)
            last = (proc.stderr.strip().splitlines() or [''])[-1].replace(tmp, '…').replace('|', '\\|')
            print(f"| {case[0]} | {case[1]} | {proc.returncode} | {last} | {'Traceback' in proc.stderr} |",
                  flush=True)
        after = {**digest(root), **digest(data)}
        changed = [f for f in before if after.get(f) != before[f]]
        print(json.dumps(dict(cases=len(CASES), files_checked=len(before), files_changed=len(changed))))
        sys.exit(1 if changed else 0)
