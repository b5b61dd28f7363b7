"""
transformers in one room: HF checkpoints into this repository's GPT, and folded norm-free models back
out as folders transformers loads.

    model = from_pretrained('gpt2-medium', taper='all', aux_loss='fixed')   # GPT2LMHeadModel weights
    model = from_pretrained('HuggingFaceTB/SmolLM2-135M', block_size=2048)  # LlamaForCausalLM weights
    export_hf(model, fold_model(model), 'folded-hf')   # All-Taper (or FakeLN) at g = 0: loads in transformers

GPT-2 becomes arch='gpt2' (LayerNorm, TaperLN when tapered). A Llama-family model becomes arch='llama'
with every shape read from its config: grouped-query attention, rope_theta (and Llama-3's
rope scaling), rms_norm_eps, a tied or untied head, intermediate_size, attention/MLP biases and the
context (max_position_embeddings, or a shorter block_size). RMSNorm is exactly TaperNorm's case.
A field this model cannot compute stops with one sentence naming it.
"""

import difflib
import functools
import json
import math
import os
import shlex
from types import SimpleNamespace

import torch

from configurator import dead_link, init_from_mistake
from model import GPT, GPTConfig

# HF GPT-2 stores these as Conv1D, (in, out); nn.Linear wants (out, in).
HF_CONV1D = ('attn.c_attn.weight', 'attn.c_proj.weight', 'mlp.c_fc.weight', 'mlp.c_proj.weight')
# Ours <- HF Llama, per layer: one fused QKV matrix from three, and SwiGLU's w1/w3/w2 = gate/up/down.
LLAMA_LAYER = {'ln_1.weight': ['input_layernorm.weight'],
               'attn.c_attn': ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'],
               'attn.c_proj': ['self_attn.o_proj'],
               'ln_2.weight': ['post_attention_layernorm.weight'],
               'mlp.w1': ['mlp.gate_proj'], 'mlp.w3': ['mlp.up_proj'], 'mlp.w2': ['mlp.down_proj']}
SHAPE_KEYS = {'arch', 'vocab_size', 'n_layer', 'n_head', 'n_kv_head', 'n_embd', 'norm', 'norm_eps',
              'mlp_hidden', 'rope_theta', 'rope_scaling', 'tied_head', 'attn_bias', 'mlp_bias'}


def init_from_conflict(init_from, out_dir, ckpt, does):
    """sample.py's and evaluate.py's rule for what they load: a run's checkpoint (resume) or an HF model,
    never neither and never flags of both. One sentence when the flags disagree, else None; does names
    the script and what it does (e.g. 'sample.py samples')."""
    mistake = init_from_mistake(init_from, ['resume', 'scratch'])
    if mistake:
        return mistake
    if init_from == 'scratch':
        return (f"{does} a trained model: --init_from=resume (the run in --out_dir) or an HF model's name or "
                f"folder")
    if init_from != 'resume' and (out_dir != 'out' or ckpt != 'ckpt.pt'):
        flag = f"--out_dir={out_dir}" if out_dir != 'out' else f"--ckpt={ckpt}"
        return (f"{flag} names a run to load (its folder, or its checkpoint file), but --init_from={init_from} "
                f"loads an HF model: drop one of them")
    if init_from != 'resume' and os.path.isfile(init_from) and init_from.endswith('.pt'):  # a run's checkpoint file
        folder, name = os.path.split(init_from)
        return (f"--init_from={init_from} names a checkpoint file, and {does.split()[0]} reads a run's checkpoint "
                f"from its folder: --out_dir={folder or '.'}" + (f" --ckpt={name}" if name != 'ckpt.pt' else ""))
    return local_mistake(init_from) if init_from != 'resume' else None


def offline_without_network():
    """Without a network, transformers retries the hub for about 30 s before it looks in its cache:
    when the hub's host cannot be reached within 3 s, go offline at once, as HF_HUB_OFFLINE=1 does
    (a cached model still loads, an uncached one fails at once)."""
    import socket
    from urllib.parse import urlparse
    import huggingface_hub.constants as hub
    if hub.HF_HUB_OFFLINE:
        return
    try:
        socket.create_connection((urlparse(hub.ENDPOINT).hostname, 443), timeout=3).close()
    except OSError:
        hub.HF_HUB_OFFLINE = True


def adapter_base(folder):
    """The base model a PEFT adapter folder names (adapter_config.json's base_model_name_or_path), or None."""
    import json
    try:
        with open(os.path.join(folder, 'adapter_config.json'), encoding='utf-8') as f:
            base = json.load(f).get('base_model_name_or_path')
    except (OSError, ValueError, AttributeError):
        return None
    return base if isinstance(base, str) and base else None


