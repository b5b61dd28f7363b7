"""
Prepare the GPT-2 fine-tuning data: OpenWebText -> GPT-2 BPE -> one uint16 token stream per split, plus
two Pile evaluation sets that the Hub already holds tokenized with the same tokenizer. With --tokenizer,
the fine-tuning data of another HF model (SmolLM2, TinyLlama, Llama-2/3) in that model's own tokens.

    python prepare_owt.py                                    # downloads openwebtext and both Pile sets
    python prepare_owt.py --skip_pile                        # only the fine-tuning data
    python prepare_owt.py --input_file owt.jsonl --val_fraction 0.05 \\
        --pile_file pile.jsonl --pile_filtered_file pile_filtered.jsonl   # local files, no Hub
    python prepare_owt.py --tokenizer=HuggingFaceTB/SmolLM2-135M   # -> data/openwebtext-SmolLM2-135M

Writes out_dir/{train.bin, val.bin, pile.bin, pile_filtered.bin, meta.json}, out_dir defaulting to
data/openwebtext. Every stage is skipped when its output exists, so an interrupted run picks up where it
stopped; a folder prepared in other tokens, or from another --input_file or --val_fraction, is refused,
and so is one whose --input_file changed since (meta.json records its sha256; a copy elsewhere is the same).
Each document is encoded as tokens + <|endoftext|> (50256) and the documents are concatenated;
train.py samples its windows from that stream. The Pile rows are 1024-token chunks written back to back
as they are. tiktoken downloads its GPT-2 files once; set TIKTOKEN_CACHE_DIR to use a local copy.

--tokenizer takes a hub name or a folder written by save_pretrained. Each document is then the
tokenizer's own framing (e.g. Llama's BOS) + its tokens + the tokenizer's end-of-sequence id, which
separates documents as <|endoftext|> does for GPT-2. The files are uint16 while every id fits, uint32
beyond (Llama-3's 128,256 ids); meta.json names the dtype (see tokens.py). The tokenizer is saved in
out_dir/tokenizer, so checkpoints trained on the data carry it. The Pile sets hold GPT-2 tokens and
are skipped.
"""
import json
import math
import os
import sys
import re

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import tiktoken
import datasets
from datasets import load_dataset
from datasets.fingerprint import Hasher
from tqdm import tqdm

from configurator import FolderLock, check_cache, checked_path, dead_link, flag, parse_flags, releasing_locks, tie_workers
from tokens import (changed_since, check_data_out_dir, dtype_for, file_sha256, gpt2_encoding, json_array_to_lines,
                    json_shape, read_meta, stale_token_files)

OWT_NAME = "openwebtext"
PILE_NAMES = {  # out_dir/<key>.bin <- the Hub dataset
    "pile": "apollo-research/monology-pile-uncopyrighted-tokenizer-gpt2",
    "pile_filtered": "lucabaroni/apollo-pile-filtered-10k",
}
BATCH_ROWS = 1024  # rows per write to a .bin file


def load_splits(input_file=None, val_fraction=0.0005):
    """{'train': Dataset, 'val': Dataset}, each with a 'text' column holding one document per row."""
    if not 0 < val_fraction < 1:
        raise SystemExit(f"--val_fraction must lie strictly between 0 and 1, not {val_fraction}.")
    if input_file is None:
        try:
            ds = load_dataset(OWT_NAME, split="train")
        except ConnectionError:
            raise SystemExit(f"Could not download {OWT_NAME}; connect to the internet or pass --input_file.")
    else:
        if os.path.getsize(input_file) < 100 << 20:
            datasets.disable_progress_bars()  # seconds of loading: its progress lines would only bury our own
        ds = load_dataset("json", data_files=input_file, split="train")
        kept = ds.filter(lambda batch: [bool(t.strip()) for t in batch["text"]], batched=True)
        if len(kept) < len(ds):  # a scraper's empty rows: each would be a lone end-of-text token
            print(f"note: left out {len(ds) - len(kept):,} rows of {input_file} whose text is empty or blank")
        ds = kept
    # OpenWebText has no validation split; these numbers are the project's spec, so every machine holds
    # out the same documents.
    try:
        split = ds.train_test_split(test_size=val_fraction, seed=2357, shuffle=True)
    except ValueError as e:  # too few documents to leave both splits non-empty
        raise SystemExit(f"Cannot hold out {val_fraction} of {len(ds)} documents for validation: {e}")
    return {"train": split["train"], "val": split["test"]}


