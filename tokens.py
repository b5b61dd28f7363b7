"""
The token files every script reads and the two prepare scripts write: data_dir/<split>.bin holds token
ids back to back, in the dtype data_dir/meta.json names ("uint16" or "uint32"). uint16 holds ids up to
65,535 (GPT-2's 50,257, TinyStories' 10,000); a tokenizer with more (Llama-3's 128,256) needs uint32.
Folders prepared before meta.json named a dtype hold uint16. Also here: the tokenizer a checkpoint
carries (train.py's tokenizer_reference), turned back into encode and decode.
"""

import hashlib
import json
import os
import re
import shlex
import tempfile
import stat

import numpy as np
import torch

DTYPES = ('uint16', 'uint32')
TEXT_ENDINGS = ('.txt', '.txt.gz', '.jsonl')  # what the prepare scripts read with --input_file


def check_data_out_dir(out_dir, ours, script):
    """A prepare script's --out_dir: refused, before anything is written, when it holds a training run
    or any file the script does not write (ours: those it does), so that data never lands beside
    another program's files."""
    if any(os.path.isfile(os.path.join(out_dir, f)) for f in ("ckpt.pt", "log.jsonl")):
        raise SystemExit(f"{out_dir} holds a training run (ckpt.pt or log.jsonl), not data: choose another "
                         f"--out_dir for the data")
    foreign = sorted(n for n in (os.listdir(out_dir) if os.path.isdir(out_dir) else [])
                     if n not in ours and not n.endswith(".tmp"))
    if foreign:
        raise SystemExit(f"{out_dir} holds {foreign[0]}, which {script} does not write, so it will not put data "
                         f"beside it: choose a new or empty --out_dir")


def stale_token_files(out_dir, names, itemsize):
    """The token files in out_dir (name.bin for each name) whose size is not the count meta.json records
    for them: damaged, cut short or replaced since. A prepare script writes them again, as it does a
    missing one, so that "prepare it again" mends a folder rather than skipping the broken file."""
    try:
        meta = read_meta(out_dir)
    except ValueError:
        return set()  # the prepare script names a broken meta.json itself
    stale = set()
    for name in names:
        path, count = os.path.join(out_dir, f"{name}.bin"), meta.get(f"{name}_tokens")
        if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
            print(f"{name}: {path} is not a regular file (a device, a pipe, or a link to one): writing it again")
            stale.add(name)
            continue
        if os.path.isfile(path) and isinstance(count, int) and os.path.getsize(path) != count * itemsize:
            print(f"{name}: {path} holds {os.path.getsize(path):,} bytes, not the {count:,} tokens meta.json "
                  f"records: writing it again")
            stale.add(name)
        elif os.path.isfile(path) and (os.path.getsize(path) % itemsize or not os.path.getsize(path)):
            print(f"{name}: {path} holds {os.path.getsize(path):,} bytes, not a whole number of "
                  f"{itemsize}-byte tokens: writing it again")  # no count recorded: its size says enough
            stale.add(name)
    return stale


def dtype_for(vocab_size):
    """The narrowest dtype that holds every id of a vocab_size-token vocabulary."""
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def read_meta(data_dir):
    """data_dir/meta.json as a dict ({} when there is none), or a ValueError naming the file."""
    path = os.path.join(data_dir, 'meta.json')
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not the JSON file prepare writes")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding='utf-8-sig') as f:  # a BOM from a Windows editor
            meta = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{path} is not valid JSON") from None
    if not isinstance(meta, dict):
        kind = 'null' if meta is None else {'list': 'list', 'str': 'string'}.get(type(meta).__name__, 'number')
        raise ValueError(f"{path} holds a JSON {kind}, not the object of fields prepare writes")
    vocab = meta.get('vocab_size')
    if vocab is not None and not (isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0):
        raise ValueError(f"{path} gives vocab_size={vocab!r}, not a positive whole number")
    if vocab is not None and meta.get('dtype', 'uint16') == 'uint16' and vocab > 2**16:
        raise ValueError(f"{path} gives vocab_size={vocab} with uint16 tokens, which hold ids below 65536 only")
    sha = meta.get('tokenizer_sha256', '0' * 64)
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in '0123456789abcdef' for c in sha)):
        raise ValueError(f"{path} gives tokenizer_sha256={sha!r}, not the sha256 prepare_tinystories.py records")
    if meta.get('tokenizer') == 'tiktoken' and meta.get('tokenizer_name', 'gpt2') != 'gpt2':
        raise ValueError(f"{path} names tiktoken's {meta['tokenizer_name']!r} encoding, where prepare_owt.py writes "
                         f"'gpt2' only")
    if meta.get('tokenizer', 'sentencepiece') not in ('sentencepiece', 'tiktoken', 'hf'):
        raise ValueError(f"{path} names tokenizer {meta['tokenizer']!r}, which none of the prepare scripts writes "
                         f"(sentencepiece, tiktoken, hf)")
    for key in ('bos_id', 'eos_id', 'eot_token'):
        if vocab is not None and isinstance(meta.get(key), int) and not 0 <= meta[key] < vocab:
            raise ValueError(f"{path} gives {key}={meta[key]}, outside its vocabulary of {vocab}")
    if meta.get('tokenizer') == 'tiktoken' and vocab not in (None, 50257):
        raise ValueError(f"{path} names tiktoken's GPT-2 tokenizer, whose vocabulary is 50257, not vocab_size={vocab}")
    return meta


