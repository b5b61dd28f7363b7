"""
Data in an HF model's own tokens (prepare_owt.py --tokenizer) and the token files' dtype (tokens.py):
each document is the tokenizer's framing + its tokens + its end-of-sequence id, ids beyond 65,535 are
kept in uint32 files, training and the readers see them, and a checkpoint decodes with the tokenizer
saved beside the data. The references are tiktoken, a word-to-id table and transformers' own tokenizer.
"""

import ast
import codecs
import json
import os
import re
import sys

import numpy as np
import pytest
import torch

import prepare_owt
from conftest import ROOT, SHARED, gpt2_tokenizer, require_shared, run, word_tokenizer
from tokens import load_tokenizer

N_WORDS = 70_000  # more ids than uint16 holds
SPECIALS = 3  # [UNK], <s>, </s>: ids 0, 1, 2


def split_documents(tokens, eos):
    """The documents of a token stream in which eos ends each one."""
    ends = np.flatnonzero(tokens == eos)
    return [tokens[a + 1:b + 1].tolist() for a, b in zip(np.r_[-1, ends[:-1]], ends)]


def val_documents(input_file, val_fraction):
    """The held-out documents, split as the project's spec says (train_test_split, seed 2357)."""
    from datasets import load_dataset
    ds = load_dataset('json', data_files=str(input_file), split='train')
    return ds.train_test_split(test_size=val_fraction, seed=2357, shuffle=True)['test']['text']


def test_gpt2_tokenizer_through_transformers_writes_tiktokens_stream(tmp_path, capsys):
    """With transformers' GPT-2 tokenizer, each document is tiktoken's GPT-2 encoding of its text followed
    by <|endoftext|> (50256), in uint16, the held-out ones in train_test_split's order; an <|endoftext|>
    typed inside a document stays text. The GPT-2-token Pile sets are skipped."""
    require_shared()
    import tiktoken
    source = tmp_path / 'docs.jsonl'
    quoting = json.dumps({'text': 'GPT-2 ends each document with <|endoftext|> in its training data.'})
    source.write_text((SHARED / 'openwebtext' / 'sample.jsonl').read_text() + quoting + '\n')
    out = tmp_path / 'data'
    prepare_owt.main(['--input_file', str(source), '--val_fraction', '0.05', '--num_proc', '1',
                      '--tokenizer', str(gpt2_tokenizer(tmp_path / 'gpt2')), '--out_dir', str(out)])
    printed = capsys.readouterr().out
    assert "pile: skipped, its rows are GPT-2 tokens" in printed and not (out / 'pile.bin').exists()
    meta = json.load(open(out / 'meta.json'))
    assert (meta['dtype'], meta['vocab_size'], meta['eot_token'], meta['tokenizer']) == ('uint16', 50257, 50256, 'hf')
    enc = tiktoken.get_encoding('gpt2')
    docs = val_documents(source, 0.05)
    val = np.fromfile(out / 'val.bin', dtype=np.uint16)
    assert len(val) == meta['val_tokens']
    assert split_documents(val, 50256) == [enc.encode_ordinary(d) + [50256] for d in docs]
    train = np.fromfile(out / 'train.bin', dtype=np.uint16)
    every = [json.loads(line)['text'] for line in open(source)]
    assert sorted(split_documents(train, 50256) + split_documents(val, 50256)) == \
        sorted(enc.encode_ordinary(d) + [50256] for d in every)
    from transformers import AutoTokenizer
    saved = AutoTokenizer.from_pretrained(out / 'tokenizer')  # the data folder is self-contained
    assert saved(docs[0]).input_ids == enc.encode_ordinary(docs[0])
    # sample.py's prompt, as a checkpoint's reference to this tokenizer.json reads it: tiktoken's encoding
    # with <|endoftext|> allowed, and an empty prompt that starts after a document separator
    encode, decode = load_tokenizer(dict(kind='hf', json=(out / 'tokenizer' / 'tokenizer.json').read_text(),
                                         eos_id=50256))
    prompt = docs[0][:300] + '<|endoftext|>' + docs[1][:100]
    ids = enc.encode(prompt, allowed_special={'<|endoftext|>'})
    assert encode(prompt) == ids and decode(ids) == enc.decode(ids) and encode('') == [50256]


@pytest.fixture(scope='module')
def wide(tmp_path_factory):
    """prepare_owt.py --tokenizer with a 70,003-id word tokenizer on documents of random words, and the
    documents' ids from the word table."""
    root = tmp_path_factory.mktemp('wide')
    rng = np.random.default_rng(0)
    words = [rng.integers(0, N_WORDS, rng.integers(20, 60)) for _ in range(400)]
    words[0][:2] = N_WORDS - 1, 65_533  # ids 70,002, the top, and 65,536, the first beyond uint16
    with open(root / 'docs.jsonl', 'w') as f:
        for doc in words:
            f.write(json.dumps({'text': ' '.join(f'w{i}' for i in doc)}) + '\n')
    prepare_owt.main(['--input_file', str(root / 'docs.jsonl'), '--val_fraction', '0.1', '--num_proc', '1',
                      '--tokenizer', str(word_tokenizer(root / 'words', N_WORDS)), '--out_dir', str(root / 'data')])
    ids = {' '.join(f'w{i}' for i in doc): [1, *(doc + SPECIALS).tolist(), 2] for doc in words}  # BOS ... EOS
    return root, ids


def test_a_ctrl_c_while_the_tokenizer_is_hashed_stops_the_prepare():
    """datasets hashes a map's fn_kwargs (here the HF tokenizer, seconds for a large one) inside a bare
    `except:`; prepare_owt.py hashes them itself first, so a Ctrl-C landing then stops the prepare
    instead of being swallowed (the prepare once ran on to the end, saying nothing). In a process of
    its own: swallowed there, the Ctrl-C can leave datasets hanging."""
    import subprocess
    script = ("import datasets, prepare_owt\n"
              "class Interrupted:  # a tokenizer whose hashing meets Ctrl-C (and which tokenizes)\n"
              "    eos_token_id = 2\n"
              "    def __reduce__(self):\n"
              "        raise KeyboardInterrupt\n"
              "    def __call__(self, texts, **kwargs):\n"
              "        return {'input_ids': [[1] for _ in texts]}\n"
              "ds = datasets.Dataset.from_dict({'text': ['one story', 'another story']})\n"
              "try:\n"
              "    prepare_owt.tokenize_split(ds, num_proc=1, tokenizer=Interrupted())\n"
              "except KeyboardInterrupt:\n"
              "    print('stopped')\n")
    try:
        proc = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("the Ctrl-C was swallowed, and the prepare hung") from None
    assert proc.stdout.strip() == 'stopped', proc.stdout + proc.stderr[-2000:]