def check_jsonl(path, *fields, vocab_size=None):
    """Every line one JSON object holding one of fields, the same one on every line, as text ('text') or
    as a list of token ids below vocab_size (the others), or one sentence naming the first line that is
    not: datasets' own error is a long traceback that names no line."""
    example = '"a document"' if fields[0] == "text" else "[464, 3290, 50256]"
    if json_shape(path) in ('array', 'object'):
        command, lines = json_array_to_lines(path)
        what = "one JSON array of records" if json_shape(path) == 'array' else "one JSON object over many lines"
        raise SystemExit(f"{path} is {what}, not JSON lines: each line must be one object such "
                         f"as {{\"{fields[0]}\": {example}}}; write its records one per line first (`{command}`) and "
                         f"pass {lines}.")
    rows, first, filled, ids = 0, None, 0, 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}, line {n},"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                plain = not line.lstrip().startswith(('{', '['))  # a plain text file: TinyStories' own format
                raise SystemExit(f"{where} is not valid JSON ({e.msg}); each line must be one "
                                 f"object such as {{\"{fields[0]}\": {example}}}"
                                 + (" (for plain text, stories apart by blank lines, use prepare_tinystories.py "
                                    "--input_file)." if plain and fields[0] == 'text' else "."))
            if not isinstance(row, dict) or not any(k in row for k in fields):
                raise SystemExit(f"{where} has no {' or '.join(repr(k) for k in fields)} field; "
                                 f"each line must be one object such as {{\"{fields[0]}\": {example}}}.")
            field = next(k for k in fields if k in row)
            first = first or field
            value = row[field]
            if field != first:
                raise SystemExit(f"{where} holds {field!r} where the lines before hold {first!r}; give every "
                                 f"line the same field.")
            if field == "text" and not isinstance(value, str):
                raise SystemExit(f"{where} field 'text' is not a string; each line must be one object such as "
                                 f"{{\"text\": {example}}}.")
            if field != "text" and not (isinstance(value, list) and all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)):
                raise SystemExit(f"{where} field {field!r} is not a list of token ids (integers from 0); each "
                                 f"line must be one object such as {{\"{field}\": {example}}}.")
            if field != "text" and vocab_size and value and max(value) >= vocab_size:
                raise SystemExit(f"{where} holds token id {max(value)}, beyond GPT-2's {vocab_size}-token "
                                 f"vocabulary; give rows tokenized with the GPT-2 tokenizer.")
            rows += 1
            filled += bool(value.strip() if isinstance(value, str) else value)
            ids += 0 if field == "text" else len(value)
    if not rows:
        raise SystemExit(f"{path} holds no rows, only blank lines; each line must be one object such as "
                         f"{{\"{fields[0]}\": {example}}}.")
    if not filled:
        raise SystemExit(f"every {first!r} field of {path} is empty: there is nothing to tokenize; give rows "
                         f"with text.")
    if first != "text" and ids < 1024:
        raise SystemExit(f"{path} holds {ids} token ids in all, fewer than the one 1024-token chunk evaluate.py "
                         f"scores; give the full set of 1024-token rows.")


def encode(batch):
    enc = tiktoken.get_encoding("gpt2")  # built once per map worker, then served from tiktoken's registry
    # encode_ordinary: an "<|endoftext|>" typed inside a document is text, so 50256 only ever marks a boundary.
    return {"ids": [enc.encode_ordinary(text) + [enc.eot_token] for text in batch["text"]]}


def encode_hf(batch, tokenizer):
    # split_special_tokens: a special token's text typed inside a document stays text, as with
    # encode_ordinary above, so the end-of-sequence id only ever marks a boundary.
    ids = tokenizer(batch["text"], add_special_tokens=True, split_special_tokens=True, verbose=False)["input_ids"]
    return {"ids": [x + [tokenizer.eos_token_id] for x in ids]}


