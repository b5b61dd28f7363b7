"""
Prepare TinyStories for training: text -> SentencePiece vocab -> one uint16 token stream per split.

    python prepare_tinystories.py                          # downloads roneneldan/TinyStories
    python prepare_tinystories.py --input_file train.txt   # a local text file, documents split by blank lines
    python prepare_tinystories.py --input_file a.txt,b.txt --val_fraction 0.1   # several, pooled, then split

Writes out_dir/{tokenizer.model, tokenizer.vocab, train.bin, val.bin, meta.json}, out_dir defaulting to
data/tinystories<vocab_size>. Every stage is skipped when its output exists, so an interrupted run
picks up where it stopped. Each story is encoded as BOS + tokens and the stories are concatenated;
train.py samples its windows from that stream.
"""
import argparse
import json
import math
import os

import numpy as np
import sentencepiece as spm
from datasets import load_dataset
from tqdm import tqdm

HF_NAME = "roneneldan/TinyStories"
DTYPE = np.dtype(np.uint16)  # --vocab_size stays below 65536; meta.json names it for tokens.py


def load_splits(input_file=None, val_file=None, val_fraction=0.05):
    """{'train': Dataset, 'val': Dataset}, each with a 'text' column holding one story per row."""
    if input_file is None:
        try:
            ds = load_dataset(HF_NAME)
        except ConnectionError:
            raise SystemExit(f"Could not download {HF_NAME}; connect to the internet or pass --input_file.")
        return {"train": ds["train"], "val": ds["validation"]}
    if val_file is None and not 0 < val_fraction < 1:
        raise SystemExit(f"--val_fraction must lie strictly between 0 and 1, not {val_fraction}.")
    inputs = input_file.split(",")
    for path in inputs + [val_file]:
        if path is not None and not (os.path.isfile(path) and os.path.getsize(path) > 0):
            raise SystemExit(f"{path} does not exist or is empty; pass the path of a plain text file.")
        if path is not None and not holds_text(path):
            raise SystemExit(f"{path} holds only whitespace (or is not UTF-8 text); pass a file of stories.")
    files = {"train": inputs} | ({"val": val_file} if val_file else {})
    ds = load_dataset("text", data_files=files, sample_by="paragraph")
    if val_file:
        return {"train": ds["train"], "val": ds["val"]}
    split = ds["train"].train_test_split(test_size=val_fraction, seed=2357)
    return {"train": split["train"], "val": split["test"]}


def holds_text(path, chunk=1 << 20):
    """True once a non-whitespace character turns up; reads only as far as it needs to."""
    try:
        with open(path, encoding="utf-8") as f:
            while block := f.read(chunk):
                if not block.isspace():
                    return True
    except UnicodeDecodeError:
        return False
    return False


def train_vocab(train, model_file, vocab_size, vocab_docs, verbose=False):
    """Learn a BPE SentencePiece vocab from the first vocab_docs stories; writes model_file and .vocab."""
    prefix = model_file.removesuffix(".model")
    text_file = prefix + "_train.txt"
    with open(text_file, "w", encoding="utf-8") as f:
        for doc in train.select(range(min(vocab_docs, len(train))))["text"]:
            f.write(doc + "\n")
    try:
        # byte_fallback: a character unseen here becomes its UTF-8 bytes, never <unk>; identity: no NFKC
        # rewriting of the text; split_digits keeps numbers from merging into thousands of number pieces.
        spm.SentencePieceTrainer.train(
            input=text_file, model_prefix=prefix, vocab_size=vocab_size,
            model_type="bpe", character_coverage=1.0, split_digits=True, byte_fallback=True,
            normalization_rule_name="identity", allow_whitespace_only_pieces=True,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, input_format="text",
            num_threads=os.cpu_count(),
            minloglevel=0 if verbose else 2,  # its C++ log is pages long; errors still surface
        )
    except RuntimeError as e:  # e.g. a vocab_size below the number of distinct characters + 256 bytes
        raise SystemExit(f"SentencePiece could not train a {vocab_size}-piece vocab: {e}")
    finally:
        os.remove(text_file)


def encode(batch, model_proto):
    # Rebuilt from the model's bytes per batch, inside map's worker (cheap); see tokenize_split for why bytes.
    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    ids = sp.encode(batch["text"], add_bos=True, num_threads=1)  # num_proc processes already fill the cores
    return {"ids": ids, "len": [len(x) for x in ids]}