def meta_mismatch(data_dir, meta):
    """One sentence when meta.json's token counts (prepare writes them last) are not the token files beside
    it: a meta.json copied in from another folder describes other tokens. None when they agree, or when it
    records no counts."""
    itemsize = np.dtype(meta.get('dtype', 'uint16')).itemsize if meta.get('dtype') in ('uint16', 'uint32') else 2
    for split in ('train', 'val'):
        count, path = meta.get(f'{split}_tokens'), os.path.join(data_dir, f'{split}.bin')
        if isinstance(count, int) and os.path.isfile(path) and os.path.getsize(path) % itemsize:
            return (f"{path} holds {os.path.getsize(path):,} bytes, which is not a stream of {meta.get('dtype', 'uint16')} "
                    f"tokens (cut short, or written by something else): prepare the folder again")
        if isinstance(count, int) and os.path.isfile(path) and os.path.getsize(path) != count * itemsize:
            return (f"{data_dir}/meta.json counts {count:,} {split} tokens, but {split}.bin beside it holds "
                    f"{os.path.getsize(path) // itemsize:,}: the meta.json is another folder's (copied in?), or the "
                    f"tokens were written since; prepare the folder again")
    return None


def pieces(model_file):
    """The vocabulary size of the SentencePiece model at model_file, or None when there is none to read:
    the size a data folder was prepared at, whatever its meta.json or a run says."""
    import sentencepiece as spm
    try:
        return spm.SentencePieceProcessor(model_file=model_file).vocab_size() if os.path.isfile(model_file) else None
    except (OSError, RuntimeError):
        return None


def inner_data(folder, split, vocab_size=None, tokenizer=None):
    """For a data_dir that holds data folders rather than tokens (a folder of several, e.g. data/): the
    sentence's remedy naming them, first those in the model's tokens (tokenizer, a reference, else a
    vocabulary of vocab_size); None when it holds none."""
    try:
        names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n, f'{split}.bin'))
                       and os.path.isfile(os.path.join(folder, n, 'meta.json')))
    except OSError:
        return None
    if not names:
        return None
    def fits(name):
        try:
            meta = read_meta(os.path.join(folder, name))
            if tokenizer:
                return same_tokenizer(tokenizer, data_tokenizer(os.path.join(folder, name), meta))
            return meta.get('vocab_size') == vocab_size
        except (OSError, KeyError, ValueError):
            return False
    fit = [n for n in names if fits(n)]
    said = (f"{folder} holds data folders ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}), not tokens "
            f"of its own: pass one as --data_dir")
    if len(fit) == 1:
        return f"{said}, e.g. --data_dir={os.path.join(folder, fit[0])}, in the model's tokens"
    return f"{said}, the one in the model's tokens (e.g. --data_dir={os.path.join(folder, (fit or names)[0])})"