def test_a_tokenizer_prepare_stopped_part_way_is_finished_only_in_its_own_tokens(wide, tmp_path):
    """prepare_owt.py --tokenizer saves tokenizer/ first and meta.json last; a prepare stopped between
    them leaves tokenizer/ alone. Run again into that folder without --tokenizer, or with another
    tokenizer, it is refused before anything is written (it would write other tokens beside that
    tokenizer, which sample.py and the exports read); with the same tokenizer it finishes the folder."""
    import shutil
    root, _ = wide
    out = tmp_path / 'stopped'
    shutil.copytree(root / 'data' / 'tokenizer', out / 'tokenizer')  # what the stopped prepare had saved
    before = sorted(p.relative_to(out) for p in out.rglob('*'))
    common = ['--input_file', str(root / 'docs.jsonl'), '--val_fraction', '0.1', '--num_proc', '1', '--out_dir', str(out)]
    with pytest.raises(SystemExit, match='without --tokenizer this one writes GPT-2'):
        prepare_owt.main([*common, '--skip_pile'])
    with pytest.raises(SystemExit, match='from a prepare stopped part-way with another tokenizer than'):
        prepare_owt.main([*common, '--tokenizer', str(word_tokenizer(tmp_path / 'fewer', 500))])
    assert sorted(p.relative_to(out) for p in out.rglob('*')) == before
    prepare_owt.main([*common, '--tokenizer', str(root / 'words')])
    assert (out / 'train.bin').read_bytes() == (root / 'data' / 'train.bin').read_bytes()


def test_wide_vocabulary_is_written_as_uint32(wide):
    """Ids beyond 65,535 come back intact from uint32 files: each document is BOS + its words' ids + EOS."""
    root, ids = wide
    data = root / 'data'
    meta = json.load(open(data / 'meta.json'))
    assert (meta['dtype'], meta['vocab_size'], meta['eot_token']) == ('uint32', N_WORDS + SPECIALS, 2)
    train, val = (np.fromfile(data / f'{s}.bin', dtype=np.uint32) for s in ('train', 'val'))
    assert (len(train), len(val)) == (meta['train_tokens'], meta['val_tokens'])
    docs = split_documents(train, 2) + split_documents(val, 2)
    assert sorted(docs) == sorted(ids.values())
    assert train.max() >= 65_536 and {70_002, 65_536} <= set(np.concatenate([train, val]).tolist())


def tiny_llama(data, out, *extra, check=True):
    return run('train.py', f'--data_dir={data}', f'--out_dir={out}', '--device=cpu', '--arch=llama',
               '--n_layer=1', '--n_head=2', '--n_embd=32', f'--vocab_size={N_WORDS + SPECIALS}', '--block_size=32',
               '--batch_size=4', '--max_iters=2', '--warmup_iters=1', '--lr_decay_iters=2', '--taper=none',
               '--aux_loss=none', '--eval_interval=2', '--eval_iters=1', '--log_interval=1', *extra, check=check)


@pytest.fixture(scope='module')
def wide_run(wide):
    root, _ = wide
    tiny_llama(root / 'data', root / 'run')
    return root / 'run'


def test_training_reads_uint32_tokens(wide, wide_run, tmp_path):
    """train.py trains on the uint32 stream, and its token check sees the ids beyond 65,535: the same
    files refused for a model of 65,536 rows."""
    root, _ = wide
    assert json.loads(open(wide_run / 'log.jsonl').read().splitlines()[-1])['iter'] == 2
    data = tmp_path / 'data'
    data.mkdir()
    meta = json.load(open(root / 'data' / 'meta.json'))
    for name in ('train.bin', 'val.bin', meta['tokenizer_dir']):
        (data / name).symlink_to(root / 'data' / name)
    (data / 'meta.json').write_text(json.dumps(meta | {'vocab_size': 2**16}))
    proc = tiny_llama(data, tmp_path / 'run', '--vocab_size=65536', check=False)
    top = max(np.fromfile(root / 'data' / 'train.bin', dtype=np.uint32))
    assert proc.returncode != 0 and f"train.bin holds token id {top}, beyond the model's vocab_size=65536" in proc.stderr


def test_checkpoint_decodes_with_the_saved_tokenizer(wide, wide_run):
    """The checkpoint carries tokenizer.json (and loads with weights_only=True); sample.py encodes the
    prompt with the tokenizer's BOS framing and prints what transformers' decode gives for the same
    greedy continuation."""
    from transformers import AutoTokenizer
    from model import GPT
    root, _ = wide
    ckpt = torch.load(wide_run / 'ckpt.pt', weights_only=True)
    assert ckpt['tokenizer']['kind'] == 'hf' and ckpt['tokenizer']['eos_id'] == 2
    tok = AutoTokenizer.from_pretrained(root / 'data' / 'tokenizer')
    prompt = 'w69999 w5 w65533'
    proc = run('sample.py', f'--out_dir={wide_run}', '--device=cpu', '--num_samples=1', '--max_new_tokens=6',
               '--temperature=0', f'--start={prompt}')
    x = torch.tensor([tok(prompt).input_ids])
    assert x[0].tolist() == [1, 70_002, 8, 65_536]
    y = GPT.from_checkpoint(ckpt).eval().generate(x, 6, temperature=0)
    assert proc.stdout.split('---------------')[0].strip() == tok.decode(y[0].tolist())


def test_diagnose_reads_uint32_tokens(wide, wide_run):
    """diagnose.py counts the training ids of the uint32 file (a uint16 read would count other ids) and
    names tokens with the saved tokenizer."""
    from transformers import AutoTokenizer
    root, _ = wide
    proc = run('diagnose.py', f'--out_dir={wide_run}', '--window=16', '--max_windows=4', '--top=1')
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    train = np.fromfile(root / 'data' / 'train.bin', dtype=np.uint32)
    assert report['unseen_tokens'] == N_WORDS + SPECIALS - len(np.unique(train))
    token = report['worst'][0]['tokens'][0]['id']
    word = AutoTokenizer.from_pretrained(root / 'data' / 'tokenizer').decode([token])
    assert f"token {word!r} (id {token}" in proc.stdout


def test_special_tokens_typed_in_a_prompt_are_those_tokens_for_every_tokenizer_kind(data_dir):
    """A prompt that holds a tokenizer's own special token as text ('<s>', '</s>' for the TinyStories
    SentencePiece model; '<|endoftext|>' for GPT-2) encodes it as that token, the way tiktoken's
    allowed_special and transformers' tokenizers read theirs; a leading '<s>' is the BOS every prompt
    starts with. The references: SentencePiece's own piece ids and encoding of each stretch of text, and
    tiktoken's."""
    import sentencepiece as spm
    import tiktoken
    model = (data_dir / 'tokenizer.model').read_bytes()
    sp = spm.SentencePieceProcessor(model_proto=model)
    encode, decode = load_tokenizer(dict(kind='sentencepiece', model=torch.frombuffer(bytearray(model), dtype=torch.uint8)))
    bos, eos = sp.piece_to_id('<s>'), sp.piece_to_id('</s>')
    assert encode('The end.</s><s>Once upon') == [bos] + sp.encode('The end.') + [eos, bos] + sp.encode('Once upon')
    assert encode('<s>Once upon') == encode('Once upon') == [bos] + sp.encode('Once upon')
    gpt2 = tiktoken.get_encoding('gpt2')  # offline: conftest points TIKTOKEN_CACHE_DIR at the shared files
    encode, _ = load_tokenizer(dict(kind='tiktoken', name='gpt2'))
    assert encode('The end.<|endoftext|>Once') == gpt2.encode('The end.') + [gpt2.eot_token] + gpt2.encode('Once')