def tokenize_split(ds, num_proc=None, tokenizer=None):
    """ds with one 'ids' column: each document's tokens followed by the end-of-text token, in GPT-2's
    tokens or, given an HF tokenizer, in its own."""
    num_proc = max(1, min(num_proc or os.cpu_count(), len(ds)))
    fn, fn_kwargs = (encode, None) if tokenizer is None else (encode_hf, {"tokenizer": tokenizer})
    # The cache's key: the text, the function and fn_kwargs (the tokenizer's content included), hashed
    # here because datasets hashes them inside a bare `except:`, where a Ctrl-C landing during the
    # seconds a tokenizer takes to hash was swallowed and the prepare ran on to the end.
    try:
        fingerprint = Hasher.hash((ds._fingerprint, fn, fn_kwargs, ds.column_names))
    except Exception:  # not picklable: datasets' own fallback, a random key (no cache reuse)
        fingerprint = None
    return ds.map(fn, batched=True, fn_kwargs=fn_kwargs, remove_columns=ds.column_names, num_proc=num_proc,
                  desc="tokenizing", new_fingerprint=fingerprint)


def hf_model_type(folder):
    """The model_type an HF folder's config.json names, or None."""
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8-sig") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return None
    return config.get("model_type") if isinstance(config, dict) else None


def load_tokenizer(name_or_dir):
    """AutoTokenizer.from_pretrained(name_or_dir), refused in one sentence when it cannot be loaded or
    has no end-of-sequence token to separate documents with."""
    from transformers import AutoTokenizer
    files = ("tokenizer.json", "tokenizer_config.json")
    if os.path.isdir(name_or_dir) and not any(os.path.isfile(os.path.join(name_or_dir, f)) for f in files):
        gpt2 = hf_model_type(name_or_dir) == "gpt2"  # a GPT-2 model saved alone: its tokens are GPT-2's BPE
        raise SystemExit(f"{name_or_dir} is not a tokenizer folder written by save_pretrained (it has no "
                         f"tokenizer.json or tokenizer_config.json)" +
                         (": it holds a GPT-2 model, whose tokens are GPT-2's BPE, which prepare_owt.py writes "
                          "without --tokenizer, so drop it" if gpt2 else
                          ": pass the folder the model's tokenizer was saved to, or its hub name"))
    if dead_link(name_or_dir, "the tokenizer's folder"):
        raise SystemExit(dead_link(name_or_dir, "the tokenizer's folder"))
    if os.path.isfile(name_or_dir):  # one file of a tokenizer's folder, or a run's checkpoint
        folder = os.path.dirname(name_or_dir) or "."
        weights = name_or_dir.endswith((".pt", ".pth", ".bin", ".safetensors"))
        raise SystemExit(f"{name_or_dir} is a file{' of weights, which hold no tokenizer' if weights else ''}, not a "
                         f"tokenizer's folder: " + (f"pass the folder that holds it, {folder}" if any(
                             os.path.isfile(os.path.join(folder, f)) for f in files) else
                             "pass the folder save_pretrained wrote the tokenizer to, or a hub name"))
    if not os.path.isdir(name_or_dir) and name_or_dir.startswith((".", "/", "~")):
        raise SystemExit(f"no folder at {name_or_dir}: pass a folder written by save_pretrained, or a hub "
                         f"name such as HuggingFaceTB/SmolLM2-135M")
    if not os.path.isdir(name_or_dir):
        from hf import offline_without_network
        offline_without_network()
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_dir)
    except Exception as e:  # a local folder: whatever transformers raises of its files (a config.json field too)
        if os.path.isdir(name_or_dir):
            from hf import first_line
            raise SystemExit(f"transformers could not read {name_or_dir} ({first_line(e)}): fix what it names in that "
                             f"folder's config.json or tokenizer files, or save the tokenizer again with save_pretrained") from None
        if not isinstance(e, (OSError, ValueError)):
            raise
        raise SystemExit(f"could not download {name_or_dir}: no network, or no such tokenizer on the hub; "
                         f"pass a local directory written by save_pretrained") from None
    if tokenizer.eos_token_id is None:
        raise SystemExit(f"{name_or_dir}'s tokenizer has no end-of-sequence token to separate documents "
                         f"with; pass the tokenizer of a model that defines eos_token")
    if os.path.isfile(os.path.join(name_or_dir, "config.json")):  # a model's folder: its tokenizer must be its own
        from hf import TokenizerMismatch, tokenizer_reference
        try:
            tokenizer_reference(name_or_dir)  # the check train.py, sample.py and evaluate.py make of that folder
        except TokenizerMismatch as e:
            raise SystemExit(str(e)) from None
        except (OSError, ValueError):  # a folder transformers reads otherwise: its tokenizer alone is used here
            pass
    return tokenizer


