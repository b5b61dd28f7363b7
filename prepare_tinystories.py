"""
Prepare TinyStories for training: text -> SentencePiece vocab -> one uint16 token stream per split.

    python prepare_tinystories.py                          # downloads roneneldan/TinyStories
    python prepare_tinystories.py --input_file train.txt   # a local text file, documents split by blank lines
                                                           # (or by <|endoftext|> lines, as TinyStoriesV2's)
    python prepare_tinystories.py --input_file a.txt,b.txt --val_fraction 0.1   # several, pooled, then split

Writes out_dir/{tokenizer.model, tokenizer.vocab, train.bin, val.bin, meta.json}, out_dir defaulting to
data/tinystories<vocab_size>. Every stage is skipped when its output exists, so an interrupted run
picks up where it stopped; a folder prepared with another --vocab_size or from other text is refused.
Each story is encoded as BOS + tokens and the stories are concatenated; train.py samples its windows
from that stream.
"""
import itertools
import json
import math
import os
import re
import shlex
import sys

try:
    import configurator  # first: a missing package or a full disk is then one sentence (its hook)
except ModuleNotFoundError:  # this file alone, away from the repository, or PYTHONSAFEPATH=1
    sys.exit(f"{__file__} needs the repository's other files beside it (configurator.py, model.py, ...): run it "
             f"in a clone of the repository, without python -I or -P or PYTHONSAFEPATH (each keeps the script's "
             f"folder off the import path)")

import numpy as np
import sentencepiece as spm
import datasets
from datasets import load_dataset
from tqdm import tqdm

from configurator import FolderLock, check_cache, checked_path, flag, parse_flags, releasing_locks, tie_workers
from tokens import changed_since, check_data_out_dir, file_sha256, json_shape, read_meta, stale_token_files

HF_NAME = "roneneldan/TinyStories"
DTYPE = np.dtype(np.uint16)  # --vocab_size stays below 65536; meta.json names it for tokens.py
EOT_LINE = "<|endoftext|>"  # TinyStoriesV2's separator between stories, on a line of its own
MAX_STORY_LINES = 1000  # more lines than this without a blank one are stories that lack their separators
MIN_VOCAB = 256 + 3 + 1  # byte_fallback's 256 byte pieces, <unk>, <s>, </s>, and at least one character


