"""
The memory plan (memory.py) against what autograd really keeps: its activation formula is checked
against the tensors saved for backward, counted with saved_tensors_hooks on the CPU, in float32 and
under bf16 autocast; and the GPT-2 XL fine-tuning configs are checked against one 80 GB GPU.
"""

import math
import weakref

import pytest
import torch

import memory
from conftest import run
from model import GPT, GPTConfig

CASES = [  # (arch, norm, protocol): the phase that saves the most, as memory.py assumes
    ('gpt2', 'layernorm', 'none'), ('gpt2', 'layernorm', 'all'), ('gpt2', 'layernorm', 'fakeln'),
    ('llama', 'rmsnorm', 'none'), ('llama', 'rmsnorm', 'internal'),
    ('llama', 'rmsnorm', 'gqa'),  # an HF Llama's shape: grouped-query attention, untied head, All-Taper
]


def in_largest_phase(arch, norm, protocol):
    """A 2-layer model in the phase memory.py plans for: mid-taper (both branches) with the scale
    loss on, or FakeLN's ln_1 between the removals of its two paths."""
    torch.manual_seed(0)
    gqa = protocol == 'gqa'
    protocol = 'all' if gqa else protocol
    cfg = GPTConfig(arch=arch, norm=norm, n_layer=2, n_head=4, n_embd=48, vocab_size=136, n_kv_head=2 if gqa else 0,
                    tied_head=not gqa, block_size=40, taper=protocol if protocol in ('internal', 'all') else 'none',
                    fakeln=protocol == 'fakeln', eot_token=3,
                    aux_loss={'none': 'none', 'fakeln': 'baroni'}.get(protocol, 'fixed'))
    model = GPT(cfg).train()
    idx = torch.randint(0, cfg.vocab_size, (3, 40))
    model(idx, idx)
    model.step_emas()
    if protocol in ('internal', 'all'):
        model.start_taper()
        model.set_gate(0.5)
    if protocol == 'fakeln':  # ln_2, ln_f and ln_1's Q/K path removed; ln_1's V path still real
        for m in model.fakelns():
            m.remove(0)
    return model


def measured_saved_bytes(model, idx, targets, autocast):
    """Bytes of the distinct storages autograd holds for backward after one forward, parameters
    excluded (the bf16 copies autocast makes of them are included)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = []

    def pack(t):
        alias = t.detach()  # a reference to t itself would make a cycle through its grad_fn
        saved.append(weakref.ref(alias))
        return alias

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast('cpu', torch.bfloat16, enabled=autocast):
        _, loss, _ = model(idx, targets, return_stats=True)
    storages = {}
    for ref in saved:
        t = ref()
        if t is not None and t.untyped_storage().data_ptr() not in params:
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(storages.values()), loss


@pytest.mark.parametrize('grad_checkpoint', [False, True], ids=['', 'checkpointed'])
@pytest.mark.parametrize('autocast', [False, True], ids=['float32', 'bf16'])
@pytest.mark.parametrize('arch,norm,protocol', CASES)
def test_activation_formula_matches_what_autograd_saves(arch, norm, protocol, autocast, grad_checkpoint):
    model = in_largest_phase(arch, norm, protocol)
    model.grad_checkpoint = grad_checkpoint
    B, T = 3, 40
    idx = torch.randint(0, model.config.vocab_size, (B, T), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, model.config.vocab_size, (B, T), generator=torch.Generator().manual_seed(2))
    measured, loss = measured_saved_bytes(model, idx, targets, autocast)
    blocks, head, _ = memory.saved_activations(model.config, B, T, autocast, grad_checkpoint)
    # autocast's bf16 weight copies that stay saved: every matmul weight, or only the head's when
    # the blocks are checkpointed (theirs are cast again when a block is recomputed)
    saved_weights = [model.lm_head] if grad_checkpoint else \
        [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    planned = blocks + head + (2 * sum(m.weight.numel() for m in saved_weights) if autocast else 0)
    # The formula leaves out tensors of size d or smaller (c gammatilde, c, the gate, masks): well
    # under 1% here, while its smallest (B, T, d) term is about 2% of the total.
    assert planned == pytest.approx(measured, rel=0.01), (planned, measured)
    assert torch.isfinite(loss)


def test_weights_and_adamw_state_are_those_of_a_real_optimizer_step():
    """The meta-device count against a real model and torch's AdamW after one step, on the CPU."""
    config = memory.resolve(['--arch=gpt2', '--norm=layernorm', '--n_layer=2', '--n_head=2',
                             '--n_embd=32', '--vocab_size=80', '--block_size=16', '--taper=all'])
    state = memory.state_bytes(config)
    params, weights, adam = state['params'], state['weights'], state['adam']
    model = GPT(memory.model_config(config))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long))[1].backward()
    for p in model.parameters():  # gammatilde gets gradients from taper start on
        p.grad = torch.zeros_like(p) if p.grad is None else p.grad
    optimizer.step()
    real = [t for state in optimizer.state.values() for t in state.values()]
    assert params == sum(p.numel() for p in model.parameters()) and weights == 4 * params
    assert adam == sum(t.numel() * t.element_size() for t in real)
    assert adam - 8 * params == 4 * len(optimizer.state)  # exp_avg, exp_avg_sq, and a step count each


