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
stopped. Each document is encoded as tokens + <|endoftext|> (50256) and the documents are concatenated;
train.py samples its windows from that stream. The Pile rows are 1024-token chunks written back to back
as they are. tiktoken downloads its GPT-2 files once; set TIKTOKEN_CACHE_DIR to use a local copy.

--tokenizer takes a hub name or a folder written by save_pretrained. Each document is then the
tokenizer's own framing (e.g. Llama's BOS) + its tokens + the tokenizer's end-of-sequence id, which
separates documents as <|endoftext|> does for GPT-2. The files are uint16 while every id fits, uint32
beyond (Llama-3's 128,256 ids); meta.json names the dtype (see tokens.py). The tokenizer is saved in
out_dir/tokenizer, so checkpoints trained on the data carry it. The Pile sets hold GPT-2 tokens and
are skipped.
"""
import argparse
import json
import math
import os
import re

import numpy as np
import tiktoken
from datasets import load_dataset
from tqdm import tqdm

from tokens import dtype_for

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
        ds = load_dataset("json", data_files=input_file, split="train")
    # OpenWebText has no validation split; these numbers are the project's spec, so every machine holds
    # out the same documents.
    try:
        split = ds.train_test_split(test_size=val_fraction, seed=2357, shuffle=True)
    except ValueError as e:  # too few documents to leave both splits non-empty
        raise SystemExit(f"Cannot hold out {val_fraction} of {len(ds)} documents for validation: {e}")
    return {"train": split["train"], "val": split["test"]}


def check_jsonl(path, *fields):
    """Every line one JSON object holding one of fields, or one sentence naming the first line that is
    not: datasets' own error is a long traceback that names no line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"{path}, line {n}, is not valid JSON ({e.msg}); each line must be one "
                                 f"object such as {{\"{fields[0]}\": ...}}.")
            if not isinstance(row, dict) or not any(k in row for k in fields):
                raise SystemExit(f"{path}, line {n}, has no {' or '.join(repr(k) for k in fields)} field; "
                                 f"each line must be one object such as {{\"{fields[0]}\": ...}}.")


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
    # datasets keys its cache on fn_kwargs, the tokenizer's content included.
    fn, fn_kwargs = (encode, None) if tokenizer is None else (encode_hf, {"tokenizer": tokenizer})
    return ds.map(fn, batched=True, fn_kwargs=fn_kwargs, remove_columns=ds.column_names, num_proc=num_proc,
                  desc="tokenizing")