def load_pile(name, pile_file=None, rows=None):
    """The first `rows` rows (all when None) of a tokenized Pile set, streamed: the full set is far larger."""
    if pile_file is None:
        try:
            ds = load_dataset(PILE_NAMES[name], split="train", streaming=True)
        except ConnectionError:
            raise SystemExit(f"Could not download {PILE_NAMES[name]}; connect to the internet, "
                             f"pass --{name}_file, or pass --skip_pile.")
    else:
        ds = load_dataset("json", data_files=pile_file, split="train", streaming=True)
    return ds if rows is None else ds.take(rows)


def write_bin(ds, column, bin_file, vocab_size, dtype, n_rows=None, tokenizer_name="GPT-2"):
    """Write the token-id lists of ds[column] back to back as dtype to bin_file; returns the token count."""
    name = os.path.basename(bin_file)
    # Written under a temporary name so that a crash never leaves a truncated file the next run would skip.
    tmp_file = bin_file + ".tmp"
    n_tokens = 0
    total = math.ceil(n_rows / BATCH_ROWS) if n_rows else None
    batches = ds.with_format("numpy").iter(batch_size=BATCH_ROWS)
    try:
        with open(tmp_file, "wb") as f:
            for batch in tqdm(batches, total=total, desc=f"writing {name}", disable=bool(n_rows) and n_rows < 100_000):
                chunk = np.concatenate(batch[column])
                if len(chunk) and chunk.max() >= vocab_size:  # ids of another tokenizer would be wrong tokens
                    raise SystemExit(f"{name}: found token id {chunk.max()}, beyond {tokenizer_name}'s "
                                     f"{vocab_size}-token vocabulary; give rows tokenized with the "
                                     f"{tokenizer_name} tokenizer.")
                f.write(chunk.astype(dtype).tobytes())
                n_tokens += len(chunk)
    except BaseException:
        configurator.discard(tmp_file)  # nothing half-written stays behind
        raise
    os.replace(tmp_file, bin_file)
    return n_tokens


FLAGS = dict(
    input_file=flag(None, "jsonl, one {\"text\": ...} per line (default: the Hub)", type=str, path='text'),
    val_fraction=flag(0.0005, "documents held out for val.bin", above=0, below=1),
    out_dir=flag(None, "default: data/openwebtext, with --tokenizer data/openwebtext-<its name>", type=str,
                 path='out'),
    num_proc=flag(0, "processes for tokenizing (0: every core), at most the cores", min=0, max=os.cpu_count() or 1),
    pile_file=flag(None, "jsonl of rows with input_ids (default: the Hub)", type=str, path='text'),
    pile_filtered_file=flag(None, "jsonl of rows with input_ids (default: the Hub)", type=str, path='text'),
    pile_rows=flag(10000, "rows from the start of the Pile", min=1),
    skip_pile=flag(False, "prepare only the fine-tuning data"),
    tokenizer=flag(None, "an HF model's tokenizer, hub name or local folder, instead of GPT-2's (the Pile sets "
                         "are skipped)", type=str),
)


def same_name(stored, given):
    """Whether a name meta.json recorded (a file, a folder or a hub name) names what is given now."""
    if stored == given:
        return True
    return os.path.exists(stored) and os.path.exists(given) and os.path.realpath(stored) == os.path.realpath(given)


