# DyT in place of every RMSNorm, d = 256 (9M parameters + 17 alphas): the schedule of the
# paper's Table 1, row 9M, which does not run DyT (Zhu et al. 2025). Baseline there: 1.4620 +- 0.0022.
# alpha starts at 0.8 before attention, 0.2 before the MLP and at the final norm (model.DYT_ALPHA).
# App. C: AdamW 3e-4, betas (0.9, 0.95), 5% linear warmup, cosine to 0, no weight decay,
# grad clip 1.0, batch 16 x 512, EMA rate 0.01, lambda 0.1.

out_dir = 'out-dyt-256'
data_dir = 'data/tinystories10000'
vocab_size = 10000

arch = 'llama'
norm = 'dyt'
n_layer = 8
n_head = 16
n_embd = 256
block_size = 512

batch_size = 16
gradient_accumulation_steps = 1
learning_rate = 3e-4
min_lr = 0.0
weight_decay = 0.0
grad_clip = 1.0
max_iters = 750_000
warmup_iters = 37_500  # 5% of the steps
lr_decay_iters = 750_000

taper = 'none'
aux_loss = 'none'
aux_weight = 0.1
ema_rate = 0.01

eval_interval = 10_000
eval_iters = 50
log_interval = 100