def test_a_gpt2_with_a_pad_token_added_reads_gpt2_tokens(tmp_path):
    """A GPT-2 whose tokenizer gained a pad token (50,258 ids, the embedding resized) encodes text exactly as
    GPT-2's BPE does (the reference: tiktoken), so it reads data in GPT-2's tokens; a tokenizer of another
    vocabulary in a GPT-2 folder is still read as its own."""
    import tiktoken
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel
    from hf import tokenizer_reference
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=64, vocab_size=50258)).save_pretrained(tmp_path)
    gpt2_tokenizer(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    tok.add_special_tokens({'pad_token': '[PAD]'})
    tok.save_pretrained(tmp_path)
    text = 'The city of Paris, 1889.'
    assert AutoTokenizer.from_pretrained(tmp_path)(text)['input_ids'] == tiktoken.get_encoding('gpt2').encode(text)
    assert tokenizer_reference(str(tmp_path)) == dict(kind='tiktoken', name='gpt2')
    other = tmp_path / 'words'  # a GPT-2 of another vocabulary: its tokenizer is its own
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=64, vocab_size=64)).save_pretrained(other)
    word_tokenizer(other, 61)
    assert tokenizer_reference(str(other))['kind'] == 'hf'


def test_documents_of_one_long_line_each_train_the_vocabulary_on_all_their_text(tmp_path):
    """SentencePiece's trainer leaves out, without a word, every line longer than its max_sentence_length
    (4,192 bytes): a corpus whose documents are one long line each trained its vocabulary on almost nothing
    and then could not make a 2,048-piece one ("too little text"). The prepare cuts such lines at spaces for
    the trainer: every piece fits, together they are the line, and the vocabulary is made."""
    import prepare_tinystories
    stories = open(SHARED / 'tinystories' / 'train_sample.txt', encoding='utf-8').read().split('\n\n')
    docs = [' '.join(s.replace('\n', ' ') for s in stories[i:i + 40]) for i in range(0, len(stories), 40)]
    docs = [d for d in docs if len(d.encode()) > prepare_tinystories.SENTENCE_BYTES]  # ~8 kB lines
    assert len(docs) >= 100
    for doc in docs[:5]:
        pieces = list(prepare_tinystories.trainer_lines(doc))
        assert all(len(p.encode()) <= prepare_tinystories.SENTENCE_BYTES for p in pieces)
        assert ' '.join(pieces).split() == doc.split()
    (tmp_path / 'long.txt').write_text('\n\n'.join(docs), encoding='utf-8')
    run('prepare_tinystories.py', f"--input_file={tmp_path / 'long.txt'}", '--vocab_size=2048', '--val_fraction=0.1',
        f"--out_dir={tmp_path / 'data'}")
    assert json.load(open(tmp_path / 'data' / 'meta.json'))['vocab_size'] == 2048


def test_markdown_headings_and_rules_between_blank_lines_are_noted_as_documents_of_their_own(tmp_path):
    """Blank lines separate stories, so in a Markdown file each '# Title' and '---' line between blank lines
    is a document of its own: prepare_tinystories.py says how many, which plain stories never trigger."""
    stories = open(SHARED / 'tinystories' / 'train_sample.txt', encoding='utf-8').read().split('\n\n')[:400]
    (tmp_path / 'stories.md').write_text('\n\n'.join(f'# Story {i}\n\n{s}\n\n---' for i, s in enumerate(stories)),
                                         encoding='utf-8')
    (tmp_path / 'plain.txt').write_text('\n\n'.join(stories), encoding='utf-8')
    said = [run('prepare_tinystories.py', f'--input_file={tmp_path / name}', '--vocab_size=512',
                f'--out_dir={tmp_path / name}.data').stdout for name in ('stories.md', 'plain.txt')]
    assert re.search(r"note: [\d,]+ of the first [\d,]+ training documents are a heading or a rule alone", said[0])
    assert 'note:' not in said[1]


def test_stories_separated_by_end_of_text_lines_read_as_blank_line_paragraphs(tmp_path):
    """TinyStoriesV2's raw text files end each story with a line <|endoftext|>: prepare_tinystories.py
    reads them as the same stories as a file that separates them by blank lines (load_dataset's
    paragraphs), so the vocabulary (its pieces and scores) and both token streams come out byte for byte
    the same."""
    require_shared()
    import re
    text = (SHARED / 'tinystories' / 'train_sample.txt').read_text()
    stories = [s.strip() for s in re.split(r'\n[ \t]*\n', text) if s.strip()][:1500]  # a line of spaces is blank
    (tmp_path / 'blank.txt').write_text('\n\n'.join(stories))
    (tmp_path / 'eot.txt').write_text(''.join(f'{s}\n<|endoftext|>\n' for s in stories))
    for name in ('blank', 'eot'):
        run('prepare_tinystories.py', f'--input_file={tmp_path / f"{name}.txt"}', '--vocab_size=400',
            f'--out_dir={tmp_path / f"data_{name}"}')
    for f in ('tokenizer.vocab', 'train.bin', 'val.bin'):  # (tokenizer.model also records its input's path)
        assert (tmp_path / 'data_eot' / f).read_bytes() == (tmp_path / 'data_blank' / f).read_bytes(), f
    assert json.load(open(tmp_path / 'data_eot' / 'meta.json'))['train_tokens'] > 1500 * 10


def test_a_val_split_that_copies_the_train_split_is_noted(data_dir, tmp_path):
    """A val.bin that holds train.bin's tokens (a copy, its meta.json edited to match) makes val_loss a
    training loss: the run says so, naming the command that writes a held-out split."""
    import shutil
    folder = tmp_path / 'data'
    shutil.copytree(data_dir, folder)
    shutil.copy(folder / 'train.bin', folder / 'val.bin')
    meta = json.loads((folder / 'meta.json').read_text())
    (folder / 'meta.json').write_text(json.dumps(meta | {'val_tokens': meta['train_tokens']}))
    common = ['--device=cpu', '--vocab_size=512', '--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16',
              '--eval_iters=1', '--eval_only', f'--out_dir={tmp_path / "run"}']
    copied = run('train.py', *common, f'--data_dir={folder}').stdout
    held_out = run('train.py', *common, f'--data_dir={data_dir}').stdout
    assert 'val.bin holds the same tokens as train.bin, so val_loss scores the training tokens' in copied
    assert '`python prepare_tinystories.py --vocab_size=512' in copied and 'val.bin holds the same' not in held_out