def json_shape(path):
    """'array' for a file that is one JSON array (a .json download of records, often pretty-printed),
    'object' for one JSON object spread over its lines (pretty-printed), 'lines' for JSON lines (one
    object per line), None for anything else: told by its content, not its name."""
    with open(path, 'rb') as f:
        head = f.read(1 << 16).removeprefix(b'\xef\xbb\xbf').lstrip()
    if head[:1] == b'[' and head[1:].lstrip()[:1] in (b'{', b'"', b']'):  # '[{"text": ...', not '[Chapter 1]'
        return 'array'
    try:
        return 'lines' if isinstance(json.loads(head.partition(b'\n')[0]), dict) else None
    except ValueError:  # not JSON, a first line longer than the head read, or an object over many lines
        if head[:1] == b'{' and head[1:].lstrip()[:1] in (b'"', b'}') and os.path.getsize(path) < 1 << 30:
            try:
                with open(path, encoding='utf-8-sig') as f:
                    return 'object' if isinstance(json.load(f), dict) else None
            except ValueError:
                pass
        return 'lines' if head[:2] == b'{"' else None


def json_array_to_lines(path):
    """The command that writes a JSON array's records (or one JSON object) one per line, beside it; and
    that file's name."""
    lines = os.path.splitext(path)[0] + '.jsonl'
    return (f"python -c \"import json, sys; d = json.load(open(sys.argv[1])); "
            f"[print(json.dumps(r)) for r in (d if isinstance(d, list) else [d])]\" "
            f"{shlex.quote(path)} > {shlex.quote(lines)}"), lines


def prepare_command(data_dir, vocab_size=None):
    """The prepare script and flags that write data_dir (again): the script its meta.json's tokenizer
    names (else the one the folder's name suggests), with the local files it records (text, and the
    Pile sets' rows), so that the command reads them rather than the hub."""
    from configurator import script_path
    try:
        meta = read_meta(data_dir) if os.path.isdir(data_dir) else {}
    except ValueError:  # a field a hand edit broke: the files it records are still named
        try:
            with open(os.path.join(data_dir, 'meta.json'), encoding='utf-8-sig') as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {}
        meta = {k: v for k, v in meta.items() if isinstance(v, str)} if isinstance(meta, dict) else {}
    kind = meta.get('tokenizer')
    inputs = {flag: meta[key] for flag, key in (('input_file', 'source'), ('val_file', 'val_file'),
                                                 ('pile_file', 'pile_source'),
                                                 ('pile_filtered_file', 'pile_filtered_source'))
              if isinstance(meta.get(key), str) and (os.path.isfile(meta[key]) or all(
                  os.path.isfile(path.strip()) for path in meta[key].split(',')))}
    if kind in ('tiktoken', 'hf') or (kind is None and ('owt' in data_dir or 'openwebtext' in data_dir)):
        cmd = script_path('prepare_owt.py') + (f" --tokenizer={meta['tokenizer_name']}" if kind == 'hf' else '')
        cmd += ''.join(f' --{flag}={shlex.quote(path)}' for flag, path in inputs.items() if flag != 'val_file')
        if 'input_file' in inputs and isinstance(meta.get('val_fraction'), float):  # a folder refuses another
            cmd += f" --val_fraction={meta['val_fraction']}"
        if kind == 'tiktoken' and not any(os.path.isfile(os.path.join(data_dir, f'{name}.bin'))
                                          for name in ('pile', 'pile_filtered')):
            cmd += ' --skip_pile'  # it was prepared without the Pile sets
        default = os.path.normpath(data_dir) == 'data/openwebtext'
        return cmd + ('' if default else f' --out_dir={shlex.quote(data_dir)}')
    vocab_size = pieces(os.path.join(data_dir, 'tokenizer.model')) or meta.get('vocab_size') or vocab_size or 0
    default = os.path.normpath(data_dir) == f'data/tinystories{vocab_size}'
    return (script_path('prepare_tinystories.py') + (f' --vocab_size={vocab_size}' if 260 <= vocab_size < 2**16 else '')
            + ('' if default else f' --out_dir={shlex.quote(data_dir)}')
            + ''.join(f' --{flag}={shlex.quote(path)}' for flag, path in inputs.items()
                      if flag in ('input_file', 'val_file')))


def prepare_again(data_dir, error, vocab_size=None):
    """The advice for data_dir, whose files cannot be read (error): the prepare command that writes it again. A
    meta.json that a hand edit broke is refused by the prepare scripts too: it is fixed, or the folder removed."""
    command = prepare_command(data_dir, vocab_size)
    if f"{os.path.join(data_dir, 'meta.json')} " in f"{error} ":
        return f"fix that in meta.json, or remove {data_dir} and then prepare it again with `python {command}`"
    return f"prepare it again with `python {command}`"