def load_splits(input_file=None, val_file=None, val_fraction=0.05):
    """{'train': Dataset, 'val': Dataset}, each with a 'text' column holding one story per row;
    input_file is one path, several comma-separated, or a tuple of them."""
    if input_file is None:
        try:
            ds = load_dataset(HF_NAME)
        except ConnectionError:
            raise SystemExit(f"Could not download {HF_NAME}; connect to the internet or pass --input_file.")
        return {"train": ds["train"], "val": ds["validation"]}
    if val_file is None and not 0 < val_fraction < 1:
        raise SystemExit(f"--val_fraction must lie strictly between 0 and 1, not {val_fraction}.")
    inputs = list(input_file.split(",") if isinstance(input_file, str) else input_file)
    for path, name in [(p, "input_file") for p in inputs] + [(val_file, "val_file")]:
        if path is not None and not path.strip():
            raise SystemExit(f"--{name} holds an empty name (a stray comma?); pass the path of a plain text "
                             f"file.")
        if path is not None and not (os.path.isfile(path) and os.path.getsize(path) > 0):
            raise SystemExit(f"{path} does not exist or is empty; pass the path of a plain text file.")
        if path is not None and not holds_text(path):
            raise SystemExit(f"{path} holds only whitespace; pass a file of stories.")
        if path is not None and json_shape(path) in ('array', 'object'):
            text = os.path.splitext(path)[0] + '.txt'
            what = "one JSON array of records" if json_shape(path) == 'array' else "one JSON object"
            raise SystemExit(f"{path} is {what}, and prepare_tinystories.py reads plain text, "
                             f"stories separated by blank lines: write its texts that way first (`python -c \"import "
                             f"json, sys; d = json.load(open(sys.argv[1])); print((chr(10) * 2).join(r['text'] for r in "
                             f"(d if isinstance(d, list) else [d])))\" {shlex.quote(path)} > {shlex.quote(text)}`, for "
                             f"records with a 'text' field) and pass {text}.")
        if path is not None and (json_shape(path) == 'lines' or path.endswith((".jsonl", ".json"))):
            raise SystemExit(f"{path} is JSON lines, which prepare_owt.py --input_file reads; prepare_tinystories.py "
                             f"reads plain text, stories separated by blank lines.")
        if path is not None and csv_header(path):
            header = csv_header(path)
            column = next((c for c in header if c.strip().lower() in ('text', 'story', 'content', 'body')), header[-1])
            text = os.path.splitext(path)[0] + '.stories.txt'
            raise SystemExit(f"{path} is CSV (its first line names the columns {', '.join(header[:4])}), and "
                             f"prepare_tinystories.py reads plain text, stories separated by blank lines: write its "
                             f"{column!r} column that way first (`python -c \"import csv, sys; print((chr(10) * 2).join("
                             f"r[{column!r}] for r in csv.DictReader(open(sys.argv[1], newline=''))))\" "
                             f"{shlex.quote(path)} > {shlex.quote(text)}`) and pass {text}.")
        if path is not None and eot_separated(path) and (lines := longest_block(path, eot=True)) > MAX_STORY_LINES:
            raise SystemExit(f"{path} separates stories by {EOT_LINE} lines, but has {lines:,} lines in a row without "
                             f"one, which would be read as one story (stories separated by blank lines, with "
                             f"{EOT_LINE} lines added?): separate every story of it the same way")
        if path is not None and not eot_separated(path) and (lines := longest_block(path)) > MAX_STORY_LINES:
            raise SystemExit(f"{path} has {lines:,} lines in a row with no blank line between them, "
                             f"which would be read as one story: separate its stories by blank lines (one story "
                             f"per line? `sed G {shlex.quote(path)} > spaced.txt` adds them)")
    if val_file and any(os.path.realpath(val_file) == os.path.realpath(p) for p in inputs):
        raise SystemExit(f"--val_file={val_file} is also an --input_file: validation text must be held out of "
                         f"training, so name another file or drop --val_file to hold out --val_fraction")
    copied = [p for p in inputs if val_file and os.path.getsize(p) == os.path.getsize(val_file)
              and file_sha256(p) == file_sha256(val_file)]
    if copied:  # cp train.txt val.txt: the validation loss would score the training text
        raise SystemExit(f"--val_file={val_file} holds the same bytes as --input_file={copied[0]} (a copy): validation "
                         f"text must be held out of training, so name another file or drop --val_file to hold out "
                         f"--val_fraction")
    files = {"train": inputs} | ({"val": val_file} if val_file else {})
    if sum(os.path.getsize(p) for p in inputs + ([val_file] if val_file else [])) < 100 << 20:
        datasets.disable_progress_bars()  # seconds of loading: its progress lines would only bury our own
    # load_dataset's paragraphs end at an empty line; a line of spaces that looks blank, or an <|endoftext|>
    # line, needs our own reader. A byte-order mark (a Windows editor's) is no part of the first story.
    if any(eot_separated(p) or blank_with_spaces(p) for p in inputs + ([val_file] if val_file else [])):
        ds = {split: stories_of(paths if isinstance(paths, list) else [paths]) for split, paths in files.items()}
    else:
        ds = load_dataset("text", data_files=files, sample_by="paragraph", encoding="utf-8-sig")
    if val_file:
        return {"train": ds["train"], "val": ds["val"]}
    try:
        split = ds["train"].train_test_split(test_size=val_fraction, seed=2357)
    except ValueError:  # too few stories to leave both splits non-empty
        if len(ds['train']) == 1:  # all the text one story: its separators are missing
            lines = sum(longest_block(p) > 1 for p in inputs)  # a file of many lines: a story per line?
            raise SystemExit(f"{', '.join(inputs)} reads as one story, and holding some out needs two or more: "
                             f"separate its stories by blank lines (or <|endoftext|> lines)"
                             + (f" (one story per line? `sed G {shlex.quote(inputs[0])} > spaced.txt` adds them)"
                                if lines and len(inputs) == 1 else "") + ", or pass a --val_file") from None
        raise SystemExit(f"cannot hold out {val_fraction} of {len(ds['train'])} stories and keep both splits "
                         f"non-empty: pass more text, another --val_fraction, or a --val_file") from None
    return {"train": split["train"], "val": split["test"]}