@pytest.mark.parametrize('size', ['l', 'xl'])
@pytest.mark.parametrize('proto', ['vanilla', 'fakeln', 'internaltaper', 'alltaper'])
def test_gpt2_l_and_xl_configs_fit_one_80gb_gpu_at_the_papers_batch(size, proto):
    """App. D's global batch (L 28 x 18, XL 18 x 28 sequences of 1024) on one 80 GB GPU, as
    configured: the plan's total stays under 90% of it."""
    config = memory.resolve([f'config/finetune_gpt2_{size}_{proto}.py'])
    assert config['batch_size'] * config['gradient_accumulation_steps'] == 504
    parts = memory.plan(config)
    assert parts['total'] < memory.FIT_FRACTION * 80 * memory.GB
    # the plan is not vacuous: XL's fp32 weights, gradients and AdamW alone are 16 bytes a parameter
    assert parts['weights'] + parts['gradients'] + parts['adamw'] >= 16 * parts['params']


def test_fsdp_shards_the_state_over_ranks():
    """Per rank under FSDP2, weights, gradients and AdamW state are 1/N of one GPU's."""
    config = memory.resolve(['config/finetune_gpt2_xl_alltaper.py'])
    one, eight = memory.plan(config), memory.plan(config, nproc=8)
    for part in ('weights', 'gradients', 'adamw'):
        assert eight[part] == pytest.approx(one[part] / 8)
    assert eight['total'] < one['total']  # activations: test_memory_plans_the_micro_batch_each_rank_runs