def token_dtype(data_dir):
    """The dtype of data_dir's token files."""
    name = read_meta(data_dir).get('dtype', 'uint16')
    if name not in DTYPES:
        raise ValueError(f"{os.path.join(data_dir, 'meta.json')} names dtype {name!r}, not one of {DTYPES}")
    return np.dtype(name)


def raw_text(data_dir):
    """One sentence when data_dir holds text a prepare script reads (--input_file) and no token file
    at all: a folder of downloads given where a prepared folder belongs. None otherwise."""
    from configurator import script_path
    names = os.listdir(data_dir) if os.path.isdir(data_dir) else []
    if 'ckpt.pt' in names or {'config.json', 'log.jsonl'} <= set(names):  # a run's folder: its log is no text
        try:
            with open(os.path.join(data_dir, 'config.json'), encoding='utf-8-sig') as f:
                trained = json.load(f).get('data_dir')
        except (OSError, ValueError, AttributeError):
            trained = None
        return (f"{data_dir} is a training run's folder, not a data folder: pass the folder a prepare script "
                f"wrote as --data_dir" + (f", e.g. the one this run trained on, --data_dir={trained}"
                                          if isinstance(trained, str) else ""))
    text = sorted(n for n in names if n.endswith(TEXT_ENDINGS))
    if not text or any(n.endswith('.bin') for n in names):
        return None
    if text == ['tokenizer_train.txt']:  # prepare_tinystories.py's own first file: a prepare stopped part-way
        return (f"{data_dir} holds only tokenizer_train.txt, the file prepare_tinystories.py writes first: a "
                f"prepare stopped part-way, with no tokens yet; run the same prepare command into it again (`python "
                f"{script_path('prepare_tinystories.py')} --input_file=<your text> --out_dir={shlex.quote(data_dir)}`), which finishes it")
    script = 'prepare_owt.py' if text[0].endswith('.jsonl') else 'prepare_tinystories.py'
    return (f"{data_dir} holds text ({', '.join(text[:2])}), not the tokens a prepare script writes: prepare it "
            f"into a folder of its own, e.g. `python {script_path(script)} --input_file={shlex.quote(os.path.join(data_dir, text[0]))} "
            f"--out_dir=data/mine`, and pass that folder as --data_dir")


def open_tokens(data_dir, split):
    """data_dir/<split>.bin memory-mapped read-only, after checking that its size is a whole number of
    tokens: FileNotFoundError or ValueError, each one sentence without advice (callers add theirs)."""
    from configurator import locked
    if locked(data_dir):  # a prepare script holds the folder (FolderLock) while it writes the token files
        raise SystemExit(f"a prepare script (prepare_tinystories.py or prepare_owt.py) is writing {data_dir} right "
                         f"now: wait for it to end (a job stopped with Ctrl-Z goes on with fg), then run this again")
    path = os.path.join(data_dir, f'{split}.bin')
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not a token file")
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path} is not a regular file (a device, a pipe, or a link to one), not a token file")
    if not os.path.isfile(path):
        from configurator import dead_link
        if dead_link(path, f'the {split} token file', named=False):  # not "not found", which would advise preparing the data
            raise SystemExit(dead_link(path, f'the {split} token file', named=False))
        if raw_text(data_dir):
            raise SystemExit(raw_text(data_dir))
        raise FileNotFoundError(f"{path} not found")
    dtype = token_dtype(data_dir)
    size = os.path.getsize(path)
    if size == 0 or size % dtype.itemsize:
        raise ValueError(f"{path} holds {size} bytes, which is not a stream of {dtype} tokens")
    count = read_meta(data_dir).get(f'{split}_tokens')  # recorded by the prepare scripts
    if isinstance(count, int) and count * dtype.itemsize != size:
        raise ValueError(f"{path} holds {size // dtype.itemsize:,} {dtype} tokens, but meta.json records {count:,} "
                         f"(tokens of another dtype, or another file)")
    tokens = np.memmap(path, dtype=dtype, mode='r')
    head = tokens[:1 << 20]
    if len(head) >= 1000 and not head.any():
        raise ValueError(f"{path} holds only zeros (a file allocated but never written, e.g. by a prepare run "
                         f"that was killed)")
    if dtype == np.uint16 and len(head) >= 1000 and (head[1::2] == 0).mean() > 0.9:
        raise ValueError(f"{path} looks like uint32 tokens read as uint16 (nearly every other id is 0), where "
                         f"meta.json says uint16")
    return tokens