def load_tokenizer(name_or_dir):
    """AutoTokenizer.from_pretrained(name_or_dir), refused in one sentence when it cannot be loaded or
    has no end-of-sequence token to separate documents with."""
    from transformers import AutoTokenizer
    files = ("tokenizer.json", "tokenizer_config.json")
    if os.path.isdir(name_or_dir) and not any(os.path.isfile(os.path.join(name_or_dir, f)) for f in files):
        raise SystemExit(f"{name_or_dir} is not a tokenizer folder written by save_pretrained (it has no "
                         f"tokenizer.json or tokenizer_config.json)")
    if not os.path.isdir(name_or_dir) and name_or_dir.startswith((".", "/", "~")):
        raise SystemExit(f"no folder at {name_or_dir}: pass a folder written by save_pretrained, or a hub "
                         f"name such as HuggingFaceTB/SmolLM2-135M")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_dir)
    except (OSError, ValueError) as e:
        if os.path.isdir(name_or_dir):
            raise SystemExit(f"transformers could not read {name_or_dir} ({str(e).splitlines()[0]})") from None
        raise SystemExit(f"could not download {name_or_dir}: no network, or no such tokenizer on the hub; "
                         f"pass a local directory written by save_pretrained") from None
    if tokenizer.eos_token_id is None:
        raise SystemExit(f"{name_or_dir}'s tokenizer has no end-of-sequence token to separate documents "
                         f"with; pass the tokenizer of a model that defines eos_token")
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
    with open(tmp_file, "wb") as f:
        for batch in tqdm(batches, total=total, desc=f"writing {name}"):
            chunk = np.concatenate(batch[column])
            if chunk.max() >= vocab_size:  # ids from another tokenizer would be read as wrong tokens
                raise SystemExit(f"{name}: found token id {chunk.max()}, beyond {tokenizer_name}'s {vocab_size}-"
                                 f"token vocabulary; give rows tokenized with the {tokenizer_name} tokenizer.")
            f.write(chunk.astype(dtype).tobytes())
            n_tokens += len(chunk)
    os.replace(tmp_file, bin_file)
    return n_tokens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_file", help="jsonl, one {\"text\": ...} per line (default: the Hub)")
    parser.add_argument("--val_fraction", type=float, default=0.0005, help="documents held out for val.bin")
    parser.add_argument("--out_dir", help="default: data/openwebtext, with --tokenizer "
                                           "data/openwebtext-<its name>")
    parser.add_argument("--num_proc", type=int, default=os.cpu_count())
    parser.add_argument("--pile_file", help="jsonl of rows with input_ids (default: the Hub)")
    parser.add_argument("--pile_filtered_file", help="jsonl of rows with input_ids (default: the Hub)")
    parser.add_argument("--pile_rows", type=int, default=10000, help="rows from the start of the Pile")
    parser.add_argument("--skip_pile", action="store_true", help="prepare only the fine-tuning data")
    parser.add_argument("--tokenizer", help="an HF model's tokenizer, hub name or local folder, instead of "
                                            "GPT-2's (the Pile sets are skipped)")
    args = parser.parse_args(argv)
    skip_pile = args.skip_pile or args.tokenizer is not None
    # Checked up front: a wrong Pile path should not surface only after hours of tokenizing OpenWebText.
    for flag, fields in (("input_file", ("text",)), ("pile_file", ("input_ids", "tokens")),
                         ("pile_filtered_file", ("input_ids", "tokens"))):
        path = getattr(args, flag)
        if path is not None and not (os.path.isfile(path) and os.path.getsize(path) > 0):
            raise SystemExit(f"{path} does not exist or is empty; pass the path of a jsonl file to --{flag}.")
        if path is not None and not (skip_pile and flag != "input_file"):
            check_jsonl(path, *fields)
    if args.tokenizer is None:
        try:
            enc = tiktoken.get_encoding("gpt2")  # also fills tiktoken's cache before the map workers need it
        except OSError:  # requests' ConnectionError is an OSError, not the builtin ConnectionError
            raise SystemExit("Could not download tiktoken's GPT-2 files; connect to the internet or set "
                             "TIKTOKEN_CACHE_DIR to a folder that holds them.")
        tokenizer, vocab_size = None, enc.n_vocab
        out_dir = args.out_dir or "data/openwebtext"
        tokenizer_meta = {"tokenizer": "tiktoken", "tokenizer_name": "gpt2", "eot_token": enc.eot_token}
    else:
        tokenizer = load_tokenizer(args.tokenizer)
        vocab_size = len(tokenizer)  # added tokens included
        # The name's last part, e.g. SmolLM2-135M, in characters any file system takes.
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(os.path.normpath(args.tokenizer)))
        out_dir = args.out_dir or f"data/openwebtext-{name}"
        tokenizer_meta = {"tokenizer": "hf", "tokenizer_name": args.tokenizer, "tokenizer_dir": "tokenizer",
                          "eot_token": tokenizer.eos_token_id}
    dtype = dtype_for(vocab_size)
    os.makedirs(out_dir, exist_ok=True)
    bin_files = {name: os.path.join(out_dir, f"{name}.bin") for name in ("train", "val", *PILE_NAMES)}
    meta_file = os.path.join(out_dir, "meta.json")
    written = set()

    if tokenizer is not None:
        tokenizer_dir = os.path.join(out_dir, tokenizer_meta["tokenizer_dir"])
        if os.path.exists(tokenizer_dir):
            print(f"tokenizer: skipped, {tokenizer_dir} exists")
        else:  # beside the data, so that checkpoints can carry it (train.py's tokenizer_reference)
            tokenizer.save_pretrained(tokenizer_dir)
            print(f"tokenizer: saved {args.tokenizer}'s tokenizer ({vocab_size:,} ids, {dtype} files) "
                  f"to {tokenizer_dir}")

    if os.path.exists(bin_files["train"]) and os.path.exists(bin_files["val"]):
        print(f"load: skipped, {out_dir} already holds both token files")
    else:
        splits = load_splits(args.input_file, args.val_fraction)
        print(f"load: {len(splits['train']):,} train and {len(splits['val']):,} val documents")

    for split in ("train", "val"):
        if os.path.exists(bin_files[split]):
            print(f"tokenize: skipped, {bin_files[split]} exists")
        else:
            ds = tokenize_split(splits[split], args.num_proc, tokenizer)
            n_tokens = write_bin(ds, "ids", bin_files[split], vocab_size, dtype, len(ds),
                                 tokenizer_name=args.tokenizer or "GPT-2")
            written.add(split)
            print(f"tokenize: wrote {bin_files[split]}, {n_tokens:,} tokens")

    # The Pile's first pile_rows rows, and all of the filtered set (10k rows).
    for name, rows in (("pile", args.pile_rows), ("pile_filtered", None)):
        pile_file = getattr(args, f"{name}_file")
        if args.tokenizer is not None:
            print(f"{name}: skipped, its rows are GPT-2 tokens, not {args.tokenizer}'s")
        elif args.skip_pile:
            print(f"{name}: skipped, --skip_pile")
        elif os.path.exists(bin_files[name]):
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
        with open(meta_file, "w") as f:
            json.dump(meta, f, indent=2)
        print(f"meta: wrote {meta_file}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens")


if __name__ == "__main__":
    main()