def eot_separated(path, limit=16 << 20):
    """Whether path separates its stories by <|endoftext|> lines (TinyStoriesV2's raw text files) rather
    than by blank lines: such a line within its first limit bytes."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip() == EOT_LINE:
                return True
            limit -= len(line)
            if limit < 0:
                return False
    return False


def stories_of(paths):
    """A Dataset of one story per row from text files, each split by its own separator: <|endoftext|>
    lines, or blank lines (as load_dataset's paragraphs)."""
    def rows(path, stamp):  # stamp: the file's size and time, so that an edited file is read again
        story, eot = [], eot_separated(path)
        with open(path, encoding="utf-8-sig") as f:
            for line in f:
                end = line.strip() == EOT_LINE if eot else not line.strip()
                if end and "".join(story).strip():
                    yield {"text": "".join(story).strip()}
                story = [] if end else story + [line]
        if "".join(story).strip():
            yield {"text": "".join(story).strip()}
    parts = [datasets.Dataset.from_generator(rows, gen_kwargs=dict(path=p, stamp=(os.path.getsize(p),
                                                                               os.path.getmtime(p))))
             for p in paths]
    return datasets.concatenate_datasets(parts)


def blank_with_spaces(path, limit=16 << 20):
    """Whether a line of path that looks blank holds spaces or tabs, in its first limit bytes."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip() and line.strip("\r\n"):
                return True
            limit -= len(line)
            if limit < 0:
                return False
    return False


def holds_text(path, chunk=1 << 20):
    """True once a non-whitespace character turns up; reads only as far as it needs to. The flag layer
    has checked that the file is UTF-8 (configurator.not_utf8)."""
    with open(path, encoding="utf-8") as f:
        while block := f.read(chunk):
            if not block.isspace():
                return True
    return False


MARKUP_LINE = re.compile(r"#{1,6}\s.*|[-*_=]{3,}")  # a Markdown heading or rule, as a line of its own


def csv_header(path, rows=200):
    """The column names when path is CSV (a spreadsheet's export of stories, whatever its name ends in): a
    first line of two or more short names, and nine in ten of the next lines with that many fields; else
    None. Prose, whose lines hold commas as it needs them, has no such columns."""
    import csv
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        try:
            parsed = list(itertools.islice((r for r in csv.reader(f) if any(c.strip() for c in r)), rows + 1))
        except csv.Error:
            return None
    if len(parsed) < 3 or len(parsed[0]) < 2 or not all(re.fullmatch(r"\s*[A-Za-z_][\w ]{0,30}\s*", c) for c in parsed[0]):
        return None
    same = sum(len(r) == len(parsed[0]) for r in parsed[1:])
    return [c.strip() for c in parsed[0]] if same >= 0.9 * (len(parsed) - 1) else None


def longest_block(path, limit=16 << 20, eot=False):
    """The most lines in a row without a blank one (with eot: without an <|endoftext|> line), in the first
    limit bytes of path: one document to the reader."""
    longest = run = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            run = 0 if (line.strip() == EOT_LINE if eot else not line.strip()) else run + 1
            longest = max(longest, run)
            limit -= len(line)
            if limit < 0:
                break
    return longest


SENTENCE_BYTES = 4192  # SentencePieceTrainer's max_sentence_length: a longer line is left out of its training


def trainer_lines(doc):
    """The document's lines as SentencePiece's trainer reads them, a line longer than SENTENCE_BYTES cut at
    spaces into pieces that fit (the trainer skips such a line without a word: a corpus of one-line
    documents would train on almost nothing). TinyStories' lines all fit, so its vocabulary is unchanged."""
    for line in doc.split("\n"):
        while len(line.encode("utf-8")) > SENTENCE_BYTES:
            cut = line.encode("utf-8")[:SENTENCE_BYTES].decode("utf-8", "ignore")
            cut = cut[:cut.rfind(" ")] if " " in cut[1:] else cut  # at a space; a run without one, anywhere
            yield cut
            line = line[len(cut):].lstrip(" ")
        yield line


def train_vocab(train, model_file, vocab_size, vocab_docs, verbose=False, max_stories=0):
    """Learn a BPE SentencePiece vocab from the first vocab_docs stories; writes model_file and .vocab.
    max_stories: the --max_stories that cut the training stories, which a sentence on too little text names."""
    prefix = model_file.removesuffix(".model")
    text_file = prefix + "_train.txt"
    try:
        with open(text_file, "w", encoding="utf-8") as f:
            for doc in train.select(range(min(vocab_docs, len(train))))["text"]:
                f.write("".join(line + "\n" for line in trainer_lines(doc)))
        # byte_fallback: a character unseen here becomes its UTF-8 bytes, never <unk>; identity: no NFKC
        # rewriting of the text; split_digits keeps numbers from merging into thousands of number pieces.
        spm.SentencePieceTrainer.train(
            input=text_file, model_prefix=prefix, vocab_size=vocab_size,
            model_type="bpe", character_coverage=1.0, split_digits=True, byte_fallback=True,
            normalization_rule_name="identity", allow_whitespace_only_pieces=True,
            unk_id=0, bos_id=1, eos_id=2, pad_id=-1, input_format="text",
            num_threads=os.cpu_count() or 1,
            minloglevel=0 if verbose else 2,  # its C++ log is pages long; errors still surface
        )
    except RuntimeError as e:  # e.g. a vocab_size below the number of distinct characters + 256 bytes
        for partial in (model_file, prefix + ".vocab"):  # this stage's, cut short: the next run redoes it
            configurator.discard(partial)
        reason = str(e).strip().splitlines()[0].split("] ", 1)[-1]  # without the C++ source location
        need = re.search(r"smaller than required_chars\. \d+ vs (\d+)", reason)
        if need:
            reason = (f"its 256 byte pieces, <unk>, <s>, </s> and the text's distinct characters need "
                      f"{need[1]}; raise --vocab_size to at least that")
        most = re.search(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)", reason)
        if most:  # too little text for that many merges: it learns from the first vocab_docs stories
            used = min(vocab_docs, len(train))
            more = ("raise --vocab_docs" if used == vocab_docs else
                    f"raise --max_stories (or drop it: 0 keeps every story)" if max_stories and used == max_stories
                    else "give more text")
            cut = f"--max_stories={max_stories}" if max_stories and used == max_stories else f"--vocab_docs={vocab_docs}"
            reason = (f"the {used:,} {'story' if used == 1 else 'stories'} it learns from "
                      f"({cut}) {'holds' if used == 1 else 'hold'} too little text for more "
                      f"than {most[2]} pieces; {more}, or lower --vocab_size to {most[2]}")
        raise SystemExit(f"SentencePiece could not train a {vocab_size}-piece vocab: {reason}") from None
    finally:
        configurator.discard(text_file)


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
    quick = len(ds) < 100_000  # seconds of work: no progress bars
    if quick:
        datasets.disable_progress_bars()
    ds = ds.map(encode, batched=True, fn_kwargs={"model_proto": model_proto}, remove_columns=ds.column_names,
                num_proc=num_proc, desc=f"tokenizing {name}")
    n_tokens = int(np.sum(ds["len"], dtype=np.int64))
    # Written under a temporary name so that a crash never leaves a truncated file the next run would skip.
    # Ordinary writes, not a memory map: a full disk is then an OSError (ENOSPC), where a store into a
    # mapped page the disk has no room for kills the process with SIGBUS.
    tmp_file = bin_file + ".tmp"
    try:
        with open(tmp_file, "wb") as f:
            batches = ds.with_format("numpy").iter(batch_size=4096)
            for batch in tqdm(batches, total=math.ceil(len(ds) / 4096), desc=f"writing {name}", disable=quick):
                f.write(np.concatenate(batch["ids"]).astype(DTYPE).tobytes())
        os.replace(tmp_file, bin_file)
    except BaseException:
        configurator.discard(tmp_file)
        raise
    return n_tokens


FLAGS = dict(
    input_file=flag(None, "plain text, documents split by blank lines; several files, comma-separated, are "
                          "pooled (default: the Hub)", items=str, unique=True, path='text'),
    val_file=flag(None, "validation text, same format, with --input_file (default: hold out --val_fraction)",
                  type=str, path='text'),
    val_fraction=flag(0.05, "stories of --input_file held out for val.bin", above=0, below=1),
    vocab_size=flag(10000, "SentencePiece vocabulary: its 256 byte pieces, <unk>, <s>, </s> and the text's "
                           "characters, below 65536 so that ids fit in uint16", min=MIN_VOCAB, max=2**16 - 1),
    vocab_docs=flag(200000, "stories the vocab is learned from", min=1),
    max_stories=flag(0, "train on the first N training stories only (0: all), e.g. 20000 for the CPU quick "
                        "start; the val split stays whole", min=0),
    out_dir=flag(None, "default: data/tinystories<vocab_size>", type=str, path='out',
                 read_only_when=lambda values: prepared(values['out_dir'])),
    num_proc=flag(0, "processes for tokenizing (0: every core), at most the cores", min=0, max=os.cpu_count() or 1),
    verbose=flag(False, "show SentencePiece's training log"),
)


def prepared(out_dir):
    """Whether out_dir holds every stage's output, so that a run writes nothing there."""
    names = ("tokenizer.model", "train.bin", "val.bin", "meta.json")
    return all(os.path.isfile(os.path.join(out_dir, name)) for name in names)


def same_file(stored, given):
    """Whether a path that meta.json recorded names the file given now (resolved from here, or, when the
    recorded one does not resolve from here, by name)."""
    if os.path.exists(stored):
        return os.path.realpath(stored) == os.path.realpath(given)
    return os.path.basename(stored) == os.path.basename(given)


def changed_text(out_dir, flag_name, recorded, hashes, given):
    """Whether the text files given now hold the bytes meta.json recorded (hashes, one sha256 each, of
    the paths recorded): True when they do, wherever they are now; a refusal when one of them is the
    file recorded, changed since; False when the folder recorded no hashes or other files."""
    if not (isinstance(hashes, list) and len(hashes) == len(recorded) == len(given)):
        return False
    now = [file_sha256(path) for path in given]
    for was, path, old, new in zip(recorded, given, hashes, now):
        if same_file(was, path) and old != new:
            raise SystemExit(changed_since(path, out_dir, flag_name))
    return now == hashes


def check_prepared(out_dir, source, val_file, val_fraction, vocab_size, model_file, meta_file,
                   flag_name="out_dir", max_stories=None, vocab_docs=None):
    """Refuse, before anything is written, a folder that already holds data prepared otherwise: every
    stage whose output exists is skipped, so it would be kept under the new flags."""
    ours = {"tokenizer.model", "tokenizer.vocab", "tokenizer_train.txt", "train.bin", "val.bin", "meta.json"}
    check_data_out_dir(out_dir, ours, "prepare_tinystories.py")
    try:
        kind = read_meta(out_dir).get("tokenizer", "sentencepiece")
    except ValueError:
        kind = "sentencepiece"  # its meta.json is said below
    if kind != "sentencepiece":
        raise SystemExit(f"{out_dir} holds {kind} tokens (prepare_owt.py's data), not TinyStories in a SentencePiece "
                         f"vocabulary: choose another --{flag_name}")
    # A token file is kept only as the tokenize stage of this tokenizer. meta.json, written last, records the
    # tokenizer's hash (a copied folder keeps it, though not its files' times; a folder from before the hash:
    # its token counts); without meta.json, a stage interrupted here, the files' times.
    try:
        written = read_meta(out_dir)
    except ValueError:
        written = {}  # said below
    recorded = written.get("tokenizer_sha256")
    held = None
    if os.path.isfile(model_file):  # first: a damaged tokenizer, not the token files made with it, is the fault
        try:
            held = spm.SentencePieceProcessor(model_file=model_file).vocab_size()
        except (RuntimeError, OSError):
            raise SystemExit(f"{model_file} is not a SentencePiece model (cut short or overwritten?): remove "
                             f"{out_dir} to prepare it again, or choose another --{flag_name}") from None
    for name in ("train.bin", "val.bin"):
        bin_file = os.path.join(out_dir, name)
        if not os.path.isfile(bin_file):
            continue
        if not os.path.isfile(model_file):
            why = "it is there without it"
        elif recorded is not None:
            why = None if recorded == file_sha256(model_file) else "meta.json records another tokenizer's hash"
        elif written.get(name.replace(".bin", "_tokens")) is not None:
            count = written[name.replace(".bin", "_tokens")]
            why = None if count * DTYPE.itemsize == os.path.getsize(bin_file) else \
                f"meta.json counts {count:,} tokens in it"
        else:
            why = None if os.path.getmtime(bin_file) >= os.path.getmtime(model_file) else "it is older than it"
        if why:
            raise SystemExit(f"{bin_file} was not tokenized with {model_file} ({why}), so it cannot be kept: "
                             f"remove the .bin files, or choose another --{flag_name}")
    meta = {}
    if os.path.isfile(meta_file):
        try:
            meta = read_meta(out_dir)
        except ValueError as e:
            raise SystemExit(f"{e}: remove {out_dir}, or choose another --{flag_name}") from None
        held = held if held is not None else meta.get("vocab_size")
    if vocab_size is not None and held is not None and held != vocab_size:
        raise SystemExit(f"{out_dir} already holds a {held}-piece vocabulary, not --vocab_size={vocab_size}: "
                         f"choose another --{flag_name}, or remove {out_dir} to prepare it again")
    if vocab_docs is not None and meta.get("vocab_docs") not in (None, vocab_docs):  # recorded since this check
        raise SystemExit(f"{out_dir} already holds a vocabulary learned from --vocab_docs={meta['vocab_docs']} stories, "
                         f"not {vocab_docs}: choose another --{flag_name}, or remove {out_dir} to prepare it again")
    stored = meta.get("source")
    if isinstance(stored, str):
        now = ",".join(source) if source else HF_NAME
        parts = stored.split(",")
        same = (stored == now if source is None or stored == HF_NAME else
                changed_text(out_dir, flag_name, parts, meta.get("source_sha256"), list(source))
                or len(parts) == len(source) and all(same_file(s, g) for s, g in zip(parts, source)))
        if not same:
            raise SystemExit(f"{out_dir} already holds data prepared from {stored}, not {now}: choose another "
                             f"--{flag_name}, or remove {out_dir} to prepare it again")
    if max_stories is not None and meta and meta.get("max_stories", 0) != max_stories:
        raise SystemExit(f"{out_dir} already holds data prepared with --max_stories={meta.get('max_stories', 0)}, "
                         f"not {max_stories}: choose another --{flag_name}, or remove {out_dir} to prepare it again")
    if source and meta and "val_file" not in meta and "val_fraction" not in meta \
            and os.path.isfile(os.path.join(out_dir, "val.bin")):
        print(f"note: {out_dir} was prepared before meta.json recorded how its val split was made, so its val.bin "
              f"is kept whatever --val_file or --val_fraction says now: if it was made otherwise, remove {out_dir} "
              f"to prepare it again")
    if source and ("val_file" in meta or "val_fraction" in meta):  # recorded since this check
        held_file, held_fraction = meta.get("val_file"), meta.get("val_fraction")
        same = (changed_text(out_dir, flag_name, [str(held_file)], [meta.get("val_file_sha256")], [val_file])
                or same_file(str(held_file), val_file) if held_file and val_file else
                held_file is None and val_file is None and held_fraction == val_fraction)
        if not same:
            held = f"--val_file={held_file}" if held_file else f"--val_fraction={held_fraction}"
            now = f"--val_file={val_file}" if val_file else f"--val_fraction={val_fraction}"
            raise SystemExit(f"{out_dir} already holds a val split made with {held}, not {now}: choose another "
                             f"--{flag_name}, or remove {out_dir} to prepare it again")


@releasing_locks
def main(argv=None):
    args = parse_flags(FLAGS, argv)
    tie_workers()
    check_cache("HF_DATASETS_CACHE", datasets.config.HF_DATASETS_CACHE, writes=True)  # load_dataset writes there,
    # local files too
    if args.input_file is None and (args.val_file is not None or args.val_fraction != FLAGS["val_fraction"].default):
        raise SystemExit("--val_file and --val_fraction split --input_file: the Hub's TinyStories has its own "
                         "validation split, so pass --input_file too, or drop them")
    if args.val_file is not None and args.val_fraction != FLAGS["val_fraction"].default:
        raise SystemExit("--val_file and --val_fraction both name the val split: pass one of them")
    default = f"data/tinystories{args.vocab_size}"
    out_dir = args.out_dir or checked_path("out_dir", default, write=not prepared(default))
    model_file = os.path.join(out_dir, "tokenizer.model")
    bin_files = {split: os.path.join(out_dir, f"{split}.bin") for split in ("train", "val")}
    meta_file = os.path.join(out_dir, "meta.json")
    lock = FolderLock(out_dir, "prepare_tinystories.py")  # one prepare at a time in out_dir
    # Everything is checked, and the text loaded, before the first file is written.
    check_prepared(out_dir, args.input_file, args.val_file, args.val_fraction, args.vocab_size, model_file,
                   meta_file, max_stories=args.max_stories, vocab_docs=args.vocab_docs)

    stale = stale_token_files(out_dir, bin_files, DTYPE.itemsize)
    try:
        recorded = read_meta(out_dir).get("vocab_size") if os.path.exists(model_file) else None
    except ValueError:
        recorded = None  # check_prepared has named a meta.json it cannot read
    pieces = spm.SentencePieceProcessor(model_file=model_file).vocab_size() if recorded is not None else None
    if recorded != pieces:  # a hand-edited meta.json: the tokenizer's own count is the truth
        print(f"meta: {meta_file} gives vocab_size={recorded}, but {model_file} has {pieces} pieces: writing it again")
    if os.path.exists(model_file) and all(os.path.exists(p) for p in bin_files.values()) and not stale:
        print(f"load: skipped, {out_dir} already holds the tokenizer and both token files")
    else:
        splits = load_splits(args.input_file, args.val_file, args.val_fraction)
        swapped = args.val_file and len(splits['val']) > len(splits['train'])  # before --max_stories cuts train
        if args.max_stories:
            splits["train"] = splits["train"].select(range(min(args.max_stories, len(splits["train"]))))
        print(f"load: {len(splits['train']):,} train and {len(splits['val']):,} val documents")
        if swapped:
            print(f"note: --val_file holds more documents than --input_file; if the two are the wrong way "
                  f"round, run again with them swapped")
        sample = splits["train"].select(range(min(10_000, len(splits["train"]))))["text"]
        marks = sum(bool(MARKUP_LINE.fullmatch(t.strip())) for t in sample)
        if marks > 0.1 * len(sample):  # a Markdown file: each '# Title' or '---' between blank lines is a document
            print(f"note: {marks:,} of the first {len(sample):,} training documents are a heading or a rule alone "
                  f"('# Title', '---': Markdown?), each read as a document of its own, as blank lines separate "
                  f"stories: remove those lines, or join each heading to its story, if they are no stories")
    created = not os.path.isdir(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    lock.hold()

    if os.path.exists(model_file):
        print(f"vocab: skipped, {model_file} exists")
    else:
        try:
            train_vocab(splits["train"], model_file, args.vocab_size, args.vocab_docs, args.verbose, args.max_stories)
        except BaseException:
            if created and not os.listdir(out_dir):  # a failed first stage leaves no empty folder behind
                os.rmdir(out_dir)
            raise
        print(f"vocab: wrote {model_file}")

    for split, bin_file in bin_files.items():
        if os.path.exists(bin_file) and split not in stale:
            print(f"tokenize: skipped, {bin_file} exists")
        else:
            n_tokens = tokenize_split(splits[split], model_file, bin_file, args.num_proc)
            print(f"tokenize: wrote {bin_file}, {n_tokens:,} tokens")

    if os.path.exists(meta_file) and not stale and recorded == pieces:
        print(f"meta: skipped, {meta_file} exists")
    else:
        sp = spm.SentencePieceProcessor(model_file=model_file)
        meta = {
            "vocab_size": sp.vocab_size(), "tokenizer": "sentencepiece", "tokenizer_model": "tokenizer.model",
            "bos_id": sp.bos_id(), "eos_id": sp.eos_id(), "dtype": DTYPE.name,
            "train_tokens": os.path.getsize(bin_files["train"]) // DTYPE.itemsize,
            "val_tokens": os.path.getsize(bin_files["val"]) // DTYPE.itemsize,
            "source": ",".join(args.input_file) if args.input_file else HF_NAME, "max_stories": args.max_stories,
            "tokenizer_sha256": file_sha256(model_file),
        }
        if args.input_file:  # the text's bytes, and how val.bin was split off, for a later run into this folder
            meta |= {"source_sha256": [file_sha256(path) for path in args.input_file], "vocab_docs": args.vocab_docs}
            meta |= ({"val_file": args.val_file, "val_file_sha256": file_sha256(args.val_file)} if args.val_file
                     else {"val_fraction": args.val_fraction})
        try:
            with open(meta_file + ".tmp", "w") as f:
                json.dump(meta, f, indent=2)
            os.replace(meta_file + ".tmp", meta_file)
        finally:
            configurator.discard(meta_file + ".tmp")
        print(f"meta: wrote {meta_file}: {meta['train_tokens']:,} train and {meta['val_tokens']:,} val tokens")


if __name__ == "__main__":
    main()