def file_sha256(path):
    """The sha256 of a file's bytes, read in chunks."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def changed_since(path, out_dir, flag_name='out_dir'):
    """The sentence for a text file that changed since out_dir was prepared from it (meta.json holds its
    sha256): both prepare scripts would otherwise skip every stage and keep the old text's tokens."""
    return (f"{path} changed since {out_dir} was prepared from it (meta.json records its sha256), so the folder "
            f"holds the tokens of the old text: remove {out_dir} to prepare it again, or choose another --{flag_name}")


def data_tokenizer(data_dir, meta, arch=None):
    """The tokenizer reference of a prepared data folder (its meta.json read as meta): what sample.py
    needs to decode its tokens, stored in every checkpoint of a run trained on it."""
    if meta.get('tokenizer') == 'hf':  # the tokenizer prepare_owt.py --tokenizer saved beside the data
        with open(os.path.join(data_dir, meta['tokenizer_dir'], 'tokenizer.json'), encoding='utf-8') as f:
            return dict(kind='hf', json=f.read(), eos_id=meta['eot_token'])
    if meta.get('tokenizer') == 'tiktoken' or (arch == 'gpt2' and 'tokenizer' not in meta):
        return dict(kind='tiktoken', name='gpt2')
    if meta.get('tokenizer') == 'sentencepiece':
        import sentencepiece as spm
        with open(os.path.join(data_dir, meta['tokenizer_model']), 'rb') as f:
            model_bytes = f.read()
        try:
            pieces = spm.SentencePieceProcessor(model_proto=model_bytes).vocab_size()
        except RuntimeError:
            raise ValueError(f"{os.path.join(data_dir, meta['tokenizer_model'])} is not a SentencePiece model") from None
        recorded = meta.get('tokenizer_sha256')  # prepare_tinystories.py's record of the model it tokenized with
        if recorded is not None and hashlib.sha256(model_bytes).hexdigest() != recorded:
            raise ValueError(f"{meta['tokenizer_model']}'s sha256 is not the one meta.json records for the tokenizer "
                             f"the tokens were made with: another tokenizer copied in?")
        if meta.get('vocab_size') not in (None, pieces):  # a hand-edited meta.json: the ids stop at the model's
            raise ValueError(f"{os.path.join(data_dir, 'meta.json')} gives vocab_size={meta['vocab_size']}, but "
                             f"{meta['tokenizer_model']} has {pieces} pieces")
        return dict(kind='sentencepiece', model=torch.frombuffer(bytearray(model_bytes), dtype=torch.uint8))
    return None


# Texts both tokenizers of a pair must encode alike (same_tokenizer): words, digits, punctuation,
# runs of spaces, line breaks, accents and characters outside any small vocabulary.
PROBES = ('Once upon a time, there was a little girl named Lily. She saw 3 big dogs!',
          '"Hello," said Tom.  Two  spaces,\ttabs and\n\nnew lines; numbers 2024 and 3.14159.',
          'Caf\u00e9 na\u00efve \u00fcber \u2014 \u6f22\u5b57 \U0001f642 <|endoftext|> def f(x): return x**2')


def same_tokenizer(a, b):
    """Whether two tokenizer references encode and decode alike (a checkpoint from before references:
    yes). References of one kind compare their files; references of two kinds (a run's SentencePiece
    model and the tokenizer.json fold.py exported from it) compare what they do: the same vocabulary
    size and the same ids for every text of PROBES."""
    if a is None or b is None:
        return True
    if a.get('kind') != b.get('kind'):
        return encodes_alike(a, b)
    if a['kind'] == 'sentencepiece':  # the same bytes, or the same pieces: a model trained again on the same
        # text records its own input paths and options beside them, so its bytes differ
        return torch.equal(torch.as_tensor(a['model']), torch.as_tensor(b['model'])) or same_pieces(a, b)
    if a['kind'] == 'hf':  # the same vocabulary and merges, however the JSON was laid out
        return json.loads(a['json']).get('model') == json.loads(b['json']).get('model')
    return a.get('name') == b.get('name')


