"""
Prepare the GPT-2 fine-tuning data: OpenWebText -> GPT-2 BPE -> one uint16 token stream per split, plus
two Pile evaluation sets that the Hub already holds tokenized with the same tokenizer.

    python prepare_owt.py                                    # downloads openwebtext and both Pile sets
    python prepare_owt.py --skip_pile                        # only the fine-tuning data
    python prepare_owt.py --input_file owt.jsonl --val_fraction 0.05 \\
        --pile_file pile.jsonl --pile_filtered_file pile_filtered.jsonl   # local files, no Hub

Writes out_dir/{train.bin, val.bin, pile.bin, pile_filtered.bin, meta.json}, out_dir defaulting to
data/openwebtext. Every stage is skipped when its output exists, so an interrupted run picks up where it
stopped. Each document is encoded as tokens + <|endoftext|> (50256) and the documents are concatenated;
train.py samples its windows from that stream. The Pile rows are 1024-token chunks written back to back
as they are. tiktoken downloads its GPT-2 files once; set TIKTOKEN_CACHE_DIR to use a local copy.
"""
import argparse
import json
import math
import os

import numpy as np
import tiktoken
from datasets import load_dataset
from tqdm import tqdm

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


def tokenize_split(ds, num_proc=None):
    """ds with one 'ids' column: each document's tokens followed by the end-of-text token."""
    num_proc = max(1, min(num_proc or os.cpu_count(), len(ds)))
    return ds.map(encode, batched=True, remove_columns=ds.column_names, num_proc=num_proc, desc="tokenizing")


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


def write_bin(ds, column, bin_file, vocab_size, n_rows=None):
    """Write the token-id lists of ds[column] back to back as uint16 to bin_file; returns the token count."""
    name = os.path.basename(bin_file)
    # Written under a temporary name so that a crash never leaves a truncated file the next run would skip.
    tmp_file = bin_file + ".tmp"
    n_tokens = 0
    total = math.ceil(n_rows / BATCH_ROWS) if n_rows else None
    batches = ds.with_format("numpy").iter(batch_size=BATCH_ROWS)
    with open(tmp_file, "wb") as f:
        for batch in tqdm(batches, total=total, desc=f"writing {name}"):
            chunk = np.concatenate(batch[column])
            if chunk.max() >= vocab_size:  # ids from another tokenizer would be read as wrong GPT-2 tokens
                raise SystemExit(f"{name}: found token id {chunk.max()}, beyond GPT-2's {vocab_size}-token "
                                 f"vocabulary; give rows tokenized with the GPT-2 tokenizer.")
            f.write(chunk.astype(np.uint16).tobytes())
            n_tokens += len(chunk)
    os.replace(tmp_file, bin_file)
    return n_tokens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_file", help="jsonl, one {\"text\": ...} per line (default: the Hub)")
    parser.add_argument("--val_fraction", type=float, default=0.0005, help="documents held out for val.bin")
    parser.add_argument("--out_dir", default="data/openwebtext")
    parser.add_argument("--num_proc", type=int, default=os.cpu_count())
    parser.add_argument("--pile_file", help="jsonl of rows with input_ids (default: the Hub)")
    parser.add_argument("--pile_filtered_file", help="jsonl of rows with input_ids (default: the Hub)")
    parser.add_argument("--pile_rows", type=int, default=10000, help="rows from the start of the Pile")
    parser.add_argument("--skip_pile", action="store_true", help="prepare only the fine-tuning data")
    args = parser.parse_args(argv)
    # Checked up front: a wrong Pile path should not surface only after hours of tokenizing OpenWebText.
    for flag, fields in (("input_file", ("text",)), ("pile_file", ("input_ids", "tokens")),
                         ("pile_filtered_file", ("input_ids", "tokens"))):
        path = getattr(args, flag)
        if path is not None and not (os.path.isfile(path) and os.path.getsize(path) > 0):
            raise SystemExit(f"{path} does not exist or is empty; pass the path of a jsonl file to --{flag}.")
        if path is not None and not (args.skip_pile and flag != "input_file"):
            check_jsonl(path, *fields)
    try:
        enc = tiktoken.get_encoding("gpt2")  # also fills tiktoken's cache before the map workers need it
    except OSError:  # requests' ConnectionError is an OSError, not the builtin ConnectionError
        raise SystemExit("Could not download tiktoken's GPT-2 files; connect to the internet or set "
                         "TIKTOKEN_CACHE_DIR to a folder that holds them.")
    os.makedirs(args.out_dir, exist_ok=True)
    bin_files = {name: os.path.join(args.out_dir, f"{name}.bin") for name in ("train", "val", *PILE_NAMES)}
    meta_file = os.path.join(args.out_dir, "meta.json")
    written = set()

    if os.path.exists(bin_files["train"]) and os.path.exists(bin_files["val"]):
        print(f"load: skipped, {args.out_dir} already holds both token files")
    else:
        splits = load_splits(args.input_file, args.val_fraction)
        print(f"load: {len(splits['train']):,} train and {len(splits['val']):,} val documents")

    for split in ("train", "val"):
        if os.path.exists(bin_files[split]):
            print(f"tokenize: skipped, {bin_files[split]} exists")
        else:
            ds = tokenize_split(splits[split], args.num_proc)
            n_tokens = write_bin(ds, "ids", bin_files[split], enc.n_vocab, len(ds))
            written.add(split)
            print(f"tokenize: wrote {bin_files[split]}, {n_tokens:,} tokens")

    # The Pile's first pile_rows rows, and all of the filtered set (10k rows).
    for name, rows in (("pile", args.pile_rows), ("pile_filtered", None)):
        pile_file = getattr(args, f"{name}_file")
        if args.skip_pile:
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
            n_tokens = write_bin(ds, column, bin_files[name], enc.n_vocab, rows)
            written.add(name)
            print(f"{name}: wrote {bin_files[name]}, {n_tokens:,} tokens")

    if os.path.exists(meta_file) and not written:
        print(f"meta: skipped, {meta_file} exists")
    else:
        # Rewritten after any stage writes, so a Pile set added by a later run gets its count; the source
        # stays the one that train.bin came from.
        meta = json.load(open(meta_file)) if os.path.exists(meta_file) else {}
        meta |= {"vocab_size": enc.n_vocab, "tokenizer": "tiktoken", "tokenizer_name": "gpt2",
                 "eot_token": enc.eot_token}
        for name, bin_file in bin_files.items():
            if os.path.exists(bin_file):
                meta[f"{name}_tokens"] = os.path.getsize(bin_file) // 2  # 2 bytes per uint16 token
        if "train" in written or "source" not in meta:
            meta["source"] = args.input_file or OWT_NAME
        with open(meta_file, "w") as f:
            json.dump(meta, f, indent=2)
        print(f"meta: wrote {meta_file}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens")


if __name__ == "__main__":
    main()
