# GPT-2 L (gpt2-large), FakeLN (+Baroni-aux), Baroni et al.'s sequential removal: the paper's Table 3, row L/fakeln.
# Paper's end cross-entropy, OWT / Pile / Pile-filtered: 2.6384 / 2.7504 / 2.5159.
# App. D: OpenWebText, bf16, grad clip 1.0, AdamW weight decay 0.01, cosine LR with warmup,
# 28 x 18 x 1024 = 516,096 tokens per step.
# Where App. D is silent, Baroni et al.'s released code: AdamW betas (0.9, 0.999), HF GPT-2's
# dropout 0.1, shuffled non-overlapping 1024-token blocks, end-of-text targets out of the loss.

out_dir = 'out-gpt2-l-fakeln'
init_from = 'gpt2-large'
data_dir = 'data/openwebtext'

arch = 'gpt2'
norm = 'layernorm'
n_layer = 36
n_head = 20
n_embd = 1280
vocab_size = 50257
block_size = 1024
dropout = 0.1
data_layout = 'blocks'
mask_eot_targets = True  # Baroni's collator

batch_size = 28
gradient_accumulation_steps = 18
learning_rate = 3e-4
min_lr = 4e-5
weight_decay = 0.01
decay_fakeln_weight = True  # FakeLN's gamma too, as Baroni's Trainer decays it
grad_clip = 1.0
beta2 = 0.999
max_iters = 600
warmup_iters = 15  # Baroni's config (the TaperLN-L rows keep App. D's 30)
lr_decay_iters = 1200

taper = 'none'
fakeln = True
fakeln_start = (30, 174, 318, 534)  # ln_2, ln_1 (Q/K), ln_1 (V) of layer 0, then ln_f
fakeln_gap = (4, 4, 6)      # steps between layers
fakeln_momentum = 0.9 ** (28 / 32)  # weight on sigma's old value, per forward (0.912)
fakeln_sigma = 'live'  # the EMA, each ln_1 path frozen apart; not Baroni's default (README, FakeLN)
aux_loss = 'baroni'
aux_weight = 0.03

dtype = 'bfloat16'
grad_checkpoint = True  # without it, 28 x 1024 needs over 80 GB (python memory.py)
eval_interval = 50
eval_iters = 20
log_interval = 1