def local_mistake(name_or_dir):
    """The sentence for a local path that is no save_pretrained folder (a PEFT adapter, a folder without
    config.json, one file of a model, a run of this repository, a path that leads nowhere), said before
    transformers is asked and before anything else is read; None for a folder to load or a hub name."""
    config_json = os.path.join(name_or_dir, 'config.json')
    if os.path.isdir(name_or_dir) and not os.path.isfile(config_json) and \
            os.path.isfile(os.path.join(name_or_dir, 'adapter_config.json')):  # PEFT's save_pretrained of a LoRA
        base = adapter_base(name_or_dir)
        return (f"{name_or_dir} holds a PEFT adapter (adapter_config.json), not a whole model: merge it into its "
                f"base model{f' ({base})' if base else ''} with PeftModel.from_pretrained(...).merge_and_unload(), "
                f"save that with save_pretrained, and pass the folder")
    broken = [f for f in sorted(os.listdir(name_or_dir)) if os.path.islink(os.path.join(name_or_dir, f))
              and not os.path.exists(os.path.join(name_or_dir, f))] if os.path.isdir(name_or_dir) else []
    if broken:  # a snapshot of the HF cache copied with cp -r: its files are links to ../../blobs/
        return (f"{name_or_dir} holds {', '.join(broken[:2])}{', ...' if len(broken) > 2 else ''} as symbolic "
                f"link{'s' if len(broken) > 1 else ''} to {os.readlink(os.path.join(name_or_dir, broken[0]))}, which "
                f"is not there (a snapshot copied out of the HF cache with cp -r?): copy it again with cp -rL, which "
                f"copies the files the links point to, or pass the hub name")
    if os.path.isdir(name_or_dir) and not os.path.isfile(config_json):
        return (f"{name_or_dir} is not a folder written by save_pretrained (it has no config.json): pass one, or a "
                f"hub name such as gpt2")
    if os.path.isfile(name_or_dir):
        folder = os.path.dirname(name_or_dir) or '.'
        if os.path.isfile(os.path.join(folder, 'config.json')) and not os.path.isfile(os.path.join(folder, 'ckpt.pt')):
            return f"{name_or_dir} is one file of the save_pretrained folder {folder}: pass the folder itself, {folder}"
        if name_or_dir.endswith('.pt'):
            run = folder if os.path.isfile(os.path.join(folder, 'log.jsonl')) else '<run>'
            try:  # only a norm-free model exports (All-Taper, FakeLN): another run is continued instead
                with open(os.path.join(folder, 'config.json'), encoding='utf-8-sig') as f:
                    setting = json.load(f)
                exports = setting.get('taper') == 'all' or bool(setting.get('fakeln'))
            except (OSError, ValueError, AttributeError):
                exports = True  # unknown: both ways are offered
            export = (f"from an HF folder, which `python fold.py --out_dir={shlex.quote(run)} --export_hf=<folder>` "
                      f"writes from its run, or " if exports else "from an HF folder (fold.py exports only All-Taper "
                      "and FakeLN runs, and this run keeps a norm), or ")
            return (f"{name_or_dir} is a checkpoint file, not a folder written by save_pretrained: a new run starts "
                    f"{export}continue that run in a copy of its folder (cp -r {shlex.quote(run)} "
                    f"<copy>, then --init_from=resume --out_dir=<copy>)")
        return (f"{name_or_dir} is a file, not a folder written by save_pretrained: pass the folder that holds its "
                f"config.json and weights, or a hub name such as gpt2")
    parent = os.path.dirname(os.path.normpath(name_or_dir))
    if not os.path.isdir(name_or_dir) and (name_or_dir.startswith(('.', '/', '~')) or parent and os.path.isdir(parent)):
        # 'runs/mdl' when runs/ is a folder here is a path, not a hub model's owner/name
        close = difflib.get_close_matches(os.path.basename(os.path.normpath(name_or_dir)),
                                          os.listdir(parent or '.') if os.path.isdir(parent or '.') else [], n=1)
        hint = f" (did you mean {os.path.join(parent, close[0])}?)" if close and close[0] != os.path.basename(
            os.path.normpath(name_or_dir)) else ""
        if dead_link(name_or_dir, 'the model\'s folder'):
            return dead_link(name_or_dir, "the model's folder")
        return f"no folder at {name_or_dir}{hint}: pass a folder written by save_pretrained, or a hub name such as gpt2"
    if os.path.isdir(name_or_dir) and os.path.isfile(os.path.join(name_or_dir, 'ckpt.pt')):
        try:  # the model a fine-tune started from, as the run's config.json records it
            with open(os.path.join(name_or_dir, 'config.json'), encoding='utf-8-sig') as f:
                origin = json.load(f).get('init_from')
        except (OSError, ValueError, AttributeError):
            origin = None
        new = (f"; a new fine-tune starts from an HF model, e.g. --init_from={origin}, the one this run started from"
               if isinstance(origin, str) and origin not in ('scratch', 'resume') else
               "; a new run starts from an HF model, which fold.py --export_hf writes from a finished All-Taper run")
        return (f"{name_or_dir} is a run of this repository (it holds ckpt.pt), not a folder written by "
                f"save_pretrained: continue it with --init_from=resume --out_dir={name_or_dir} (copy the folder "
                f"first to go on in a new one){new}")
    if os.path.isfile(config_json):
        with open(config_json, 'rb') as f:
            if f.read(3) == b'\xef\xbb\xbf':
                return (f"{config_json} starts with a byte-order mark (an editor's), which transformers cannot "
                        f"read: save it as UTF-8 without one")
    return None


def own_code(folder):
    """One sentence when a local folder's config.json or tokenizer_config.json names classes of the folder's
    own code (auto_map), which transformers runs only with trust_remote_code (and else asks at the terminal
    whether to run it); this repository runs none. None otherwise."""
    for name in ('config.json', 'tokenizer_config.json'):
        try:
            with open(os.path.join(str(folder), name), encoding='utf-8-sig') as f:
                auto_map = json.load(f).get('auto_map')
        except (OSError, ValueError, AttributeError):
            continue
        if auto_map:
            first = next(iter(auto_map.values())) if isinstance(auto_map, dict) else auto_map
            first = next((c for c in first if c), first) if isinstance(first, (list, tuple)) else first
            return (f"{folder}'s {name} names classes of the folder's own code (auto_map: {first}), which transformers "
                    f"runs only with trust_remote_code, and this repository runs none: save the model with "
                    f"transformers' own classes (LlamaForCausalLM, GPT2LMHeadModel, a fast tokenizer.json) and pass "
                    f"that folder")
    return None


def load_hf(hf_class, name_or_dir):
    """hf_class.from_pretrained(name_or_dir), or one sentence that says what to do instead."""
    from transformers.utils import logging
    logging.disable_progress_bar()  # a weight-loading bar on stderr is noise in a script's output
    mistake = local_mistake(name_or_dir) or own_code(name_or_dir)
    if mistake:
        raise ValueError(mistake)
    if os.path.isdir(name_or_dir):  # whatever a damaged local folder raises (a truncated safetensors file too)
        try:
            return fitting(hf_class, name_or_dir)
        except ValueError as e:
            if str(e).startswith(str(name_or_dir)):
                raise
            reason = first_line(e)
            raise ValueError(f"transformers could not read {name_or_dir} ({reason}): write it again with "
                             f"save_pretrained, or download it again") from None
        except Exception as e:
            reason = first_line(e)
            raise ValueError(f"transformers could not read {name_or_dir} ({reason}): write it again with "
                             f"save_pretrained, or download it again") from None
    offline_without_network()
    try:
        return hf_class.from_pretrained(name_or_dir)
    except (OSError, ValueError) as e:
        if isinstance(e, ValueError):
            raise
        raise ValueError(f"could not download {name_or_dir}: no network, or no such model on the hub; "
                         f"pass a local directory written by save_pretrained") from None