def same_pieces(a, b):
    """Whether two SentencePiece references hold the same pieces, each with its score and type, and encode
    every text of PROBES to the same ids; False when either cannot be loaded."""
    import sentencepiece as spm
    try:
        a, b = (spm.SentencePieceProcessor(model_proto=torch.as_tensor(r['model']).numpy().tobytes()) for r in (a, b))
    except RuntimeError:
        return False

    def pieces(sp):
        return [(sp.id_to_piece(i), sp.get_score(i), sp.is_control(i), sp.is_unknown(i), sp.is_unused(i),
                 sp.is_byte(i)) for i in range(sp.get_piece_size())]
    return pieces(a) == pieces(b) and all(a.encode(text) == b.encode(text) for text in PROBES)


def other_tokens(data_dir, ckpt, who):
    """The sentence for a data folder whose tokenizer is not the one a checkpoint (ckpt) was trained on:
    its own folder, prepared again since, or another folder."""
    held = (ckpt.get('config') or {}).get('data_dir')
    ref = ckpt.get('tokenizer') or {}
    if not (held and os.path.realpath(held) == os.path.realpath(data_dir)):
        return (f"{data_dir} holds tokens of another tokenizer than {who} was trained on: pass the run's own "
                f"--data_dir" + (f" ({held})" if held else ""))
    try:
        was = f"a {vocab_size_of(ref):,}-token {ref['kind']} vocabulary"
    except (SystemExit, KeyError, RuntimeError, ValueError):  # one this machine cannot load (tiktoken offline)
        was = "the settings it had"
    moved = (f"a relative path, here {os.path.abspath(held)}" if not os.path.isabs(held) else
             f"a path through a symbolic link, now to {os.path.realpath(held)}"
             if os.path.realpath(held) != os.path.abspath(held) else None)
    if moved:  # it may name another folder now than when the run started
        return (f"{data_dir}, as {who} names its data ({moved}), holds tokens of another tokenizer: pass "
                f"--data_dir=<the folder the run was trained on>; or, if that folder was prepared again since, "
                f"prepare the run's data once more, with {was}, into a new folder, and pass that")
    return (f"{data_dir}, the folder {who} was trained on, was prepared again since, with another tokenizer: "
            f"prepare the run's data once more, with {was}, into a new folder, and pass that as --data_dir")


def vocab_size_of(ref):
    """How many ids a tokenizer reference's tokenizer has, its special tokens included."""
    if ref.get('kind') == 'sentencepiece':
        import sentencepiece as spm
        return spm.SentencePieceProcessor(model_proto=ref['model'].numpy().tobytes()).get_piece_size()
    if ref.get('kind') == 'hf':
        from tokenizers import Tokenizer
        return Tokenizer.from_str(ref['json']).get_vocab_size(with_added_tokens=True)
    return gpt2_encoding().n_vocab


def encodes_alike(a, b):
    """Whether the tokenizers of two references of different kinds have the same vocabulary size and
    give the same ids for every text of PROBES; False when either cannot be loaded here."""
    try:
        encoders = [load_tokenizer(ref)[0] for ref in (a, b)]  # checks each reference first
    except SystemExit:  # a damaged reference, or tiktoken's files out of reach
        return False
    return vocab_size_of(a) == vocab_size_of(b) and all(encoders[0](text) == encoders[1](text) for text in PROBES)


# tiktoken's GPT-2 files, which it caches under the sha1 of their address
GPT2_FILES = ('https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe',
              'https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json')
# Their sha256, as tiktoken checks them (tiktoken_ext.openai_public.gpt2): a cached file that differs is removed
# by tiktoken as it loads, so it is named here first and left as it is.
GPT2_SHA256 = ('1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5',
               '196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783')


