# GPT-2 M (gpt2-medium), FakeLN (+Baroni-aux), Baroni et al.'s sequential removal: the paper's Table 3, row M/fakeln.
# Paper's end cross-entropy, OWT / Pile / Pile-filtered: 2.7642 / 2.6579 / 2.6352.
# App. D: OpenWebText, bf16, grad clip 1.0, AdamW weight decay 0.01, cosine LR with warmup,
# 22 x 23 x 1024 = 518,144 tokens per step.
# Where App. D is silent, Baroni et al.'s released code: AdamW betas (0.9, 0.999), HF GPT-2's
# dropout 0.1, shuffled non-overlapping 1024-token blocks, end-of-text targets out of the loss.

out_dir = 'out-gpt2-m-fakeln'
init_from = 'gpt2-medium'
data_dir = 'data/openwebtext'

arch = 'gpt2'
norm = 'layernorm'
n_layer = 24
n_head = 16
n_embd = 1024
vocab_size = 50257
block_size = 1024
dropout = 0.1
data_layout = 'blocks'
mask_eot_targets = True  # Baroni's collator

batch_size = 22
gradient_accumulation_steps = 23
learning_rate = 6e-4
min_lr = 3e-4
weight_decay = 0.01
decay_fakeln_weight = True  # FakeLN's gamma too, as Baroni's Trainer decays it
grad_clip = 1.0
beta2 = 0.999
max_iters = 500
warmup_iters = 10
lr_decay_iters = 500

taper = 'none'
fakeln = True
fakeln_start = (20, 68, 116, 188)  # ln_2, ln_1 (Q/K), ln_1 (V) of layer 0, then ln_f
fakeln_gap = (2, 2, 3)      # steps between layers
fakeln_momentum = 0.9  # weight on sigma's old value, per forward
fakeln_sigma = 'live'  # the EMA, each ln_1 path frozen apart; not Baroni's default (README, FakeLN)
aux_loss = 'baroni'
aux_weight = 0.1

dtype = 'bfloat16'
grad_checkpoint = False
eval_interval = 50
eval_iters = 20
log_interval = 1