def fitting(hf_class, name_or_dir):
    """hf_class.from_pretrained(name_or_dir), refusing a model whose weights do not fit its config:
    transformers would fill the missing ones with random values and only log a report."""
    from transformers import PreTrainedModel
    from transformers.utils import logging
    if not (isinstance(hf_class, type) and issubclass(hf_class, PreTrainedModel)):
        return hf_class.from_pretrained(name_or_dir)
    with open(os.path.join(name_or_dir, 'config.json'), encoding='utf-8-sig') as f:
        headless = no_lm_head(name_or_dir, json.load(f).get('architectures'))
    if headless:
        raise ValueError(headless)
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # its load report: said below in one sentence instead
    try:
        model, info = hf_class.from_pretrained(name_or_dir, output_loading_info=True)
    except RuntimeError as e:  # a weight of another shape than config.json gives: transformers refuses it
        if 'ignore_mismatched_sizes' not in str(e):
            raise
        raise ValueError(unfit(name_or_dir, mismatch(hf_class, name_or_dir))) from None
    finally:
        logging.set_verbosity(verbosity)
    bad = [k for k in ('missing_keys', 'unexpected_keys', 'mismatched_keys') if info.get(k)]
    if bad:
        example = sorted(info[bad[0]])[0]
        example = example if isinstance(example, str) else example[0]
        raise ValueError(unfit(name_or_dir, f"{len(info[bad[0]])} {bad[0].replace('_', ' ')}, e.g. {example}"))
    untied = untied_head(model, name_or_dir)
    if untied:
        raise ValueError(untied)
    return model


def no_lm_head(name_or_dir, architectures):
    """One sentence when config.json's architectures name only models without a language-model head (a
    classifier, a bare GPT2Model); None otherwise, or when it names none."""
    if architectures and not any(str(a).endswith(('ForCausalLM', 'LMHeadModel')) for a in architectures):
        return (f"{name_or_dir} holds a {architectures[0]}, which has no language-model head to predict tokens "
                f"with: pass a causal language model's folder (saved from GPT2LMHeadModel or LlamaForCausalLM)")
    return None


def untied_head(model, name_or_dir):
    """One sentence when config.json ties the head to the embedding but the folder holds a head of its
    own that differs: transformers would drop that head without a word. None otherwise."""
    from safetensors import safe_open
    if not getattr(model.config, 'tie_word_embeddings', False):
        return None
    embedding = model.get_input_embeddings().weight
    for file in sorted(f for f in os.listdir(name_or_dir) if f.endswith('.safetensors')):
        with safe_open(os.path.join(name_or_dir, file), 'pt') as f:
            if 'lm_head.weight' in f.keys() and not torch.equal(f.get_tensor('lm_head.weight').to(embedding.dtype),
                                                                embedding.detach()):
                return (f"{name_or_dir}'s config.json ties the head to the embedding (tie_word_embeddings=true), "
                        f"but {file} holds an lm_head.weight of its own, which that would drop: set "
                        f"\"tie_word_embeddings\": false in config.json to use it")
    return None


