# The small reproduction (reproduce.py): the paper's TinyStories setting shrunk to what a 2-core CPU
# trains in minutes. Same architecture family (depth 8, 16 heads, RoPE, SwiGLU, tied head) at d = 64
# with a 2,048-token SentencePiece vocab and context 256; 5% warmup, taper from the warmup's end to
# the last step, as in App. C. Shorter runs need a faster EMA and a larger LR than the paper's
# 1M-step runs: mu = 0.1 spans the last ~10 warmup steps the way mu = 0.01 spans the last ~100 of 25k.
# reproduce.py sets taper and aux_loss per setting.

data_dir = 'data/tinystories2048'
vocab_size = 2048

arch = 'llama'
norm = 'rmsnorm'
n_layer = 8
n_head = 16
n_embd = 64
block_size = 256

batch_size = 16
gradient_accumulation_steps = 1
learning_rate = 2e-3
min_lr = 0.0
weight_decay = 0.0
grad_clip = 1.0
max_iters = 600
warmup_iters = 30
lr_decay_iters = 600
taper_start = 30
taper_end = 600
aux_weight = 0.1
ema_rate = 0.1

eval_interval = 150
eval_iters = 64
log_interval = 10
device = 'cpu'