def test_train_prints_the_plan_and_exits_with_memory_plan(tmp_path):
    import subprocess
    import sys
    import numpy as np
    for split in ('train', 'val'):
        np.random.default_rng(0).integers(0, 64, 4096, dtype=np.uint16).tofile(tmp_path / f'{split}.bin')
    proc = subprocess.run([sys.executable, 'train.py', '--device=cpu', f'--data_dir={tmp_path}',
                           f'--out_dir={tmp_path / "out"}', '--vocab_size=64', '--n_layer=2',
                           '--n_embd=32', '--n_head=2', '--block_size=32', '--max_iters=2', '--taper=none',
                           '--aux_loss=none', '--warmup_iters=1', '--lr_decay_iters=2', '--memory_plan'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert 'memory plan:' in proc.stdout and 'float32' in proc.stdout
    assert not (tmp_path / 'out' / 'log.jsonl').exists()  # it stopped before training


def test_readme_memory_table_is_memory_py_output(capsys):
    """docs/gpt2.md's memory table is what the command written above it prints."""
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parent / 'docs' / 'gpt2.md').read_text()
    command = re.search(r'`python memory\.py (--summary [^`]+)`', readme.replace('\n', ' ')).group(1)
    args = [a for arg in command.split() for a in expand_braces(arg)]
    memory.main(args)
    assert capsys.readouterr().out.strip() in readme


def expand_braces(arg):
    """The shell's {a,b} expansion, for the one brace group a README command may hold."""
    import re
    match = re.search(r'\{([^}]*)\}', arg)
    if not match:
        return [arg]
    return [arg[:match.start()] + choice + arg[match.end():] for choice in match.group(1).split(',')]


L360 = ['--n_layer=32', '--n_embd=960', '--n_head=15', '--n_kv_head=5', '--mlp_hidden=2560']  # SmolLM2-360M
L1B = ['--n_layer=16', '--n_embd=2048', '--n_head=32', '--n_kv_head=8', '--mlp_hidden=8192',
       '--vocab_size=128256']  # Llama-3.2-1B
LLAMA_ROWS = [([], 1), ([*L360, '--batch_size=8', '--gradient_accumulation_steps=32'], 1),
              ([*L360, '--batch_size=8', '--gradient_accumulation_steps=32', '--fsdp=True'], 2),
              ([*L1B, '--batch_size=4', '--gradient_accumulation_steps=64', '--fsdp=True'], 8),
              ([*L1B, '--batch_size=4', '--gradient_accumulation_steps=64', '--grad_checkpoint=True'], 1)]


def test_readme_llama_memory_rows_are_memory_py_output():
    """Each row of docs/llama.md's memory table is the plan memory.py makes for its flags."""
    from pathlib import Path
    section = (Path(__file__).parent / 'docs' / 'llama.md').read_text()
    rows = [line for line in section.splitlines() if line.startswith('| ') and line.endswith('% |')]
    assert len(rows) == len(LLAMA_ROWS)
    for row, (flags, nproc) in zip(rows, LLAMA_ROWS):
        plan = memory.plan(memory.resolve(['config/finetune_smollm2_135m_alltaper.py', *flags]), nproc)
        assert f"| {plan['params']:,} |" in row and f"{plan['total'] / 1e9:.2f} GB" in row, row


@pytest.mark.parametrize('accumulation,batch_size', [(1, 8), (2, 32), (16, 32), (28, 18), (3, 5), (7, 9), (1, 1)])
@pytest.mark.parametrize('ranks', [1, 2, 3, 4, 8])
def test_the_ranks_share_the_step_in_the_fewest_micro_batches_no_larger_than_one_process_runs(
        accumulation, batch_size, ranks):
    """Every rank gets an equal share of the step's batch_size x accumulation sequences, and runs it
    in the fewest equal micro-batches that are at least ceil(accumulation / ranks) and no larger than
    batch_size (so the plan of one process bounds every rank's); a batch the ranks cannot share is
    refused. The reference enumerates every factorisation of the share."""
    config = dict(gradient_accumulation_steps=accumulation, batch_size=batch_size)
    world = accumulation * batch_size
    if world % ranks:
        with pytest.raises(ValueError, match=f'{ranks} ranks cannot split'):
            memory.split_batch(config, ranks)
        return
    share = world // ranks
    fewest = min(a for a in range(1, share + 1)
                 if share % a == 0 and a >= math.ceil(accumulation / ranks) and share // a <= batch_size)
    assert memory.split_batch(config, ranks) == (fewest, share // fewest)


def test_memory_plans_the_micro_batch_each_rank_runs():
    """GPT-2 XL's 28 x 18 = 504 sequences over 8 ranks: 63 each, as 7 micro-batches of 9, so the
    plan's activations are those of 9 sequences; over 5 ranks the batch cannot be shared at all."""
    config = memory.resolve(['config/finetune_gpt2_xl_alltaper.py'])
    eight = memory.plan(config, nproc=8)
    nine = memory.plan(dict(config, batch_size=9, gradient_accumulation_steps=1))
    assert eight['activations'] == nine['activations']
    with pytest.raises(ValueError, match='5 ranks cannot split the global batch of 28 x 18 = 504'):
        memory.plan(config, nproc=5)


def test_two_config_files_are_layered_as_train_py_reads_them_and_said():
    """memory.py reads its arguments as train.py does, so two config files make one plan, the second over
    the first (GPT-2 M's shape); a reader who meant one row each is told about --summary."""
    out = run('memory.py', 'config/finetune_gpt2_s_alltaper.py', 'config/finetune_gpt2_m_alltaper.py').stdout
    assert out.startswith('note: the 2 config files are applied one over another') and '--summary' in out
    assert 'memory plan: 354,873,344 parameters' in out  # GPT-2 M, as config/finetune_gpt2_m_alltaper.py alone
    assert 'config files' not in run('memory.py', 'config/finetune_gpt2_m_alltaper.py').stdout


def test_a_cpu_run_is_planned_against_this_machines_ram():
    """A run on the CPU (--device=cpu) holds its state in RAM: its plan says so and is judged against this
    machine's physical memory (the reference: the system's page size times its pages), not a GPU's
    --gpu_gb, which is noted as unused; its ranks under --nproc share that memory."""
    import os
    import re
    out = run('memory.py', 'config/finetune_gpt2_s_alltaper.py', '--device=cpu', '--gpu_gb=4').stdout
    assert out.startswith("note: --gpu_gb is a GPU's memory, and this plan is of a run on the CPU")
    assert 'one process on the CPU' in out and 'GB GPU' not in out
    ram = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 1e9
    total, share = re.search(r'total\s+([\d.]+) GB\n  (?:fits|does NOT fit) this machine\'s RAM of \d+ GB \((\d+)% of it',
                             out).groups()
    assert abs(int(share) - 100 * float(total) / ram) <= 1
    # two ranks on the CPU hold two such shares of the one machine's RAM
    out = run('memory.py', 'config/finetune_gpt2_s_alltaper.py', '--device=cpu', '--nproc=2').stdout
    rank_total, share = re.search(r'total\s+([\d.]+) GB\n  2 ranks x [\d.]+ GB (?:fits|does NOT fit) this machine\'s '
                                  r'RAM of \d+ GB \((\d+)% of it', out).groups()
    assert abs(int(share) - 100 * 2 * float(rank_total) / ram) <= 1


def test_a_run_folder_given_to_memory_py_is_said_not_planned(tmp_path):
    """memory.py plans config files and flags; an --out_dir that holds a run is not read, and it says so,
    with the command that plans that run."""
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'ckpt.pt').write_bytes(b'a checkpoint')
    out = run('memory.py', 'config/quick_cpu.py', f'--out_dir={tmp_path / "run"}').stdout
    assert out.startswith(f'note: this plan is of the config files and flags given, not of the run in {tmp_path / "run"}')
    assert '--init_from=resume' in out.splitlines()[0]
    assert 'note:' not in run('memory.py', 'config/quick_cpu.py', f'--out_dir={tmp_path / "new"}').stdout


def test_memory_help_offers_only_the_init_from_it_plans():
    """memory.py takes train.py's flags, but plans a resume through train.py: its --help says so rather
    than offering 'resume', which it refuses."""
    shown = run('memory.py', '--help').stdout
    entry = shown[shown.index('  --init_from=scratch'):].split('\n  --')[0]
    assert "'resume'" not in entry and 'train.py --init_from=resume --out_dir=<run> --memory_plan' in ' '.join(entry.split())
    refused = run('memory.py', '--init_from=resume', check=False)
    assert refused.returncode == 1 and '--memory_plan' in refused.stderr


@pytest.mark.parametrize('config_file, gpu_gb, nproc', [('config/finetune_gpt2_xl_alltaper.py', 40, 1),
                                                         ('config/finetune_gpt2_xl_alltaper.py', 24, 1),
                                                         ('config/taper_internal_512.py', 2, 1),
                                                         ('config/finetune_gpt2_m_vanilla.py', 12, 1),
                                                         ('config/finetune_gpt2_xl_vanilla.py', 24, 2)])
def test_a_plan_that_does_not_fit_names_a_change_that_fits_with_the_same_global_batch(capsys, config_file, gpu_gb,
                                                                                      nproc):
    """A plan over its GPU's memory ends with the change that fits it: activation checkpointing, smaller
    micro-batches with the step's sequences kept, or FSDP2 over more GPUs. Planned with that change,
    as the line says to make it, the plan fits and the global batch is the config's; a plan that fits
    names no change."""
    import re
    memory.main([config_file, f'--gpu_gb={gpu_gb}', f'--nproc={nproc}'])
    out = capsys.readouterr().out
    assert 'does NOT fit' in out, out
    change = re.search(r'to fit: (.*)', out).group(1)
    flags = re.findall(r'(--(?:grad_checkpoint|batch_size|gradient_accumulation_steps)=\w+)', change)
    ranks = re.search(r'memory.py --nproc=(\d+)', change)
    assert flags or ranks, change
    argv = [config_file, f'--gpu_gb={gpu_gb}', f'--nproc={ranks.group(1) if ranks else nproc}', *flags]
    memory.main(argv)
    out = capsys.readouterr().out
    assert re.search(r'\n  fits a', out) and 'to fit' not in out, out
    before, after = memory.resolve([config_file]), memory.resolve([config_file, *flags])
    assert before['batch_size'] * before['gradient_accumulation_steps'] == \
        after['batch_size'] * after['gradient_accumulation_steps']