def tokenize_split(ds, model_file, bin_file, num_proc=None):
    """Encode every document of ds as BOS + tokens and write them back to back as uint16 to bin_file."""
    with open(model_file, "rb") as f:
        model_proto = f.read()
    assert spm.SentencePieceProcessor(model_proto=model_proto).vocab_size() < 2**16, "ids must fit in uint16"
    # map gets the model's bytes, not its path: datasets keys its cache on fn_kwargs, so a retrained vocab
    # written to the same path can never pick up ids cached from the old one.
    num_proc = max(1, min(num_proc or os.cpu_count(), len(ds)))
    name = os.path.basename(bin_file)
    ds = ds.map(encode, batched=True, fn_kwargs={"model_proto": model_proto}, remove_columns=ds.column_names,
                num_proc=num_proc, desc=f"tokenizing {name}")
    n_tokens = int(np.sum(ds["len"], dtype=np.int64))
    # Written under a temporary name so that a crash never leaves a truncated file the next run would skip.
    tmp_file = bin_file + ".tmp"
    out = np.memmap(tmp_file, dtype=DTYPE, mode="w+", shape=(n_tokens,))
    pos = 0
    batches = ds.with_format("numpy").iter(batch_size=4096)
    for batch in tqdm(batches, total=math.ceil(len(ds) / 4096), desc=f"writing {name}"):
        chunk = np.concatenate(batch["ids"])
        out[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
    out.flush()
    os.replace(tmp_file, bin_file)
    return n_tokens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_file", help="plain text, documents split by blank lines; several files, "
                                             "comma-separated, are pooled (default: the Hub)")
    parser.add_argument("--val_file", help="validation text, same format (default: hold out --val_fraction)")
    parser.add_argument("--val_fraction", type=float, default=0.05)
    parser.add_argument("--vocab_size", type=int, default=10000)
    parser.add_argument("--vocab_docs", type=int, default=200000, help="stories the vocab is learned from")
    parser.add_argument("--out_dir", help="default: data/tinystories<vocab_size>")
    parser.add_argument("--num_proc", type=int, default=os.cpu_count())
    parser.add_argument("--verbose", action="store_true", help="show SentencePiece's training log")
    args = parser.parse_args(argv)
    if not 0 < args.vocab_size < 2**16:
        raise SystemExit(f"--vocab_size must be below 65536 so token ids fit in uint16, not {args.vocab_size}.")
    out_dir = args.out_dir or f"data/tinystories{args.vocab_size}"
    os.makedirs(out_dir, exist_ok=True)
    model_file = os.path.join(out_dir, "tokenizer.model")
    bin_files = {split: os.path.join(out_dir, f"{split}.bin") for split in ("train", "val")}
    meta_file = os.path.join(out_dir, "meta.json")

    if os.path.exists(model_file) and all(os.path.exists(p) for p in bin_files.values()):
        print(f"load: skipped, {out_dir} already holds the tokenizer and both token files")
    else:
        splits = load_splits(args.input_file, args.val_file, args.val_fraction)
        print(f"load: {len(splits['train']):,} train and {len(splits['val']):,} val documents")

    if os.path.exists(model_file):
        print(f"vocab: skipped, {model_file} exists")
    else:
        train_vocab(splits["train"], model_file, args.vocab_size, args.vocab_docs, args.verbose)
        print(f"vocab: wrote {model_file}")

    for split, bin_file in bin_files.items():
        if os.path.exists(bin_file):
            print(f"tokenize: skipped, {bin_file} exists")
        else:
            n_tokens = tokenize_split(splits[split], model_file, bin_file, args.num_proc)
            print(f"tokenize: wrote {bin_file}, {n_tokens:,} tokens")

    if os.path.exists(meta_file):
        print(f"meta: skipped, {meta_file} exists")
    else:
        sp = spm.SentencePieceProcessor(model_file=model_file)
        meta = {
            "vocab_size": sp.vocab_size(), "tokenizer": "sentencepiece", "tokenizer_model": "tokenizer.model",
            "bos_id": sp.bos_id(), "eos_id": sp.eos_id(), "dtype": DTYPE.name,
            "train_tokens": os.path.getsize(bin_files["train"]) // DTYPE.itemsize,
            "val_tokens": os.path.getsize(bin_files["val"]) // DTYPE.itemsize,
            "source": args.input_file or HF_NAME,
        }
        with open(meta_file, "w") as f:
            json.dump(meta, f, indent=2)
        print(f"meta: wrote {meta_file}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens")


if __name__ == "__main__":
    main()