def gpt2_encoding():
    """tiktoken's GPT-2 encoding, or one sentence when it cannot be had. Without its files cached and
    without a network, tiktoken retries for minutes before it fails: when its host cannot be reached
    within 3 s, stop at once."""
    import socket
    import tiktoken
    cache = os.environ.get('TIKTOKEN_CACHE_DIR', os.environ.get('DATA_GYM_CACHE_DIR', os.path.join(
        tempfile.gettempdir(), 'data-gym-cache')))
    cached = cache and all(os.path.isfile(os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()))
                           for url in GPT2_FILES)
    for url, sha in zip(GPT2_FILES, GPT2_SHA256) if cached else ():
        path = os.path.join(cache, hashlib.sha1(url.encode()).hexdigest())
        if file_sha256(path) != sha:
            raise SystemExit(f"{path}, tiktoken's cached copy of GPT-2's {url.rsplit('/', 1)[1]}, is not that file "
                             f"(its sha256 differs: a download cut short, or changed since): remove it and connect to "
                             f"the internet once, or put the whole file there")
    why = None
    if not cached:
        try:
            socket.create_connection((GPT2_FILES[0].split('/')[2], 443), timeout=3).close()
        except OSError:
            why = 'no network, and its files are not cached'
    if why is None:
        try:
            return tiktoken.get_encoding('gpt2')
        except Exception as e:  # requests' connection errors, wrapped in several layers; a bad cached file
            why = type(e).__name__
    raise SystemExit(f"tiktoken could not load its GPT-2 files ({why}): connect to the internet once, or set "
                     f"TIKTOKEN_CACHE_DIR to a folder that holds them whole")


def load_tokenizer(ref):
    """(encode, decode) for a checkpoint's tokenizer reference (see train.py's tokenizer_reference)."""
    if ref is None:
        raise SystemExit("this checkpoint names no tokenizer: its data_dir had no meta.json")
    if not isinstance(ref, dict):
        raise SystemExit("the checkpoint's tokenizer entry is damaged: retrain on data prepared by "
                         "prepare_tinystories.py or prepare_owt.py")
    if ref.get('kind') == 'sentencepiece':
        import sentencepiece as spm
        try:
            sp = spm.SentencePieceProcessor(model_proto=ref['model'].numpy().tobytes())
        except RuntimeError:
            raise SystemExit("the checkpoint carries a damaged SentencePiece tokenizer: retrain on data prepared "
                             "by prepare_tinystories.py") from None
        specials = {sp.id_to_piece(i): i for i in (sp.bos_id(), sp.eos_id()) if i >= 0}  # <s>, </s>

        def encode(text):  # stories start with BOS; <s> and </s> typed in the text are those tokens, as
            ids = [sp.bos_id()]  # GPT-2's <|endoftext|> and an HF tokenizer's own special tokens are
            for part in re.split('(' + '|'.join(map(re.escape, specials)) + ')', text) if specials else [text]:
                ids += [specials[part]] if part in specials else sp.encode(part) if part else []
            return ids[1:] if ids[1:2] == [sp.bos_id()] else ids  # a typed leading <s>: the BOS itself
        return encode, sp.decode
    if ref.get('kind') == 'hf':
        from tokenizers import Tokenizer
        try:
            tok = Tokenizer.from_str(ref['json'])
        except Exception:  # tokenizers raises its own exception types
            raise SystemExit("the checkpoint carries a damaged HF tokenizer: retrain on data prepared by "
                             "prepare_owt.py --tokenizer") from None
        # The tokenizer's own framing (e.g. Llama's BOS), as each training document had; an empty
        # prompt without one starts after a document separator (or at a beginning-of-sequence token, for a
        # tokenizer without the separator). Special tokens are printed, as transformers' decode does.
        first = next((ref.get(k) for k in ('eos_id', 'bos_id') if isinstance(ref.get(k), int)), None)

        def encode(text):
            ids = tok.encode(text).ids
            if not ids and first is None:
                raise SystemExit("an empty prompt starts after an end-of-sequence token, and this tokenizer has "
                                 "none (nor a beginning-of-sequence token): give the prompt some text with --start")
            return ids or [first]
        return encode, lambda ids: tok.decode(ids, skip_special_tokens=False)
    if ref.get('kind') != 'tiktoken':
        raise SystemExit(f"the checkpoint names a tokenizer of kind {ref.get('kind')!r}, which this repository does "
                         f"not write: retrain on data prepared by prepare_tinystories.py or prepare_owt.py")
    if ref.get('name') != 'gpt2':
        raise SystemExit(f"the checkpoint names tiktoken's {ref.get('name')!r} encoding; this repository writes only "
                         f"'gpt2': retrain on data prepared by prepare_owt.py")
    enc = gpt2_encoding()
    return (lambda text: enc.encode(text, allowed_special={'<|endoftext|>'}) or [enc.eot_token]), enc.decode


