# The small reproduction (reproduce.py): the paper's TinyStories setting shrunk to what a 2-core CPU
# trains in minutes. Same architecture family (depth 8, 16 heads, RoPE, SwiGLU, tied head) at d = 64
# with a 2,048-token SentencePiece vocab and context 256; 5% warmup and the taper starting at the
# warmup's end, as in App. C. Shorter runs need a faster EMA and a larger LR than the paper's
# 1M-step runs: mu = 0.1 spans the last ~10 warmup steps the way mu = 0.01 spans the last ~100 of 25k.
# reproduce.py sets taper and aux_loss per setting.
#
# The taper ends at step 450, not at the last step as in App. C, so that the final model is the
# one trained at g = 0: 150 steps (25% of the run) at exactly g = 0, about 175 at g < 0.01. The
# paper's cosine reaches g < 0.01 in the last 6.4% of its taper, which at 1M steps is ~60k steps of
# training at an all-but-removed norm; a taper ending at step 600 would leave 36 such steps here,
# too few for the weights to settle at g = 0. Internal- and All-Taper share the schedule, as in
# the paper.

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
taper_end = 450
aux_weight = 0.1
ema_rate = 0.1

eval_interval = 150
eval_iters = 64
log_interval = 10
device = 'cpu'