@pytest.mark.parametrize('damage', ['cut', 'gone', 'meta', 'cut_uncounted'])
def test_the_prepare_command_a_broken_data_folder_names_mends_it(data_dir, tmp_path, damage):
    """A data folder whose train.bin was cut short, whose val.bin was removed or whose meta.json was
    edited to another vocab_size is named, with the prepare command that writes it again: that command,
    run as given, rewrites the broken file from the text meta.json records (the one prepare read, not
    the hub), byte for byte what it first wrote."""
    import shlex
    import shutil
    broken = tmp_path / 'data'
    shutil.copytree(data_dir, broken)
    if damage.startswith('cut'):
        with open(broken / 'train.bin', 'r+b') as f:
            f.truncate(os.path.getsize(broken / 'train.bin') - 1)
    if damage == 'cut_uncounted':  # a folder from before meta.json counted its tokens: the size alone says
        meta = json.loads((broken / 'meta.json').read_text())
        (broken / 'meta.json').write_text(json.dumps({k: v for k, v in meta.items() if not k.endswith('_tokens')}))
    elif damage == 'gone':
        os.remove(broken / 'val.bin')
    else:
        meta = json.loads((broken / 'meta.json').read_text())
        (broken / 'meta.json').write_text(json.dumps(meta | {'vocab_size': 2048}))
    proc = run('train.py', '--device=cpu', '--vocab_size=512', '--n_layer=2', '--n_head=4', '--n_embd=64',
               f'--data_dir={broken}', f'--out_dir={tmp_path / "run"}', check=False)
    assert proc.returncode != 0
    command = shlex.split(proc.stderr.split('`python ')[1].split('`')[0])
    assert command[0] == 'prepare_tinystories.py' and any(a.startswith('--input_file=') for a in command)
    run(*command)
    for name in ('train.bin', 'val.bin', 'meta.json'):
        assert (broken / name).read_bytes() == (data_dir / name).read_bytes(), name


RUSSIAN = '\u0416\u0438\u043b\u0430-\u0431\u044b\u043b\u0430 \u0434\u0435\u0432\u043e\u0447\u043a\u0430.'  # Жила-была девочка.
GREEK = '\u039c\u03b9\u03b1 \u03c6\u03bf\u03c1\u03ac \u03ba\u03b9 \u03ad\u03bd\u03b1\u03bd \u03ba\u03b1\u03b9\u03c1\u03cc.'  # Μια φορά κι έναν καιρό.
MINE = ('\u041c\u043e\u044f \u043c\u0430\u043c\u0430 \u043c\u0435\u043d\u044f \u043b\u044e\u0431\u0438\u0442.')  # Моя мама меня любит. (Mac Cyrillic's я is Windows-1251's Я)
POLISH = '\u017byla sobie ma\u0142a dziewczynka, kt\u00f3ra lubi\u0142a si\u0119 bawi\u0107.'  # Żyla sobie mała dziewczynka, ...
TURKISH = 'K\u00fc\u00e7\u00fck bir k\u0131z bah\u00e7ede k\u00f6pe\u011fiyle oynard\u0131. \u015eeker.'  # Küçük bir kız ...
POLISH_L2 = 'Pewnego dnia ma\u0142a \u015bwinka sz\u0142a przez \u0142\u0105k\u0119 do \u017ar\u00f3d\u0142a.'  # ś, ą, ź
POLISH_L2_MORE = (POLISH_L2 + ' W\u0105\u017c si\u0119gn\u0105\u0142 ga\u0142\u0119zi, a o\u015bmiornica pl\u0105sa\u0142a. '
                  'Ksi\u0119\u017cniczka \u015bpiewa\u0142a pie\u015b\u0144.')  # Wąż sięgnął gałęzi, a ośmiornica ...
GERMAN = 'Das kleine M\u00e4dchen tr\u00e4umte von gro\u00dfen B\u00e4ren und sch\u00f6nen Gr\u00fc\u00dfen.'
LEGACY_TEXT = {'cp1251': RUSSIAN, 'koi8-r': RUSSIAN, 'cp866': RUSSIAN, 'iso-8859-5': RUSSIAN, 'mac-cyrillic': MINE,
               'cp1253': GREEK, 'iso-8859-7': GREEK, 'cp1250': POLISH, 'cp1254': TURKISH,
               'iso-8859-2': POLISH_L2, 'cp850': GERMAN}


@pytest.mark.parametrize('fault', ['latin1', 'cp1252', 'cp1251', 'koi8-r', 'cp866', 'iso-8859-5', 'mac-cyrillic', 'cp1253',
                                   'iso-8859-7', 'cp1250', 'cp1254', 'iso-8859-2', 'cp850',
                                   'one per line', 'csv', 'json array', 'json array (owt)',
                                   'json object (owt)'])
def test_the_shell_command_a_refused_text_file_names_makes_one_the_prepare_reads(tmp_path, fault):
    """A text file the prepare scripts refuse (Latin-1, Windows-1252 bytes, Cyrillic in Windows-1251, KOI8-R,
    DOS's cp866, ISO-8859-5 or Mac Cyrillic, Greek in Windows-1253 or ISO-8859-7, Polish in Windows-1250 or
    ISO-8859-2, Turkish in Windows-1254, German in DOS's code page 850, each of which puts the letters at other bytes, a story per line, CSV, one JSON array of
    records or one pretty-printed JSON object),
    in a folder whose name holds spaces, is named with the shell command that converts it: run by bash
    exactly as printed, that command writes the file the sentence says to pass, and the prepare reads it.
    The reference for "as printed" is bash itself, not the scripts' quoting."""
    import re
    import subprocess
    folder = tmp_path / 'my texts'
    folder.mkdir()
    stories = open(SHARED / 'tinystories' / 'train_sample.txt', encoding='utf-8').read()[:60_000].split('\n\n')
    script = 'prepare_owt.py' if fault.endswith('(owt)') else 'prepare_tinystories.py'
    source = folder / ('stories 1.json' if fault.startswith('json') else 'stories 1.txt')
    if fault in ('latin1', 'cp1252'):  # Windows-1252's curly quotes are C1 controls in Latin-1: each its own iconv
        source.write_bytes(('\n\n'.join(stories) + '\n\nLe caf\u00e9, \u201cdit-il\u201d.\n').encode(
            'latin-1' if fault == 'latin1' else 'cp1252', 'replace'))
    elif fault in LEGACY_TEXT:  # whole words of high bytes, which Latin-1 would garble
        source.write_bytes(('\n\n'.join(stories) + '\n\n' + LEGACY_TEXT[fault] + '\n').encode(fault, 'replace'))
    elif fault == 'one per line':
        source.write_text('\n'.join(s.replace('\n', ' ') for s in stories), encoding='utf-8')
    elif fault == 'csv':  # a spreadsheet's export, named .txt
        import csv
        with open(source, 'w', newline='', encoding='utf-8') as f:
            csv.writer(f).writerows([('id', 'story')] + list(enumerate(stories)))
    elif fault.startswith('json object'):  # one document, pretty-printed
        source.write_text(json.dumps({'text': '\n\n'.join(stories)}, indent=2), encoding='utf-8')
    else:
        source.write_text(json.dumps([{'text': s} for s in stories], indent=2), encoding='utf-8')
    out = ['--vocab_size=512'] if script == 'prepare_tinystories.py' else ['--skip_pile', '--val_fraction=0.05']
    proc = run(script, f'--input_file={source}', f'--out_dir={tmp_path / "data"}', *out, check=False)
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    command = re.search(r'`([^`]+)`', proc.stderr).group(1)
    made = subprocess.run(['bash', '-c', command], cwd=tmp_path, capture_output=True, text=True)
    assert made.returncode == 0, (command, made.stderr)
    passed = re.search(r'(?:and pass|> spaced.txt)', proc.stderr) and \
        (tmp_path / 'spaced.txt' if fault == 'one per line' else
         folder / re.search(r"pass .*/my texts/([^/]+?)\.?(?: to \S+)?$", proc.stderr.strip()).group(1))
    assert passed.is_file() and passed.stat().st_size > 0, proc.stderr
    if fault.startswith('json object'):  # one document: its line is the object itself (one cannot be held out)
        assert [json.loads(line) for line in passed.read_text().splitlines()] == [json.loads(source.read_text())]
        return
    run(script, f'--input_file={passed}', f'--out_dir={tmp_path / "data"}', *out)
    assert (tmp_path / 'data' / 'meta.json').is_file()
    if fault == 'csv':  # the stories themselves, not the rows: as many documents as there were rows
        assert passed.read_text(encoding='utf-8').split('\n\n')[:3] == [s.strip('\n') for s in stories[:3]]
    if fault in LEGACY_TEXT:  # the text as written, not another encoding's reading of its bytes
        assert LEGACY_TEXT[fault] in passed.read_text(encoding='utf-8')
    if fault == 'cp1252':  # the text as written: its quotes, and no control character in their place
        text = passed.read_text(encoding='utf-8')
        assert '\u201cdit-il\u201d' in text and not any('\x80' <= c <= '\x9f' for c in text)