def first_line(error):
    """An exception's message in one line: its first, or, when that only introduces the next ('Class
    validation error ...:'), both."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()] or [type(error).__name__]
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(':') and len(lines) > 1 else lines[0]


def unfit(name_or_dir, why):
    """The sentence for a folder whose weights do not fit its config.json, why saying how."""
    return (f"{name_or_dir}'s weights do not fit its config.json ({why}): write the folder again with "
            f"save_pretrained from the model it holds")


def mismatch(hf_class, name_or_dir):
    """The first weight whose shape in name_or_dir's safetensors files differs from the shape its
    config.json gives, as words ('model.embed_tokens.weight is 512 x 64, config.json makes it 600 x 64')."""
    return misfit(name_or_dir, hf_class) or "a weight's shape differs from what config.json gives"


def misfit(name_or_dir, hf_class=None):
    """How the weights in name_or_dir's safetensors files fail to fit the model its config.json gives, in
    words (a weight of another shape, one missing, one extra), read from the files' headers alone: None
    when they fit, or when the folder holds no safetensors files (from_pretrained then says)."""
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM
    files = sorted(f for f in os.listdir(name_or_dir) if f.endswith('.safetensors'))
    if not files:
        return None
    hc = AutoConfig.from_pretrained(name_or_dir)
    with torch.device('meta'):
        model = hf_class(hc) if hf_class else AutoModelForCausalLM.from_config(hc)
    wanted = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    held = {}
    for file in files:
        with safe_open(os.path.join(name_or_dir, file), 'pt') as f:
            held |= {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}
    size = lambda shape: ' x '.join(map(str, shape))
    for key in wanted:  # the model's own order: the same weight named on every run
        if key in held and held[key] != wanted[key]:
            return f"{key} is {size(held[key])}, config.json makes it {size(wanted[key])}"
    tied = getattr(hc, 'tie_word_embeddings', False)
    missing = sorted(k for k in wanted.keys() - held.keys() if not (tied and k == 'lm_head.weight'))
    extra = sorted(held.keys() - wanted.keys())
    if missing:
        return f"{len(missing)} weights config.json needs are missing, e.g. {missing[0]}"
    if extra:
        return f"{len(extra)} weights are more than config.json needs, e.g. {extra[0]}"
    return None


@functools.cache  # asked more than once a run: its note is said once
def gpt2_vocabulary(path):
    """Whether the tokenizer.json at path has GPT-2's 50,257 tokens, perhaps with special tokens added after
    them (a pad token: text encodes as GPT-2's); a damaged file is taken to be GPT-2's, as the folder's model
    type says."""
    from tokenizers import Tokenizer
    try:
        tok = Tokenizer.from_file(path)
        added = {i: t for i, t in tok.get_added_tokens_decoder().items() if i >= 50257}
        return tok.get_vocab_size(with_added_tokens=True) - len(added) == 50257 and \
            all(t.special for t in added.values())  # <|endoftext|> is in the model's vocabulary or added, as saved
    except Exception as e:  # tokenizers raises its own exception types
        print(f"note: {path} cannot be read ({str(e).splitlines()[0][:120] if str(e) else type(e).__name__}), "
              f"so GPT-2's own tokenizer (tiktoken's) stands in for it, as the folder's model type is GPT-2")
        return True


class TokenizerMismatch(ValueError):
    """An HF folder whose tokenizer cannot be its model's: no vocabulary, or more ids than embedding rows."""


def tokenizer_reference(name_or_dir):
    """The checkpoint's tokenizer reference for an HF model (see train.py): GPT-2's BPE by name, any
    other model's own fast tokenizer as its tokenizer.json text. A GPT-2 folder whose tokenizer.json
    holds another vocabulary than GPT-2's 50,257 tokens (fold.py's export of a run trained on other
    tokens) reads its own."""
    from transformers import AutoConfig, AutoTokenizer
    hc = load_hf(AutoConfig, name_or_dir)
    files = ('tokenizer.json', 'tokenizer_config.json', 'tokenizer.model')
    if hc.model_type == 'gpt2':
        own = os.path.join(name_or_dir, 'tokenizer.json')
        if os.path.isdir(name_or_dir) and is_export(name_or_dir) and hc.vocab_size < 50257 and \
                not any(os.path.isfile(os.path.join(name_or_dir, f)) for f in files):  # its own tokenizer, deleted
            raise ValueError(f"{name_or_dir} is an export of a run trained on its own {hc.vocab_size}-token "
                             f"vocabulary, and holds none of its tokenizer files ({', '.join(files)}): export it "
                             f"again (fold.py --export_hf writes them), or copy them back")
        if not os.path.isfile(own) or gpt2_vocabulary(own):
            return dict(kind='tiktoken', name='gpt2')
    if os.path.isdir(name_or_dir) and not any(os.path.isfile(os.path.join(name_or_dir, f)) for f in files):
        raise ValueError(f"{name_or_dir} holds no tokenizer files ({', '.join(files)}): save the model's tokenizer "
                         f"there too, with tokenizer.save_pretrained")
    tokenizer = load_hf(AutoTokenizer, name_or_dir)
    if len(tokenizer.get_vocab()) <= len(set(tokenizer.all_special_tokens)):  # transformers builds one anyway
        raise TokenizerMismatch(f"{name_or_dir}'s tokenizer holds no vocabulary, only its special tokens (a "
                         f"tokenizer_config.json without tokenizer.json?): save the model's tokenizer there too, "
                         f"with tokenizer.save_pretrained")
    rows = load_hf(AutoConfig, name_or_dir).vocab_size
    if len(tokenizer) > rows:
        raise TokenizerMismatch(f"{name_or_dir}'s tokenizer has {len(tokenizer)} ids, but the model's embedding has "
                         f"{rows} rows: its tokenizer is another model's; save the model's own tokenizer there")
    if len(tokenizer) < 0.9 * rows and rows - len(tokenizer) > 1024:  # a vocabulary padded for speed adds far fewer
        raise TokenizerMismatch(f"{name_or_dir}'s tokenizer has {len(tokenizer):,} ids for the model's {rows:,} embedding "
                                f"rows, far fewer than a vocabulary padded for speed leaves: its tokenizer is another "
                                f"model's; save the model's own tokenizer there")
    return dict(kind='hf', json=tokenizer.backend_tokenizer.to_str(), eos_id=tokenizer.eos_token_id,
                bos_id=tokenizer.bos_token_id)


# --- loading --------------------------------------------------------------------------------------

# The numeric fields of each model type's config.json that shape the model.
NUMBERS = {'gpt2': ('vocab_size', 'n_positions', 'n_embd', 'n_layer', 'n_head', 'n_inner', 'layer_norm_epsilon'),
           'llama': ('vocab_size', 'max_position_embeddings', 'hidden_size', 'intermediate_size', 'num_hidden_layers',
                     'num_attention_heads', 'num_key_value_heads', 'head_dim', 'rms_norm_eps', 'rope_theta')}


def lfs_pointer(folder):
    """The first weight file in a local folder that is a Git LFS pointer (a small text file naming the
    real one), or None."""
    if not os.path.isdir(str(folder)):
        return None
    for name in sorted(os.listdir(folder)):
        path = os.path.join(str(folder), name)
        if name.endswith(('.safetensors', '.bin')) and os.path.isfile(path) and os.path.getsize(path) < 1024:
            with open(path, 'rb') as f:
                if f.read(24) == b'version https://git-lfs.':
                    return path
    return None


def llama3_rope_lacking(name_or_dir):
    """The fields a local config.json's Llama-3 RoPE scaling lacks, as it is written (transformers fills a
    lacking original_max_position_embeddings in from max_position_embeddings as it reads it)."""
    try:
        with open(os.path.join(str(name_or_dir), 'config.json'), encoding='utf-8') as f:
            raw = json.load(f)
    except (OSError, ValueError):
        return []  # not a local folder, or not its config: the loader says what is wrong
    if not isinstance(raw, dict):
        return []
    rope = raw.get('rope_scaling') or raw.get('rope_parameters')
    if not isinstance(rope, dict) or rope.get('rope_type', rope.get('type')) != 'llama3':
        return []
    return [k for k in ('factor', 'low_freq_factor', 'high_freq_factor', 'original_max_position_embeddings')
            if k not in rope]


def pretrained_config(name_or_dir, block_size=None, **overrides):
    """The GPTConfig of an HF GPT-2 or Llama-family checkpoint, read from its config.json alone (no
    weights are loaded), or a ValueError of one sentence naming what this model cannot compute."""
    from transformers import AutoConfig
    if SHAPE_KEYS & overrides.keys():
        raise ValueError(f"from_pretrained takes its shape from the checkpoint; "
                         f"drop {sorted(SHAPE_KEYS & overrides.keys())}")
    lacking = llama3_rope_lacking(name_or_dir)
    if lacking:  # transformers would fill them in with a warning per read, and compute another model
        raise ValueError(f"{name_or_dir}'s config.json scales RoPE as Llama-3 does (rope_type 'llama3') without "
                         f"{' and '.join(lacking)}, which that scaling needs: put back the model's own value"
                         f"{'s' if len(lacking) > 1 else ''} (from its download), or download the model again")
    hc = load_hf(AutoConfig, name_or_dir)
    quantized = getattr(hc, 'quantization_config', None)
    if quantized:
        method = quantized.get('quant_method', 'quantized') if isinstance(quantized, dict) else 'quantized'
        raise ValueError(f"{name_or_dir} holds a {method}-quantized model, and this repository computes with "
                         f"full-precision weights (float32, float16 or bfloat16) only: pass the model it was "
                         f"quantized from")
    index = os.path.join(str(name_or_dir), 'model.safetensors.index.json')
    if os.path.isfile(index):
        try:
            with open(index, encoding='utf-8') as f:
                shards = sorted(set(json.load(f)['weight_map'].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(f"{index} is not the index save_pretrained writes: download the model again") from None
        lacking = [s for s in shards if not os.path.isfile(os.path.join(str(name_or_dir), s))]
        if lacking:
            raise ValueError(f"{name_or_dir} lacks {lacking[0]}, one of the {len(shards)} weight files its "
                             f"model.safetensors.index.json names (a download cut short?): download the model again")
    pointer = lfs_pointer(name_or_dir)
    if pointer:
        raise ValueError(f"{pointer} is a Git LFS pointer, not the weights (the folder was cloned without git-lfs): "
                         f"run `git lfs pull` in {name_or_dir}, or download the model again")
    if hc.model_type not in ('gpt2', 'llama'):
        raise ValueError(f"{name_or_dir} is a {hc.model_type!r} model: only GPT-2 and Llama-family "
                         f"(LlamaForCausalLM) checkpoints load")
    headless = no_lm_head(name_or_dir, getattr(hc, 'architectures', None))
    if headless:
        raise ValueError(headless)
    for field in NUMBERS[hc.model_type]:  # a hand-edited config.json ("10000.0") would fail deep in the model
        value = getattr(hc, field, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError(f"{name_or_dir}'s config.json gives {field}={value!r}, not a number: write it "
                             f"without quotes, or save the folder again with save_pretrained")
    rope = getattr(hc, 'rope_parameters', None)  # transformers 5 keeps rope_theta here
    theta = rope.get('rope_theta') if isinstance(rope, dict) else None
    for field, value in [(f, getattr(hc, f, None)) for f in NUMBERS[hc.model_type]] + [('rope_theta', theta)]:
        small = field.endswith(('eps', 'epsilon'))  # an eps may be 0; a size, or RoPE's base, must be positive
        if isinstance(value, float) and not math.isfinite(value):  # JSON's Infinity and NaN, which json reads
            raise ValueError(f"{name_or_dir}'s config.json gives {field}={value!r}, not a finite number: put the "
                             f"model's own value back (from its download), or save the folder again with save_pretrained")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and (value < 0 if small else value <= 0):
            raise ValueError(f"{name_or_dir}'s config.json gives {field}={value!r}, which must be "
                             f"{'at least 0' if small else 'positive'} (a slip of the hand?): put the model's own "
                             f"value back (from its download), or save the folder again with save_pretrained")
    edited = edited_export(name_or_dir, hc)
    if edited:
        raise ValueError(edited)
    if isinstance(hc.eos_token_id, int):
        overrides.setdefault('eot_token', hc.eos_token_id)
    return (gpt2_config if hc.model_type == 'gpt2' else llama_config)(name_or_dir, hc, block_size, overrides)


def shaped(name_or_dir, **fields):
    """GPTConfig(**fields) of an HF config; its own checks' sentence names the file the shape came from."""
    try:
        return GPTConfig(**fields)
    except ValueError as e:
        raise ValueError(f"{name_or_dir}'s config.json gives a model this repository refuses ({e}): fix or "
                         f"replace that folder") from None


def from_pretrained(name_or_dir, block_size=None, **overrides):
    """
    A GPT holding the weights of an HF GPT-2 ('gpt2' ... 'gpt2-xl') or Llama-family model (a hub name or
    a save_pretrained folder). Shapes come from its config; block_size may shorten a Llama's context.
    overrides set the non-shape fields (taper, aux_loss, ema_rate, dropout, fakeln, ...); a TaperNorm or
    TaperLN starts with gammatilde = gamma of the norm it replaces.
    """
    config = pretrained_config(name_or_dir, block_size, **overrides)
    model = GPT(config)
    weights = (gpt2_weights if config.arch == 'gpt2' else llama_weights)(name_or_dir, config.n_layer)
    copy_weights(model, weights, name_or_dir)
    if stripped_export(name_or_dir, model):
        raise ValueError(stripped_export(name_or_dir, model))
    with torch.no_grad():
        for m in model.tapered_norms():
            m.taper_weight.copy_(m.weight)
    return model


# The names of transformers' activations that compute this model's own (ACT2FN): the tanh GELU of GPT-2's
# MLP, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and SwiGLU's SiLU gate, x sigmoid(x). test_llama.py
# checks each against transformers' function in float64.
TANH_GELU = ('gelu_new', 'gelu_pytorch_tanh', 'gelu_python_tanh', 'gelu_fast', 'gelu_accurate')
SILU = ('silu', 'swish')


def gpt2_config(name_or_dir, hc, block_size, overrides):
    """GPTConfig of an HF GPT2Config, or a ValueError naming the field this model cannot compute.
    reorder_and_upcast_attn only moves where float16 rounds, and this model's attention runs float32."""
    def refuse(field, value, why):
        raise ValueError(f"{name_or_dir} sets {field}={value!r}, which this model cannot compute: {why}")
    if hc.activation_function not in TANH_GELU:
        refuse('activation_function', hc.activation_function, f"GPT-2's MLP here uses the tanh GELU, 'gelu_new' "
               f"(or a name transformers computes it by: {', '.join(map(repr, TANH_GELU[1:]))})")
    if not hc.scale_attn_weights:
        refuse('scale_attn_weights', False, "attention scores here are divided by sqrt(head size)")
    if hc.scale_attn_by_inverse_layer_idx:
        refuse('scale_attn_by_inverse_layer_idx', True, "attention scores here have no 1/(layer + 1) factor")
    if hc.n_inner not in (None, 4 * hc.n_embd):
        refuse('n_inner', hc.n_inner, f"GPT-2's MLP here is 4 n_embd = {4 * hc.n_embd} wide")
    if not hc.tie_word_embeddings:
        refuse('tie_word_embeddings', False, "GPT-2's output head here is its token embedding (tied)")
    if getattr(hc, 'add_cross_attention', False):
        refuse('add_cross_attention', True, "this is a decoder-only model, without cross-attention")
    if block_size not in (None, hc.n_positions):
        raise ValueError(f"a GPT-2 keeps its learned context of {hc.n_positions}: drop block_size={block_size}")
    return shaped(name_or_dir, arch='gpt2', norm='layernorm', block_size=hc.n_positions, vocab_size=hc.vocab_size,
                  n_layer=hc.n_layer, n_head=hc.n_head, n_embd=hc.n_embd, norm_eps=hc.layer_norm_epsilon,
                  **overrides)


def llama_config(name_or_dir, hc, block_size, overrides):
    """GPTConfig of an HF LlamaConfig, or a ValueError naming the field this model cannot compute."""
    def refuse(field, value, why):
        raise ValueError(f"{name_or_dir} sets {field}={value!r}, which this model cannot compute: {why}")
    if hc.hidden_act not in SILU:
        refuse('hidden_act', hc.hidden_act, "its MLP is SwiGLU, whose gate is SiLU ('silu', or 'swish')")
    hs = hc.hidden_size // hc.num_attention_heads
    if getattr(hc, 'head_dim', None) not in (None, hs):
        refuse('head_dim', hc.head_dim, f"heads here are hidden_size / num_attention_heads = {hs} wide, and "
               f"a model with heads of another width is not supported (docs/llama.md lists what is)")
    if getattr(hc, 'sliding_window', None) is not None:
        refuse('sliding_window', hc.sliding_window, "attention here is full causal attention")
    rope = dict(getattr(hc, 'rope_parameters', None) or {})  # transformers 5; older: rope_theta/rope_scaling
    rope = rope or dict(getattr(hc, 'rope_scaling', None) or {}, rope_theta=getattr(hc, 'rope_theta', 10000.0))
    kind = rope.get('rope_type', rope.get('type', 'default'))
    for field, value in rope.items():
        if field not in ('rope_type', 'type') and (isinstance(value, (bool, str)) or value is None):
            refuse(f"rope_parameters.{field}", value, "it is no number (written in quotes?): write it as a number")
    if kind not in ('default', 'llama3'):
        refuse('rope_type', kind, "RoPE here is plain or Llama-3-scaled ('default' or 'llama3')")
    if rope.get('partial_rotary_factor', 1.0) != 1.0:
        refuse('partial_rotary_factor', rope['partial_rotary_factor'], "RoPE here rotates every dimension of a head")
    scaling = None
    if kind == 'llama3':
        scaling = {k: rope.get(k) for k in ('factor', 'low_freq_factor', 'high_freq_factor',
                                        'original_max_position_embeddings')}
    context = hc.max_position_embeddings
    if block_size is not None and not 0 < block_size <= context:
        raise ValueError(f"block_size={block_size} must lie in [1, {context}], {name_or_dir}'s context "
                         f"(max_position_embeddings)")
    return shaped(name_or_dir, arch='llama', norm='rmsnorm', block_size=block_size or context,
                  vocab_size=hc.vocab_size, n_layer=hc.num_hidden_layers, n_head=hc.num_attention_heads,
                  n_kv_head=hc.num_key_value_heads or hc.num_attention_heads, n_embd=hc.hidden_size,
                  mlp_hidden=hc.intermediate_size, norm_eps=hc.rms_norm_eps, rope_theta=rope['rope_theta'],
                  rope_scaling=scaling, tied_head=hc.tie_word_embeddings,
                  attn_bias=hc.attention_bias, mlp_bias=getattr(hc, 'mlp_bias', False), **overrides)


def copy_weights(model, weights, name_or_dir):
    """Copy weights {our name: tensor} into model with shape checks; every parameter but gammatilde
    must be given."""
    sd = model.state_dict()
    with torch.no_grad():
        for k, v in weights.items():
            if k not in sd:
                raise KeyError(f"{name_or_dir}: unexpected weight {k}")
            if v.shape != sd[k].shape:
                raise ValueError(f"{name_or_dir}: {k} has shape {tuple(v.shape)}, expected {tuple(sd[k].shape)}")
            sd[k].copy_(v)
    missing = {k for k, _ in model.named_parameters() if not k.endswith('taper_weight')} - weights.keys()
    if missing:
        raise KeyError(f"{name_or_dir}: no weights for {sorted(missing)}")


def llama_weights(name_or_dir, n_layer):
    """{our name: tensor} of an HF Llama's weights."""
    from transformers import LlamaForCausalLM
    sd_hf = load_hf(LlamaForCausalLM, name_or_dir).state_dict()
    weights = {'transformer.wte.weight': sd_hf.pop('model.embed_tokens.weight'),
               'transformer.ln_f.weight': sd_hf.pop('model.norm.weight')}
    if 'lm_head.weight' in sd_hf:  # tied: the same tensor as the embedding
        weights['lm_head.weight'] = sd_hf.pop('lm_head.weight')
    for i in range(n_layer):
        for ours, theirs in LLAMA_LAYER.items():
            suffixes = [''] if ours.endswith('.weight') else ['.weight', '.bias']
            for suffix in suffixes:
                keys = [f'model.layers.{i}.{t}{suffix}' for t in theirs]
                if all(k in sd_hf for k in keys):
                    weights[f'transformer.h.{i}.{ours}{suffix}'] = torch.cat([sd_hf.pop(k) for k in keys])
    leftover = [k for k in sd_hf if not k.endswith('rotary_emb.inv_freq')]
    if leftover:
        raise KeyError(f"{name_or_dir}: unexpected weight {leftover[0]}")
    return weights


def gpt2_weights(name_or_dir, n_layer):
    """{our name: tensor} of an HF GPT-2's weights: Conv1D matrices transposed, mask buffers left out."""
    from transformers import GPT2LMHeadModel
    return {k: v.t() if k.endswith(HF_CONV1D) else v
            for k, v in load_hf(GPT2LMHeadModel, name_or_dir).state_dict().items()
            if not k.endswith(('.attn.bias', '.attn.masked_bias'))}


# --- export ---------------------------------------------------------------------------------------

def check_exportable(model):
    """A ValueError of one sentence unless export_hf can write model: checked before anything is written."""
    cfg = model.config
    if not cfg.final_norm_removed:
        raise ValueError("only an All-Taper (or FakeLN) model is free of every real norm; HF's GPT-2 and "
                         "Llama give all their norms one eps, so a model with a real final norm does not "
                         "export: drop --export_hf, or train with --taper=all")
    if cfg.norm == 'dyt' or (cfg.arch, cfg.norm) not in (('gpt2', 'layernorm'), ('llama', 'rmsnorm')):
        raise ValueError(f"arch={cfg.arch!r} with norm={cfg.norm!r} has no HF class to export to: drop --export_hf")


def export_source(path, field='source'):
    """The checkpoint the export in the folder path was made from (field 'source'), its run ('run_id')
    or its step ('iter'), as config.json records it; None if it records none."""
    import json
    try:
        with open(os.path.join(path, 'config.json'), encoding='utf-8') as f:
            record = json.load(f).get(EXPORT_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return record.get(field) if isinstance(record, dict) else None


def edited_export(name_or_dir, hc):
    """One sentence when hc, the config of name_or_dir, is export_hf's (it holds EXPORT_KEY) but its eps is
    no longer the sigma^2 that makes every norm a fixed map: with another eps the norms normalize again,
    and the model computes something else without a word. None otherwise."""
    record = getattr(hc, EXPORT_KEY, None)
    field = 'layer_norm_epsilon' if hc.model_type == 'gpt2' else 'rms_norm_eps'
    eps = getattr(hc, field, None)
    if not (isinstance(record, dict) and isinstance(record.get('sigma'), (int, float))
            and isinstance(eps, (int, float))):
        return None
    exported = float(record['sigma']) ** 2
    if abs(eps - exported) <= 1e-6 * exported:
        return None
    return (f"{name_or_dir} is fold.py's norm-free export, whose norms are fixed maps only at {field}={exported!r} "
            f"(sigma^2, recorded under {EXPORT_KEY} in its config.json), but its config.json gives {field}={eps!r}: "
            f"put {exported!r} back, or export the run again with fold.py --export_hf")


def stripped_export(name_or_dir, model):
    """One sentence when model, read from name_or_dir, holds export_hf's weights under an eps that is not the
    sigma^2 they were exported for, and its config.json no longer says so (the EXPORT_KEY record removed, the
    eps "cleaned" back to a usual value): every internal norm's weight is then one constant sigma, as only an
    export writes them (a norm trained or just initialized has weights that vary, or are all 1). Its norms
    would normalize again, and the model compute something else without a word. None otherwise."""
    weights = [getattr(norm, 'weight', None) for block in model.transformer.h for norm in (block.ln_1, block.ln_2)]
    if not weights or any(w is None for w in weights):
        return None
    sigma = weights[0].flatten()[0].item()
    if sigma == 1.0 or not all(bool(torch.all(w == sigma)) for w in weights):
        return None
    eps, exported = model.config.norm_eps, sigma ** 2
    if abs(eps - exported) <= 1e-5 * exported:
        return None
    field = 'layer_norm_epsilon' if model.config.arch == 'gpt2' else 'rms_norm_eps'
    return (f"{name_or_dir} holds fold.py's norm-free export (every internal norm's weight is {sigma:.6g}, which "
            f"makes the norms fixed maps only at {field}={exported:.10g}), but its config.json gives {field}={eps!r}: "
            f"set {field} back to {exported:.10g}, or export the run again with fold.py --export_hf")


def is_export(path):
    """Whether the folder path holds an earlier export_hf output (its config.json holds EXPORT_KEY, or
    an eps of 1e12 from before it did), which a new export may replace."""
    import json
    try:
        with open(os.path.join(path, 'config.json'), encoding='utf-8') as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and (EXPORT_KEY in config or LEGACY_EPS in (config.get('layer_norm_epsilon'),
                                                                                  config.get('rms_norm_eps')))


# Every exported weight stays within half of float16's largest value (65504), so that the export loads
# in float16 as well as in bfloat16 and float32.
WEIGHT_LIMIT = 2.0 ** 15
# The identity-through-eps trick below holds up to a relative error of u^2/2, u being the residual's
# RMS over sqrt(eps). LlamaRMSNorm casts x / sqrt(ms + eps) to the model's dtype before its weight
# multiplies: in float16 that quotient's RMS stays at least float16's smallest normal number.
FP16_TINY = 2.0 ** -14
EXPORT_KEY = 'tapernorm_export'  # config.json's record of the constants below
LEGACY_EPS = 1e12
SPREAD = 4.0  # a token's residual RMS may lie this far either side of its layer's typical value
EXACT = 1e-6  # the norms' relative error that alpha = 1 may cost at most


def residual_scales(model):
    """The typical RMS of the residual stream at each norm's input, the final norm last: 1/c for a
    tapered norm (c* of eq. 4 is E[1/r(h)] weighted by |h|^2) and sigma_avg for a removed FakeLN."""
    norms = [n for block in model.transformer.h for n in (block.ln_1, block.ln_2)] + [model.transformer.ln_f]
    return torch.tensor([1.0 / n.c.item() if hasattr(n, 'c') else n.sigma_avg.mean().item() for n in norms],
                        dtype=torch.float64)


def no_norm_constants(model):
    """(sigma, alpha, bound): every exported norm has eps = sigma^2, and the residual stream is scaled
    by alpha. What matters is u = alpha / sigma, the residual over sqrt(eps): the smaller, the closer a
    norm is to the identity (relative error u^2 r^2 / 2, bound at SPREAD times the largest typical RMS
    r), but large enough that the final norm's weight sigma s / alpha (alpha^2 for a tied head) fits
    WEIGHT_LIMIT for some alpha and, for Llama in float16, that the quotient the norm casts stays normal
    at the smallest typical RMS. alpha = 1 exports the folded weights as they are, so that fine-tuning
    the export (full or LoRA) behaves as on the folded model: it is kept unless that costs more than
    EXACT of accuracy."""
    r = residual_scales(model)
    s = model.transformer.ln_f.fixed_scale().abs().max().item()
    tied = model.config.arch == 'gpt2' or model.config.tied_head
    u = SPREAD * (s ** 0.5 if tied else s) / WEIGHT_LIMIT
    if model.config.arch == 'llama':
        u = max(u, FP16_TINY / r.min().item())
    u = max(u, min(1 / WEIGHT_LIMIT, (2 * EXACT) ** 0.5 / (SPREAD * r.max().item())))  # sigma <= limit at alpha 1
    alpha = min(max(1.0, SPREAD * s / (WEIGHT_LIMIT * u) if tied else 0.0), WEIGHT_LIMIT * u)
    return alpha / u, alpha, (u * SPREAD * r.max().item()) ** 2 / 2


@torch.no_grad()
def export_hf(model, folded, path, bos=None, eos=None, source=None, run_id=None, iter_num=None):
    """
    Write a norm-free model, folded, as a folder transformers loads: an All-TaperLN or FakeLN GPT-2 as
    GPT2LMHeadModel, an All-Taper Llama as LlamaForCausalLM. Both HF classes always run their norms,
    with one eps for all of them. A large eps = sigma^2 makes a norm's denominator sqrt(ms + eps) the
    constant sigma, up to a relative ms / (2 eps), so each norm becomes a fixed map:
      internal norms: weight sigma (and beta = 0): the identity for RMSNorm, h - mu_h for LayerNorm,
                      which the folded weights ignore since they center their input already;
      final norm:     weight sigma s (beta = beta): the model's own fixed final map, so the head stays
                      the model's head (tied or not; HF's has no bias to fold beta into).
    The residual stream is exported scaled by alpha (embeddings and every branch's output layer times
    alpha, every branch's input layer over alpha, the final map over alpha), which keeps the function
    and puts ms / eps where float16 can hold it: no_norm_constants chooses sigma and alpha.
    An Internal-Taper model keeps a real final norm (eps 1e-5 or the model's own) and cannot share that
    eps, so it does not export. bos and eos: the tokenizer's ids (default: the model's end-of-text id).
    Returns (sigma, alpha, bound), which config.json records under EXPORT_KEY.
    """
    check_exportable(model)
    cfg = model.config
    sigma, alpha, bound = no_norm_constants(model)
    eot = cfg.eot_token if cfg.eot_token >= 0 else None
    bos, eos = (eot if bos is None else bos), (eot if eos is None else eos)
    hf, weights, inputs, outputs = (hf_gpt2 if cfg.arch == 'gpt2' else hf_llama)(folded, sigma, bos, eos)
    for config in (hf.config, hf.generation_config):
        config.bos_token_id, config.eos_token_id = bos, eos
    record = dict(sigma=sigma, alpha=alpha, bound=bound)
    if source is not None:  # the checkpoint it was exported from: a later export of another run is refused
        record['source'] = os.path.abspath(source)
    if run_id is not None:  # its run (train.py's run_id), which a copied or moved run folder keeps
        record['run_id'] = run_id
    if iter_num is not None:  # its step: an export of a later one is not replaced by this one's
        record['iter'] = iter_num
    setattr(hf.config, EXPORT_KEY, record)
    ln_f, final = model.transformer.ln_f, 'transformer.ln_f' if cfg.arch == 'gpt2' else 'model.norm'
    tied = cfg.arch == 'gpt2' or cfg.tied_head  # a tied head reads the embedding, scaled by alpha too
    head = alpha if tied else 1.0
    weights[f'{final}.weight'] = sigma * ln_f.fixed_scale().double() / (alpha * head)
    if getattr(ln_f, 'bias', None) is not None:  # LayerNorm's beta; RMSNorm has none
        weights[f'{final}.bias'] = ln_f.bias.double() / head
    weights['lm_head.weight'] = model.lm_head.weight.double() * head  # unfolded: the final map is in ln_f
    for key in weights:
        name = key.rsplit('.', 1)[0]
        if name in outputs:  # the embeddings and every branch's output layer, bias too
            weights[key] = weights[key].double() * alpha
        elif name in inputs and key.endswith('.weight'):
            weights[key] = weights[key].double() / alpha
    sd = hf.state_dict()
    for key, value in weights.items():
        sd[key].copy_(value)
    hf.save_pretrained(path)
    umask = os.umask(0)
    os.umask(umask)
    for name in os.listdir(path):  # save_pretrained leaves its weights owner-only (0600), unlike its other files
        os.chmod(os.path.join(path, name), 0o666 & ~umask)
    return sigma, alpha, bound


def hf_gpt2(folded, sigma, bos=None, eos=None):
    """(GPT2LMHeadModel of the folded model's shape, its weights, ...), with the tokenizer's bos and eos
    ids from the start: GPT2Config's own 50256 lies outside a smaller vocabulary, which transformers warns of."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = folded.config
    hf = GPT2LMHeadModel(GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=cfg.block_size, n_embd=cfg.n_embd, n_layer=cfg.n_layer,
        n_head=cfg.n_head, layer_norm_epsilon=sigma ** 2, activation_function='gelu_new',
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True, bos_token_id=bos, eos_token_id=eos))
    ours = folded.state_dict()
    weights = {key: ours[key].t() if key.endswith(HF_CONV1D) else ours[key]
               for key in hf.state_dict() if key in ours and key != 'lm_head.weight'}
    for i in range(cfg.n_layer):
        for ln in ('ln_1', 'ln_2'):
            weights[f'transformer.h.{i}.{ln}.weight'] = torch.full((cfg.n_embd,), sigma)
            weights[f'transformer.h.{i}.{ln}.bias'] = torch.zeros(cfg.n_embd)
    layers = [f'transformer.h.{i}' for i in range(cfg.n_layer)]
    inputs = {f'{layer}.{name}' for layer in layers for name in ('attn.c_attn', 'mlp.c_fc')}
    outputs = {'transformer.wte', 'transformer.wpe'} | {f'{layer}.{name}' for layer in layers
                                                         for name in ('attn.c_proj', 'mlp.c_proj')}
    return hf, weights, inputs, outputs


def llama_hf_config(model, eps=None):
    """The LlamaConfig of an arch='llama' model's shape (eps: every RMSNorm's, default the model's)."""
    from transformers import LlamaConfig
    cfg = model.config
    rope = dict(rope_type='default', rope_theta=cfg.rope_theta)
    if cfg.rope_scaling:
        rope.update(rope_type='llama3', **cfg.rope_scaling)
    eot = cfg.eot_token if cfg.eot_token >= 0 else None
    return LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.n_embd, intermediate_size=model.transformer.h[0].mlp.w1.out_features,
        num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_kv_head or cfg.n_head,
        head_dim=cfg.n_embd // cfg.n_head, max_position_embeddings=cfg.block_size, rms_norm_eps=eps or cfg.norm_eps,
        rope_parameters=rope, attention_bias=cfg.attn_bias, mlp_bias=cfg.mlp_bias, hidden_act='silu',
        tie_word_embeddings=cfg.tied_head, bos_token_id=eot, eos_token_id=eot)


def hf_llama(folded, sigma, bos=None, eos=None):  # LlamaConfig's own ids (1, 2) fit any vocabulary
    from transformers import LlamaForCausalLM
    cfg = folded.config
    hf = LlamaForCausalLM(llama_hf_config(folded, sigma ** 2))
    ours = folded.state_dict()
    weights = {'model.embed_tokens.weight': ours['transformer.wte.weight']}
    for i, block in enumerate(folded.transformer.h):
        layer, attn = f'model.layers.{i}', block.attn
        q, kv = attn.q_size, attn.kv_size  # c_attn's rows are [q | k | v]
        spans = {'self_attn.q_proj': (0, q), 'self_attn.k_proj': (q, q + kv), 'self_attn.v_proj': (q + kv, q + 2 * kv)}
        linears = {name: SimpleNamespace(weight=attn.c_attn.weight[a:b],
                                         bias=None if attn.c_attn.bias is None else attn.c_attn.bias[a:b])
                   for name, (a, b) in spans.items()}
        linears.update({'self_attn.o_proj': attn.c_proj, 'mlp.gate_proj': block.mlp.w1,
                        'mlp.up_proj': block.mlp.w3, 'mlp.down_proj': block.mlp.w2})
        for name, linear in linears.items():
            weights[f'{layer}.{name}.weight'] = linear.weight
            if linear.bias is not None:
                weights[f'{layer}.{name}.bias'] = linear.bias
        for norm in ('input_layernorm', 'post_attention_layernorm'):  # the folded weights hold the maps
            weights[f'{layer}.{norm}.weight'] = torch.full((cfg.n_embd,), sigma)
    layers = [f'model.layers.{i}' for i in range(cfg.n_layer)]
    inputs = {f'{layer}.{name}' for layer in layers
              for name in ('self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj', 'mlp.gate_proj', 'mlp.up_proj')}
    outputs = {'model.embed_tokens'} | {f'{layer}.{name}' for layer in layers
                                        for name in ('self_attn.o_proj', 'mlp.down_proj')}
    return hf, weights, inputs, outputs


if __name__ == '__main__':
    from configurator import run_as_module
    run_as_module(__doc__, "hf.py is a module the scripts use to read and write HF checkpoints, not a command: load one with "
          "`python train.py --init_from=gpt2` or `python sample.py --init_from=gpt2`, export one with "
          "`python fold.py --out_dir=<run> --export_hf=<folder>`")
