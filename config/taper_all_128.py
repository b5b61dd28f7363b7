# All-Taper (+aux), d = 128 (3M parameters): the paper's Table 1, row 3M.
# Paper's validation loss (6 seeds): 1.7874 +- 0.0028 (+1.78%).
# App. C: AdamW 3e-4, betas (0.9, 0.95), 5% linear warmup, cosine to 0, no weight decay,
# grad clip 1.0, batch 16 x 512, EMA rate 0.01, lambda 0.1.
# Ablation without the scale loss: --aux_loss=none.

out_dir = 'out-taper-all-128'
data_dir = 'data/tinystories10000'
vocab_size = 10000

arch = 'llama'
norm = 'rmsnorm'
n_layer = 8
n_head = 16
n_embd = 128
block_size = 512

batch_size = 16
gradient_accumulation_steps = 1
learning_rate = 3e-4
min_lr = 0.0
weight_decay = 0.0
grad_clip = 1.0
max_iters = 500_000
warmup_iters = 25_000  # 5% of the steps
lr_decay_iters = 500_000

taper = 'all'
taper_start = 25_000  # the end of the LR warmup
taper_end = 500_000  # the last step
aux_loss = 'fixed'
aux_weight = 0.1
ema_rate = 0.01

eval_interval = 10_000
eval_iters = 50
log_interval = 100