@pytest.mark.parametrize('text, written, read', [(POLISH_L2_MORE, 'iso-8859-2', 'cp1250'),
                                                  (POLISH_L2_MORE, 'cp1250', 'iso-8859-2'),  # ś as a control character
                                                  ('Dawno temu \u017cy\u0142a ma\u0142a dziewczynka. \u0179d\u017ab\u0142o '
                                                   '\u0142\u0105ka.', 'cp1250', 'iso-8859-2'),  # one word, controls
                                                  ('Es war einmal ein M\u00e4dchen. Gr\u00f6\u00dfe, \u00dcbermut, '
                                                   '\u00c4rger.', 'cp1252', 'cp850'),  # Ü and Ä as box signs
                                                  ('\u015anieg pada\u0142, a \u015bwinka \u015bpiewa\u0142a pi\u0119kn\u0105 piosenk\u0119.', 'iso-8859-2',
                                                   'cp1250'),  # Śnieg, świnka, śpiewała: the signs at the words' starts
                                                  ('Dawno temu \u017cy\u0142a ma\u0142a dziewczynka. \u0179d\u017ab\u0142o '
                                                   '\u0142\u0105ka.', 'iso-8859-2', 'cp1250'),  # two words misread (GERMAN, 'cp850', 'cp1252'),
                                                  (GERMAN, 'cp1252', 'cp850'), (None, None, None)])
def test_text_converted_from_the_wrong_encoding_is_noted(tmp_path, text, written, read):
    """UTF-8 text converted from the wrong one-byte encoding (Polish in ISO-8859-2 read as Windows-1250, German in
    DOS's code page 850 read as Windows-1252 and the reverse) has signs or capitals amid its words' letters: the
    prepare names such words in a note. The shared TinyStories and OpenWebText samples, real text with its own
    artefacts ("â€œ", "word…word"), get no note (None), and nor does English with width×height and x±y; the same
    misread text as OpenWebText's jsonl, its strings written with escapes, is noted by prepare_owt.py."""
    if text is None:
        source = tmp_path / 'english.txt'
        source.write_text('\n\n'.join(f'The image is width\u00d7height pixels, and x\u00b1y is its error ({n}).'
                                      for n in range(200)) + '\n', encoding='utf-8')
        proc = run('prepare_tinystories.py', f'--input_file={source}', f'--out_dir={tmp_path / "en"}',
                   '--vocab_size=300', check=False)
        assert 'wrong encoding' not in proc.stdout + proc.stderr
        for source in (SHARED / 'tinystories' / 'train_sample.txt', SHARED / 'tinystories' / 'valid_sample.txt'):
            proc = run('prepare_tinystories.py', f'--input_file={source}', f'--out_dir={tmp_path / source.stem}',
                       '--vocab_size=512')
            assert 'wrong encoding' not in proc.stdout + proc.stderr
        proc = run('prepare_owt.py', f'--input_file={SHARED / "openwebtext" / "sample.jsonl"}', '--skip_pile',
                   '--val_fraction=0.05', f'--out_dir={tmp_path / "owt"}')
        assert 'wrong encoding' not in proc.stdout + proc.stderr
        return
    misread = text.encode(written).decode(read, errors='replace')  # a file of stories in that language, converted
    source = tmp_path / 'stories.txt'
    source.write_text('\n\n'.join(f'{misread} ({n})' for n in range(200)) + '\n', encoding='utf-8')
    proc = run('prepare_tinystories.py', f'--input_file={source}', f'--out_dir={tmp_path / "data"}', '--vocab_size=300',
               check=False)  # the note comes first, whatever SentencePiece then makes of so little text
    said = [line for line in proc.stdout.splitlines() if 'wrong encoding' in line]
    assert len(said) == 1 and said[0].startswith('note: '), proc.stdout
    words = [ast.literal_eval(w) for w in re.findall(r"'(?:[^'\\]|\\.)*'", said[0].split('such as')[1].split(' hold a')[0])]
    assert words and all(w in misread.split() for w in words), said
    rows = tmp_path / 'owt.jsonl'  # the same text as jsonl, as json.dumps writes it: ł as \u0142
    rows.write_text(''.join(json.dumps({'text': f'{misread} ({n})'}) + '\n' for n in range(200)))
    proc = run('prepare_owt.py', f'--input_file={rows}', '--skip_pile', '--val_fraction=0.05',
               f'--out_dir={tmp_path / "owt"}', check=False)
    assert sum('wrong encoding' in line and line.startswith('note: ') for line in proc.stdout.splitlines()) == 1, \
        proc.stdout + proc.stderr


@pytest.mark.parametrize('text, written, read', [
    ('Das M\u00e4dchen lief \u00fcber die Stra\u00dfe zur gro\u00dfen Br\u00fccke. J\u00f6rg gr\u00fc\u00dfte '
     'fr\u00f6hlich.', 'cp1252', 'cp437'),  # ß as a block sign, ö as a division sign
    ('\u041c\u0430\u043b\u0435\u043d\u044c\u043a\u0438\u0439 \u043c\u0430\u043b\u044c\u0447\u0438\u043a '
     '\u043f\u043e\u0448\u0451\u043b \u0432 \u043b\u0435\u0441.', 'cp1251', 'cp1252')])  # Маленький мальчик пошёл в лес.
