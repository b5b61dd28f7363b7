# GPT-2 XL (gpt2-xl), FakeLN (+Baroni-aux), Baroni et al.'s sequential removal: the paper's Table 3, row XL/fakeln.
# Paper's end cross-entropy, OWT / Pile / Pile-filtered: 2.5052 / 130.22 / 2.3992.
# App. D: OpenWebText, bf16, grad clip 1.0, AdamW weight decay 0.01, cosine LR with warmup,
# 18 x 28 x 1024 = 516,096 tokens per step.
# Where App. D is silent, Baroni et al.'s released code: AdamW betas (0.9, 0.999), HF GPT-2's
# dropout 0.1, shuffled non-overlapping 1024-token blocks, end-of-text targets out of the loss.

out_dir = 'out-gpt2-xl-fakeln'
init_from = 'gpt2-xl'
data_dir = 'data/openwebtext'

arch = 'gpt2'
norm = 'layernorm'
n_layer = 48
n_head = 25
n_embd = 1600
vocab_size = 50257
block_size = 1024
dropout = 0.1
data_layout = 'blocks'
mask_eot_targets = True  # Baroni's collator

batch_size = 18
gradient_accumulation_steps = 28
learning_rate = 1e-4
min_lr = 2e-5
weight_decay = 0.01
decay_fakeln_weight = True  # FakeLN's gamma too, as Baroni's Trainer decays it
grad_clip = 1.0
beta2 = 0.999
max_iters = 800
warmup_iters = 20
lr_decay_iters = 1200

taper = 'none'
fakeln = True
fakeln_start = (50, 242, 434, 722)  # ln_2, ln_1 (Q/K), ln_1 (V) of layer 0, then ln_f
fakeln_gap = (4, 4, 6)      # steps between layers
fakeln_momentum = 0.9 ** (18 / 32)  # weight on sigma's old value, per forward (0.942)
fakeln_sigma = 'live'  # the EMA, each ln_1 path frozen apart; not Baroni's default (README, FakeLN)
aux_loss = 'baroni'
aux_weight = 0.01

dtype = 'bfloat16'
grad_checkpoint = True  # XL fits one 80 GB GPU with it (python memory.py)
eval_interval = 50
eval_iters = 20
log_interval = 1
