# GPT-2 M (gpt2-medium), Vanilla (fine-tuned, LayerNorms intact): the paper's Table 3, row M/vanilla.
# Paper's end cross-entropy, OWT / Pile / Pile-filtered: 2.7390 / 2.5752 / 2.5724.
# App. D: OpenWebText, bf16, grad clip 1.0, AdamW weight decay 0.01, cosine LR with warmup,
# 22 x 23 x 1024 = 518,144 tokens per step.
# Where App. D is silent, Baroni et al.'s released code: AdamW betas (0.9, 0.999), HF GPT-2's
# dropout 0.1, shuffled non-overlapping 1024-token blocks, end-of-text targets out of the loss.

out_dir = 'out-gpt2-m-vanilla'
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
grad_clip = 1.0
beta2 = 0.999
max_iters = 500
warmup_iters = 10
lr_decay_iters = 500

taper = 'none'
aux_loss = 'none'

dtype = 'bfloat16'
grad_checkpoint = False
eval_interval = 50
eval_iters = 20
log_interval = 1