def test_misread_text_among_stories_that_hold_their_own_artefacts_is_noted(tmp_path, text, written, read):
    """Misread text appended to TinyStories' own text is noted, though that text holds many words of "â€œ" (UTF-8
    read once as Windows-1252, which the note leaves alone): those words do not count among the words past ASCII
    of which the misread ones must be a tenth."""
    stories = (SHARED / 'tinystories' / 'train_sample.txt').read_text(encoding='utf-8')[:120000]
    assert stories.count('\u00e2\u20ac') > 10  # the artefacts the note leaves alone
    misread = text.encode(written).decode(read)
    source = tmp_path / 'stories.txt'
    source.write_text(stories + '\n\n'.join([misread] * 60) + '\n', encoding='utf-8')
    proc = run('prepare_tinystories.py', f'--input_file={source}', f'--out_dir={tmp_path / "data"}', '--vocab_size=512',
               check=False)
    said = [line for line in proc.stdout.splitlines() if 'wrong encoding' in line]
    assert len(said) == 1 and said[0].startswith('note: '), proc.stdout + proc.stderr


@pytest.mark.parametrize('encoding', ['cp1255', 'shift_jis', 'mac_roman'])
def test_a_text_in_an_encoding_the_check_cannot_tell_is_not_given_a_wrong_one(tmp_path, encoding):
    """Hebrew in Windows-1255, Japanese in Shift-JIS and German in Mac Roman: read in the encodings the check tells
    apart, their bytes are Latin or Cyrillic letters, and a command naming one would write mojibake the prepare then
    takes. The sentence names none: its command guesses the encoding (charset_normalizer), prints it, and writes the
    text as it was (in Python: iconv knows no mac_iceland, a name the guess may give), which the prepare reads."""
    import re
    import subprocess
    text = {'cp1255': '\u05e4\u05e2\u05dd \u05d0\u05d7\u05ea \u05d4\u05d9\u05d9\u05ea\u05d4 \u05d9\u05dc\u05d3\u05d4 '
                      '\u05e7\u05d8\u05e0\u05d4 \u05d1\u05e9\u05dd \u05dc\u05d9\u05dc\u05d9.',  # פעם אחת הייתה ילדה קטנה בשם לילי.
            'mac_roman': 'Das kleine M\u00e4dchen tr\u00e4umte von gro\u00dfen B\u00e4ren und sch\u00f6nen '
                         'Gr\u00fc\u00dfen.',  # German: iconv knows no mac_iceland, the name a guess may give
            'shift_jis': '\u3080\u304b\u3057\u3080\u304b\u3057\u3001\u5c0f\u3055\u306a\u5973\u306e\u5b50'
                         '\u304c\u3044\u307e\u3057\u305f\u3002'}[encoding]  # むかしむかし、小さな女の子がいました。
    source = tmp_path / 'stories.txt'
    source.write_bytes(('\n\n'.join([text] * 40) + '\n').encode(encoding))
    proc = run('prepare_tinystories.py', f'--input_file={source}', f'--out_dir={tmp_path / "data"}', '--vocab_size=512',
               check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and 'but an encoding this check cannot tell' in lines[0], proc.stderr
    assert 'iconv' not in lines[0]
    [convert] = re.findall(r'`([^`]+)`', lines[0])
    found = subprocess.run(['bash', '-c', convert], capture_output=True, text=True, check=True).stdout.strip()
    assert codecs.lookup(found).name == codecs.lookup(encoding).name or source.read_bytes().decode(found) == \
        source.read_bytes().decode(encoding)  # a superset of it (cp932 for Shift-JIS) writes the same text
    passed = tmp_path / 'stories.utf8.txt'
    assert passed.read_text(encoding='utf-8') == source.read_bytes().decode(encoding)
    run('prepare_tinystories.py', f'--input_file={passed}', f'--out_dir={tmp_path / "data"}', '--vocab_size=300',
        '--val_fraction=0.1')


def test_the_prepare_command_evaluate_names_for_a_broken_pile_set_mends_it(tmp_path):
    """An OpenWebText folder whose Pile set was cut mid-token is named by evaluate.py with the command
    that writes it again from the local files prepare_owt.py read (meta.json records them): run as given,
    it rewrites the set byte for byte."""
    import shlex
    from transformers import GPT2Config, GPT2LMHeadModel
    for name, rows in (('pile.jsonl', 40), ('pile_filtered.jsonl', 20)):
        (tmp_path / name).write_text(''.join(json.dumps({'input_ids': list(range(i, i + 130))}) + '\n'
                                             for i in range(rows)))
    folder = tmp_path / 'owt'
    run('prepare_owt.py', f"--input_file={SHARED / 'openwebtext' / 'sample.jsonl'}", f'--out_dir={folder}',
        f"--pile_file={tmp_path / 'pile.jsonl'}", f"--pile_filtered_file={tmp_path / 'pile_filtered.jsonl'}")
    whole = (folder / 'pile.bin').read_bytes()
    (folder / 'pile.bin').write_bytes(whole[:-1])
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=128)).save_pretrained(tmp_path / 'hf')
    proc = run('evaluate.py', f"--init_from={tmp_path / 'hf'}", f'--data_dir={folder}', '--device=cpu', check=False)
    assert proc.returncode != 0 and 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    command = shlex.split(proc.stderr.split('`python ')[1].split('`')[0])
    assert command[0] == 'prepare_owt.py' and f"--pile_file={tmp_path / 'pile.jsonl'}" in command
    run(*command)
    assert (folder / 'pile.bin').read_bytes() == whole


def test_a_val_file_larger_than_the_input_is_noted(tmp_path):
    """--input_file and --val_file given the wrong way round (the larger set held out) are prepared as
    given, with a note that says how to swap them."""
    swapped = run('prepare_tinystories.py', f"--input_file={SHARED / 'tinystories' / 'valid_sample.txt'}",
                  f"--val_file={SHARED / 'tinystories' / 'train_sample.txt'}", '--vocab_size=512',
                  f'--out_dir={tmp_path / "data"}').stdout
    assert 'note: --val_file holds more documents than --input_file' in swapped


def test_stories_apart_by_lines_of_spaces_or_after_a_byte_order_mark_read_as_the_clean_text(tmp_path):
    """Separator lines that hold a space look blank and are read as blank (load_dataset's paragraphs end
    only at empty ones), and a val file a Windows editor saved with a byte-order mark is read without it:
    the vocabulary and both token streams come out byte for byte as from the clean files. A --max_stories
    cut of the training stories is no sign of files given the wrong way round."""
    require_shared()
    import re
    text = (SHARED / 'tinystories' / 'train_sample.txt').read_text()
    stories = [s.strip() for s in re.split(r'\n[ \t]*\n', text) if s.strip()][:700]
    (tmp_path / 'clean.txt').write_text('\n\n'.join(stories[:600]))
    (tmp_path / 'val.txt').write_text('\n\n'.join(stories[600:]))
    (tmp_path / 'spaced.txt').write_text('\n \n'.join(stories[:600]))  # a line of one space between stories
    (tmp_path / 'val_bom.txt').write_bytes(b'\xef\xbb\xbf' + '\n\n'.join(stories[600:]).encode())
    for name, train, val in (('clean', 'clean', 'val'), ('spaced', 'spaced', 'val_bom'), ('bom', 'clean', 'val_bom')):
        out = run('prepare_tinystories.py', f'--input_file={tmp_path / f"{train}.txt"}',
                  f'--val_file={tmp_path / f"{val}.txt"}', '--vocab_size=400', f'--out_dir={tmp_path / name}').stdout
        assert 'load: 600 train and 100 val documents' in out, out
    for name in ('spaced', 'bom'):
        for f in ('tokenizer.vocab', 'train.bin', 'val.bin'):
            assert (tmp_path / name / f).read_bytes() == (tmp_path / 'clean' / f).read_bytes(), (name, f)
    cut = run('prepare_tinystories.py', f'--input_file={tmp_path / "clean.txt"}', f'--val_file={tmp_path / "val.txt"}',
              '--vocab_size=400', '--max_stories=50', f'--out_dir={tmp_path / "cut"}').stdout
    assert 'load: 50 train and 100 val documents' in cut and 'wrong way round' not in cut