def check_prepared(out_dir, meta_file, tokenizer_meta, vocab_size, input_file, val_fraction, tokenizer=None):
    """Refuse, before anything is written, a folder already prepared in other tokens or from another
    source: the stages whose outputs exist would be skipped, keeping them under the new flags (the
    tokenizer too: tokenizer/ of a --tokenizer prepare stopped before meta.json, the last file)."""
    ours = {"train.bin", "val.bin", "meta.json", "tokenizer", *(f"{name}.bin" for name in PILE_NAMES)}
    check_data_out_dir(out_dir, ours, "prepare_owt.py")
    stale = os.path.isdir(os.path.join(out_dir, "tokenizer")) and tokenizer_meta["tokenizer"] == "tiktoken"
    if stale and not os.path.isfile(meta_file):  # meta.json is written last: a --tokenizer prepare stopped part-way
        raise SystemExit(f"{out_dir} holds tokenizer/, the HF tokenizer a prepare_owt.py --tokenizer=... saves "
                         f"first, from a prepare stopped part-way, and without --tokenizer this one writes GPT-2's "
                         f"tokens beside it: run that prepare again with its --tokenizer, or choose another "
                         f"--out_dir")
    saved = os.path.join(out_dir, "tokenizer")
    if tokenizer is not None and os.path.isdir(saved) and not os.path.isfile(meta_file):
        from transformers import AutoTokenizer
        try:
            other = AutoTokenizer.from_pretrained(saved).get_vocab() != tokenizer.get_vocab()
        except (OSError, ValueError):
            other = True  # not even a tokenizer now
        if other:
            raise SystemExit(f"{out_dir} holds tokenizer/ from a prepare stopped part-way with another tokenizer "
                             f"than {tokenizer_meta['tokenizer_name']}: run that prepare again with its "
                             f"--tokenizer, or choose another --out_dir")
    if not os.path.isfile(meta_file):
        return
    try:
        meta = read_meta(out_dir)
    except ValueError as e:
        raise SystemExit(f"{e}: remove {out_dir}, or choose another --out_dir") from None
    held, now = meta.get("tokenizer_name"), tokenizer_meta["tokenizer_name"]
    if held is not None and not (same_name(str(held), now) and meta.get("vocab_size", vocab_size) == vocab_size):
        raise SystemExit(f"{out_dir} already holds data in {held}'s tokens, not {now}'s: choose another "
                         f"--out_dir, or remove {out_dir} to prepare it again")
    # Without --input_file a later run may add the Pile sets to a folder whose documents came from a file.
    source = meta.get("source")
    held = meta.get("source_sha256")  # the text's bytes, recorded since this check
    if input_file is not None and isinstance(source, str) and isinstance(held, str):
        now = file_sha256(input_file)
        if same_name(source, input_file) and now != held:
            raise SystemExit(changed_since(input_file, out_dir))
        if now == held:  # the same documents, wherever the file is now
            source = input_file
    if input_file is not None and isinstance(source, str) and not same_name(source, input_file):
        raise SystemExit(f"{out_dir} already holds data prepared from {source}, not {input_file}: choose "
                         f"another --out_dir, or remove {out_dir} to prepare it again")
    held = meta.get("val_fraction")  # recorded since this check
    if input_file is not None and held is None and os.path.isfile(os.path.join(out_dir, "val.bin")):
        print(f"note: {out_dir} was prepared before meta.json recorded its --val_fraction, so its val.bin is kept "
              f"whatever --val_fraction says now: if it was made with another, remove {out_dir} to prepare it again")
    if input_file is not None and held is not None and held != val_fraction:
        raise SystemExit(f"{out_dir} already holds a val split made with --val_fraction={held}, not "
                         f"--val_fraction={val_fraction}: choose another --out_dir, or remove {out_dir} to prepare "
                         f"it again")


