# GPT-2 M (gpt2-medium), Internal-TaperLN (+fixed-target aux), ln_f kept at g = 1: the paper's Table 3, row M/internaltaper.
# Paper's end cross-entropy, OWT / Pile / Pile-filtered: 2.7550 / 2.5937 / 2.5936.
# App. D: OpenWebText, bf16, grad clip 1.0, AdamW weight decay 0.01, cosine LR with warmup,
# 22 x 23 x 1024 = 518,144 tokens per step.
# Where App. D is silent, Baroni et al.'s released code: AdamW betas (0.9, 0.999), HF GPT-2's
# dropout 0.1, shuffled non-overlapping 1024-token blocks, end-of-text targets out of the loss.

out_dir = 'out-gpt2-m-internaltaper'
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
mask_eot_targets = True  # as Baroni's pipeline, which App. D reuses

batch_size = 22
gradient_accumulation_steps = 23
learning_rate = 6e-4
min_lr = 3e-4
weight_decay = 0.01
grad_clip = 1.0
beta2 = 0.999
max_iters = 500
warmup_iters = 10
lr_decay_iters = 500

taper = 'internal'
taper_start = 20
taper_end = 200
aux_loss = 'fixed'
aux_weight = 0.1
ema_rate = 0.1

dtype = 'bfloat16'
grad_checkpoint = False
eval_interval = 50
eval_iters = 20
log_interval = 1