def tokenizer_size(ref):
    """How many ids the tokenizer of a checkpoint's reference decodes: a model may have more rows
    (a vocabulary padded for speed), which it must never emit."""
    if ref.get('kind') == 'sentencepiece':
        import sentencepiece as spm
        return spm.SentencePieceProcessor(model_proto=ref['model'].numpy().tobytes()).get_piece_size()
    if ref.get('kind') == 'hf':
        from tokenizers import Tokenizer
        return Tokenizer.from_str(ref['json']).get_vocab_size(with_added_tokens=True)
    return gpt2_encoding().n_vocab


def hf_tokenizer(ref):
    """A transformers tokenizer that encodes and decodes as the checkpoint's tokenizer reference ref does
    (load_tokenizer), for an HF export: pipeline('text-generation', model=<export>) then needs nothing
    else. The GPT-2 encoding is rebuilt from tiktoken's own ranks, a SentencePiece model from its pieces
    and merges; test_clients.py checks both against the originals."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    kind = ref.get('kind') if isinstance(ref, dict) else None
    if kind == 'hf':
        tok = Tokenizer.from_str(ref['json'])
        eos = tok.id_to_token(ref['eos_id'])
        return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos)
    if kind == 'tiktoken':
        from transformers.convert_slow_tokenizer import TikTokenConverter
        enc = gpt2_encoding()
        converter = TikTokenConverter(pattern=enc._pat_str, extra_special_tokens=enc._special_tokens)
        converter.load_tiktoken_bpe = lambda _: enc._mergeable_ranks  # the ranks tiktoken loaded, no file
        eot = enc.decode([enc.eot_token])
        return PreTrainedTokenizerFast(tokenizer_object=converter.converted(), bos_token=eot, eos_token=eot)
    if kind == 'sentencepiece':
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2
        from transformers.convert_slow_tokenizer import SentencePieceExtractor
        from tokenizers import models
        proto_bytes = ref['model'].numpy().tobytes()
        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(proto_bytes)
        sp = spm.SentencePieceProcessor(model_proto=proto_bytes)
        if proto.trainer_spec.model_type != proto.trainer_spec.BPE or proto.normalizer_spec.name != 'identity':
            raise ValueError("only a BPE SentencePiece model without normalization (prepare_tinystories.py's) "
                             "converts to an HF tokenizer")
        with tempfile.NamedTemporaryFile(suffix='.model') as f:
            f.write(proto_bytes)
            f.flush()
            pieces = SentencePieceExtractor(f.name).extract(models.BPE)
        unk, bos, eos = (sp.id_to_piece(i) for i in (sp.unk_id(), sp.bos_id(), sp.eos_id()))
        tok = Tokenizer(models.BPE(pieces['vocab'], pieces['merges'], unk_token=unk, byte_fallback=True, fuse_unk=True))
        if proto.normalizer_spec.remove_extra_whitespaces:  # SentencePiece trims and collapses spaces
            tok.normalizer = normalizers.Sequence([normalizers.Replace(Regex(r'\A +| +\z'), ''),
                                                   normalizers.Replace(Regex(' {2,}'), ' ')])
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement='\u2581', prepend_scheme='always', split=False)
        tok.decoder = decoders.Sequence([decoders.Metaspace(replacement='\u2581', prepend_scheme='always', split=False),
                                         decoders.ByteFallback(), decoders.Fuse()])
        tok.add_special_tokens([AddedToken(p, special=True, normalized=False) for p in (unk, bos, eos)])
        # load_tokenizer starts every text with BOS, as every story was in training
        tok.post_processor = processors.TemplateProcessing(single=f'{bos} $A', pair=f'{bos} $A {bos} $B',
                                                           special_tokens=[(bos, sp.bos_id())])
        return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=unk, bos_token=bos, eos_token=eos)
    raise ValueError(f"the checkpoint names no tokenizer this repository can convert ({kind!r})")


if __name__ == '__main__':
    from configurator import run_as_module
    run_as_module(__doc__, "tokens.py is a module the scripts use to read token files, not a command: prepare data with "
          "`python prepare_tinystories.py` or `python prepare_owt.py`")