@releasing_locks
def main(argv=None):
    args = parse_flags(FLAGS, argv)
    tie_workers()
    check_cache("HF_DATASETS_CACHE", datasets.config.HF_DATASETS_CACHE, writes=True)  # load_dataset writes there,
    # local files too
    skip_pile = args.skip_pile or args.tokenizer is not None
    why = "--tokenizer skips the Pile sets (they hold GPT-2 tokens)" if args.tokenizer else "--skip_pile"
    for name in ("pile_file", "pile_filtered_file"):
        if skip_pile and getattr(args, name) is not None:
            raise SystemExit(f"{why}, so --{name} would be unused: drop one of them")
    if skip_pile and args.pile_rows != FLAGS["pile_rows"].default:
        raise SystemExit(f"{why}, so --pile_rows would be unused: drop one of them")
    files = [getattr(args, k) for k in ("input_file", "pile_file", "pile_filtered_file")]
    if len({os.path.realpath(p) for p in files if p}) < len([p for p in files if p]):
        raise SystemExit("--input_file, --pile_file and --pile_filtered_file name the same file: pass a "
                         "different file to each")
    # Checked up front: a wrong Pile path should not surface only after hours of tokenizing OpenWebText.
    for flag_name, fields in (("input_file", ("text",)), ("pile_file", ("input_ids", "tokens")),
                              ("pile_filtered_file", ("input_ids", "tokens"))):
        path = getattr(args, flag_name)
        if path is not None and not (os.path.isfile(path) and os.path.getsize(path) > 0):
            raise SystemExit(f"{path} does not exist or is empty; pass the path of a jsonl file to --{flag_name}.")
        if path is not None:  # the Pile sets hold GPT-2 tokens: 50,257 of them
            check_jsonl(path, *fields, vocab_size=None if flag_name == "input_file" else 50257)
    if args.tokenizer is None:
        enc = gpt2_encoding()  # also fills tiktoken's cache before the map workers need it
        tokenizer, vocab_size = None, enc.n_vocab
        out_dir = args.out_dir or checked_path("out_dir", "data/openwebtext")
        tokenizer_meta = {"tokenizer": "tiktoken", "tokenizer_name": "gpt2", "eot_token": enc.eot_token}
    else:
        tokenizer = load_tokenizer(args.tokenizer)
        vocab_size = len(tokenizer)  # added tokens included
        # The name's last part, e.g. SmolLM2-135M, in characters any file system takes.
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(os.path.normpath(args.tokenizer)))
        out_dir = args.out_dir or checked_path("out_dir", f"data/openwebtext-{name}")
        tokenizer_meta = {"tokenizer": "hf", "tokenizer_name": args.tokenizer, "tokenizer_dir": "tokenizer",
                          "eot_token": tokenizer.eos_token_id}
    dtype = dtype_for(vocab_size)
    bin_files = {name: os.path.join(out_dir, f"{name}.bin") for name in ("train", "val", *PILE_NAMES)}
    stale = stale_token_files(out_dir, bin_files, dtype.itemsize)  # written again, as a missing one is
    hub_piles = [name for name in PILE_NAMES if not skip_pile and getattr(args, f"{name}_file") is None
                 and (not os.path.exists(bin_files[name]) or name in stale)]
    if hub_piles:  # before any stage writes: the download comes last, after minutes of tokenizing
        import huggingface_hub.constants as hub
        from hf import offline_without_network
        offline_without_network()
        if hub.HF_HUB_OFFLINE:
            raise SystemExit(f"--{hub_piles[0]}_file is not given, so {PILE_NAMES[hub_piles[0]]} would be "
                             f"downloaded, and the hub cannot be reached (offline): pass --{hub_piles[0]}_file, "
                             f"or --skip_pile")
    meta_file = os.path.join(out_dir, "meta.json")
    lock = FolderLock(out_dir, "prepare_owt.py")  # one prepare at a time in out_dir
    check_prepared(out_dir, meta_file, tokenizer_meta, vocab_size, args.input_file, args.val_fraction, tokenizer)
    # The documents are loaded and split before the first file is written, so a failure leaves no trace.
    if os.path.exists(bin_files["train"]) and os.path.exists(bin_files["val"]) and not stale & {"train", "val"}:
        print(f"load: skipped, {out_dir} already holds both token files")
    else:
        splits = load_splits(args.input_file, args.val_fraction)
        print(f"load: {len(splits['train']):,} train and {len(splits['val']):,} val documents")
    os.makedirs(out_dir, exist_ok=True)
    lock.hold()
    written = set()

    if tokenizer is not None:
        tokenizer_dir = os.path.join(out_dir, tokenizer_meta["tokenizer_dir"])
        if os.path.exists(tokenizer_dir):
            print(f"tokenizer: skipped, {tokenizer_dir} exists")
        else:  # beside the data, so that checkpoints can carry it (train.py's tokenizer_reference)
            tokenizer.save_pretrained(tokenizer_dir)
            print(f"tokenizer: saved {args.tokenizer}'s tokenizer ({vocab_size:,} ids, {dtype} files) "
                  f"to {tokenizer_dir}")

    for split in ("train", "val"):
        if os.path.exists(bin_files[split]) and split not in stale:
            print(f"tokenize: skipped, {bin_files[split]} exists")
        else:
            ds = tokenize_split(splits[split], args.num_proc, tokenizer)
            n_tokens = write_bin(ds, "ids", bin_files[split], vocab_size, dtype, len(ds),
                                 tokenizer_name=args.tokenizer or "GPT-2")
            written.add(split)
            print(f"tokenize: wrote {bin_files[split]}, {n_tokens:,} tokens")

    # The Pile's first pile_rows rows, and all of the filtered set (10k rows).
    sources = {}  # where each Pile set written now came from, for meta.json
    for name, rows in (("pile", args.pile_rows), ("pile_filtered", None)):
        pile_file = getattr(args, f"{name}_file")
        if args.tokenizer is not None:
            print(f"{name}: skipped, its rows are GPT-2 tokens, not {args.tokenizer}'s")
        elif args.skip_pile:
            print(f"{name}: skipped, --skip_pile")
        elif os.path.exists(bin_files[name]) and name not in stale:
            print(f"{name}: skipped, {bin_files[name]} exists")
        else:
            ds = load_pile(name, pile_file, rows)
            # A streamed Hub set may not declare its features; its first row names the columns then.
            columns = ds.column_names or list(next(iter(ds)))
            column = next((c for c in ("input_ids", "tokens") if c in columns), None)
            if column is None:
                raise SystemExit(f"{pile_file or PILE_NAMES[name]} has no input_ids or tokens column, "
                                 f"only {columns}.")
            n_tokens = write_bin(ds, column, bin_files[name], vocab_size, dtype, rows)
            written.add(name)
            sources[name] = os.path.abspath(pile_file) if pile_file else PILE_NAMES[name]
            print(f"{name}: wrote {bin_files[name]}, {n_tokens:,} tokens")

    if os.path.exists(meta_file) and not written:
        print(f"meta: skipped, {meta_file} exists")
    else:
        # Rewritten after any stage writes, so a Pile set added by a later run gets its count; the source
        # stays the one that train.bin came from.
        meta = json.load(open(meta_file)) if os.path.exists(meta_file) else {}
        meta |= {"vocab_size": vocab_size, **tokenizer_meta, "dtype": dtype.name}
        for name, bin_file in bin_files.items():
            if os.path.exists(bin_file):
                meta[f"{name}_tokens"] = os.path.getsize(bin_file) // dtype.itemsize
        if "train" in written or "source" not in meta:
            meta["source"] = args.input_file or OWT_NAME
        if "train" in written:
            meta["val_fraction"] = args.val_fraction
            if args.input_file:
                meta["source_sha256"] = file_sha256(args.input_file)
        meta |= {f"{name}_source": source for name, source in sources.items()}
        try:  # aside first: a full disk must not leave the folder's meta.json cut short
            with open(meta_file + ".tmp", "w") as f:
                json.dump(meta, f, indent=2)
            os.replace(meta_file + ".tmp", meta_file)
        finally:
            configurator.discard(meta_file + ".tmp")
        print(f"meta: wrote {meta_file}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens")


if __name__ == "__main__":
    main()