def test_a_data_folder_prepared_again_from_the_same_text_is_the_runs_own(tmp_path):
    """SentencePiece records its input's path in tokenizer.model, so the same text prepared again from
    another path writes other bytes for the same pieces: a run resumes on that folder as on its own,
    while a folder of another vocabulary is still refused."""
    require_shared()
    text = (SHARED / 'tinystories' / 'train_sample.txt').read_text()[:60_000]
    for name in ('a', 'b'):
        (tmp_path / f'{name}.txt').write_text(text)
    for name, text_file, vocab in (('a', 'a.txt', 400), ('b', 'b.txt', 400), ('other', 'a.txt', 410)):
        run('prepare_tinystories.py', f'--input_file={tmp_path / text_file}', f'--vocab_size={vocab}',
            f'--out_dir={tmp_path / f"data_{name}"}')
    assert (tmp_path / 'data_a' / 'tokenizer.model').read_bytes() != (tmp_path / 'data_b' / 'tokenizer.model').read_bytes()
    assert (tmp_path / 'data_a' / 'train.bin').read_bytes() == (tmp_path / 'data_b' / 'train.bin').read_bytes()
    tiny = ['--device=cpu', '--vocab_size=400', '--n_layer=1', '--n_head=2', '--n_embd=16', '--block_size=16',
            '--batch_size=4', '--max_iters=4', '--warmup_iters=1', '--taper_start=1', '--taper_end=3',
            '--lr_decay_iters=4', '--eval_interval=2', '--eval_iters=1', f'--out_dir={tmp_path / "run"}']
    run('train.py', *tiny, f'--data_dir={tmp_path / "data_a"}', '--stop_iter=2')
    run('train.py', '--init_from=resume', f'--out_dir={tmp_path / "run"}', f'--data_dir={tmp_path / "data_b"}')
    other = run('train.py', '--init_from=resume', f'--out_dir={tmp_path / "run"}',
                f'--data_dir={tmp_path / "data_other"}', '--eval_only', check=False)
    assert other.returncode == 1 and 'holds tokens of another tokenizer' in other.stderr, other.stderr


def test_a_folder_prepared_before_meta_json_recorded_its_val_split_says_it_is_kept(data_dir, tmp_path):
    """A data folder from before meta.json recorded how its val split was made cannot tell whether a
    --val_file or --val_fraction given now is the one it was made with: both prepare scripts keep its
    files as they are and say so, rather than report the stages skipped as if they matched."""
    import hashlib
    import shutil
    require_shared()
    old = tmp_path / 'stories'
    shutil.copytree(data_dir, old)
    docs = tmp_path / 'docs.jsonl'
    docs.write_text(''.join(open(SHARED / 'openwebtext' / 'sample.jsonl').readlines()[:40]))
    (tmp_path / 'other_val.txt').write_text('Another story to hold out.\n\nAnd one more.\n')
    run('prepare_owt.py', f'--input_file={docs}', '--skip_pile', '--val_fraction=0.1', f'--out_dir={tmp_path / "owt"}')
    for folder, key in ((old, 'val_file'), (tmp_path / 'owt', 'val_fraction')):
        meta = json.loads((folder / 'meta.json').read_text())
        (folder / 'meta.json').write_text(json.dumps({k: v for k, v in meta.items() if k not in ('val_file', 'val_fraction')}))
    digest = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in tmp_path.rglob('*') if f.is_file()}
    outs = [run('prepare_tinystories.py', f"--input_file={SHARED / 'tinystories' / 'train_sample.txt'}",
                f"--val_file={tmp_path / 'other_val.txt'}", '--vocab_size=512', f'--out_dir={old}').stdout,
            run('prepare_owt.py', f'--input_file={docs}', '--skip_pile', '--val_fraction=0.2',
                f'--out_dir={tmp_path / "owt"}').stdout]
    for out in outs:
        assert 'was prepared before meta.json recorded' in out and 'val.bin is kept' in out, out
    assert digest == {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in tmp_path.rglob('*') if f.is_file()}


def test_a_prepare_run_again_knows_its_text_by_its_bytes(tmp_path):
    """meta.json records the sha256 of the text a folder was prepared from: a prepare run again after
    that file changed (a story appended) is refused, rather than skipping every stage and keeping the
    tokens of the old text; a byte-identical copy of the text elsewhere is the folder's own; and a
    vocabulary learned from another --vocab_docs is refused, as --max_stories is. Both prepare scripts."""
    import hashlib
    require_shared()
    (tmp_path / 'stories.txt').write_text((SHARED / 'tinystories' / 'train_sample.txt').read_text()[:60_000])
    (tmp_path / 'docs.jsonl').write_text(''.join(open(SHARED / 'openwebtext' / 'sample.jsonl').readlines()[:40]))
    for name in ('stories.txt', 'docs.jsonl'):
        (tmp_path / f'copy_{name}').write_bytes((tmp_path / name).read_bytes())
    stories = ['prepare_tinystories.py', '--vocab_size=400', f'--out_dir={tmp_path / "ts"}']
    owt = ['prepare_owt.py', '--skip_pile', '--val_fraction=0.1', f'--out_dir={tmp_path / "owt"}']
    run(*stories, f'--input_file={tmp_path / "stories.txt"}')
    run(*owt, f'--input_file={tmp_path / "docs.jsonl"}')
    def digest():  # every file but the two texts, appended to below
        return {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in tmp_path.rglob('*')
                if f.is_file() and f.name not in ('stories.txt', 'docs.jsonl')}
    before = digest()
    for command, name in ((stories, 'stories.txt'), (owt, 'docs.jsonl')):
        assert 'load: skipped' in run(*command, f'--input_file={tmp_path / f"copy_{name}"}').stdout
    refused = run(*stories, f'--input_file={tmp_path / "stories.txt"}', '--vocab_docs=50', check=False)
    assert refused.returncode == 1 and 'learned from --vocab_docs=200000 stories, not 50' in refused.stderr
    with open(tmp_path / 'stories.txt', 'a') as f:
        f.write('\n\nOne more story, appended after the folder was prepared.\n')
    with open(tmp_path / 'docs.jsonl', 'a') as f:
        f.write(json.dumps({'text': 'One more document.'}) + '\n')
    for command, name in ((stories, 'stories.txt'), (owt, 'docs.jsonl')):
        proc = run(*command, f'--input_file={tmp_path / name}', check=False)
        assert proc.returncode == 1 and f'{tmp_path / name} changed since' in proc.stderr, proc.stderr
    assert digest() == before


def test_prepare_owt_leaves_out_rows_without_text(tmp_path):
    """A scraper's rows whose text is empty or blank would each be a lone end-of-text token: prepare_owt.py
    leaves them out, says how many, and writes every other document as tiktoken's GPT-2 encoding of
    it (encode_ordinary) followed by the end-of-text id."""
    require_shared()
    import tiktoken
    docs = [json.loads(line)['text'] for line in open(SHARED / 'openwebtext' / 'sample.jsonl')][:40]
    rows = []
    for i, doc in enumerate(docs):
        rows += [doc] + ([''] if i % 3 == 0 else [' \n'] if i % 5 == 0 else [])
    (tmp_path / 'rows.jsonl').write_text(''.join(json.dumps({'text': r}) + '\n' for r in rows))
    out = run('prepare_owt.py', f'--input_file={tmp_path / "rows.jsonl"}', '--skip_pile', '--val_fraction=0.1',
              f'--out_dir={tmp_path / "data"}').stdout
    assert f'left out {len(rows) - len(docs)} rows' in out, out
    enc = tiktoken.get_encoding('gpt2')
    written = sum((split_documents(np.fromfile(tmp_path / 'data' / f'{split}.bin', dtype=np.uint16), enc.eot_token)
                   for split in ('train', 'val')), [])
    assert sorted(written) == sorted(enc.encode_ordinary(d) + [enc.eot_token] for d in docs)


def test_a_reproduction_on_a_slice_of_the_stories_says_so(data_dir, tmp_path, capsys):
    """reproduce.py reuses a prepared data folder as it finds it. The quick start's folder holds the first
    20,000 stories only (--max_stories) and sits where the reproduction looks by default: the
    reproduction says so, and its runs are not silently trained on a slice."""
    import shutil
    import reproduce
    from configurator import parse_flags
    sliced = tmp_path / 'sliced'
    shutil.copytree(data_dir, sliced)
    meta = json.loads((sliced / 'meta.json').read_text())
    (sliced / 'meta.json').write_text(json.dumps(meta | {'max_stories': 600}))
    for folder, noted in ((data_dir, False), (sliced, True)):
        with pytest.raises(SystemExit, match='not the 2048-piece'):  # and then its vocabulary is refused
            reproduce.check_args(parse_flags(reproduce.FLAGS, [f'--data_dir={folder}']), [])
        assert ('holds the first 600 training stories only' in capsys.readouterr().out) == noted


def test_a_reproduction_keeps_runs_of_a_copied_data_folder_and_results_of_its_own(data_dir, tmp_path):
    """reproduce.py keeps a finished run only if it trained on the data the reproduction names: a copy
    of that folder elsewhere (the same meta.json: source, token counts, tokenizer hash) is the same
    data, and a folder prepared otherwise is not. Its results.json replaces only its own: an --assets
    folder holding another reproduction's (other seeds, settings or train.py arguments; the committed
    assets/ hold a full one) is refused up front, while the same reproduction grown by a setting or a
    seed replaces its own."""
    import shutil
    import reproduce
    from configurator import parse_flags
    copy, other = tmp_path / 'copy', tmp_path / 'other'
    shutil.copytree(data_dir, copy)
    shutil.copytree(data_dir, other)
    meta = json.loads((other / 'meta.json').read_text())
    (other / 'meta.json').write_text(json.dumps(meta | {'train_tokens': meta['train_tokens'] - 1}))
    run_config = {'data_dir': str(data_dir), 'taper': 'none'}
    assert reproduce.unlike(run_config, {'data_dir': str(copy), 'taper': 'none'}) is None
    assert reproduce.unlike(run_config, {'data_dir': str(other), 'taper': 'none'}) == ('data_dir', str(data_dir),
                                                                                          str(other))
    assets = tmp_path / 'assets'
    assets.mkdir()
    full = parse_flags(reproduce.FLAGS, ['--seeds=1337,1338,1339'])
    (assets / 'results.json').write_text(json.dumps(dict(seeds=list(full.seeds), settings={s: {} for s in full.settings},
                                                         train_args=[])))
    assert reproduce.earlier_results(str(assets), full, []) is None  # the same reproduction, run again
    grown = parse_flags(reproduce.FLAGS, ['--seeds=1337,1338,1339,1340', f"--settings={','.join(full.settings)},dyt"])
    assert reproduce.earlier_results(str(assets), grown, []) is None  # grown by a setting and a seed, as docs say
    fewer = parse_flags(reproduce.FLAGS, ['--seeds=1337,1338', f"--settings={','.join(full.settings)},dyt"])
    assert reproduce.earlier_results(str(assets), fewer, []).startswith(f'--assets={assets} holds the results of')
    smoke = parse_flags(reproduce.FLAGS, ['--seeds=1', '--settings=baseline,internal'])
    said = reproduce.earlier_results(str(assets), smoke, ['--max_iters=8'])
    assert said.startswith(f'--assets={assets} holds the results of another reproduction (seeds 1337,1338,1339; '
                           f'{len(full.settings)} settings; the default schedule), which this one (seed 1; 2 '
                           f'settings; train.py --max_iters=8) would replace: choose another --out_root'), said


def test_a_reproduction_redrawn_with_fewer_runs_keeps_no_copies_of_the_others(data_dir, tmp_path):
    """<assets>/runs holds a copy of the log of every run the results hold, and the figures are drawn
    from them: a copy left from an earlier invocation with another seed goes (the run itself stays),
    while a folder the user put there, with files of their own, is kept."""
    import shutil
    import reproduce
    from conftest import TINY
    from configurator import parse_flags
    runs = tmp_path / 'runs'
    run('train.py', *TINY, f'--data_dir={data_dir}', f'--out_dir={runs / "baseline-s1"}', '--taper=none',
        '--aux_loss=none', '--max_iters=4', '--warmup_iters=1', '--lr_decay_iters=4', '--eval_interval=4')
    shutil.copytree(runs / 'baseline-s1', runs / 'baseline-s2')
    copies = tmp_path / 'assets' / 'runs'
    for seed in (1, 2):  # what an earlier invocation with --seeds=1,2 left
        (copies / f'baseline-s{seed}').mkdir(parents=True)
        shutil.copyfile(runs / f'baseline-s{seed}' / 'log.jsonl', copies / f'baseline-s{seed}' / 'log.jsonl')
    (copies / 'notes').mkdir()
    (copies / 'notes' / 'todo.txt').write_text('rerun seed 3\n')
    args = parse_flags(reproduce.FLAGS, ['--seeds=1', '--settings=baseline,internal', f'--assets={tmp_path / "assets"}'])
    reproduce.plot_all(args, {'baseline': reproduce.SETTINGS['baseline']}, {'baseline': [str(runs / 'baseline-s1')]})
    assert sorted(os.listdir(copies)) == ['baseline-s1', 'notes'] and (copies / 'notes' / 'todo.txt').exists()
    assert (runs / 'baseline-s2' / 'ckpt.pt').exists()
    assert (copies / 'baseline-s1' / 'log.jsonl').read_bytes() == (runs / 'baseline-s1' / 'log.jsonl').read_bytes()
