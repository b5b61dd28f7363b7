# SmolLM2-135M (HuggingFaceTB/SmolLM2-135M, a LlamaForCausalLM), Internal-Taper (+fixed-target aux): every block's RMSNorm tapered, the final norm kept at g = 1.
# Beyond the paper: no paper gives these hyper-parameters. They follow the paper's GPT-2 S schedule
# (Table 3 / App. D) by analogy, as the nearest size (135M against 124M parameters): 300 steps of
# about 0.5M tokens, LR 6e-4 cosine to 3e-4 after 25 warmup steps, the taper from step 25 to 100,
# weight decay 0.01, grad clip 1.0, bf16, mu = 0.1, lambda = 0.1. What differs, and why:
# - context 2048 (16 x 16 x 2048 = 524,288 tokens per step): SmolLM2 was pre-trained at 2048 before
#   its context was extended to 8192, and 2048 keeps a step's memory near GPT-2 S's;
# - AdamW beta2 = 0.95, as the paper's own pre-training, and no dropout, as Llama-family models
#   train: the GPT-2 rows take 0.999 and dropout 0.1 from Baroni et al.'s HF Trainer setup;
# - documents are framed by SmolLM2's own tokenizer (prepare_owt.py --tokenizer), and every target
#   is scored, end-of-text included.
# The shapes below are SmolLM2-135M's config.json (rope_theta 1e5 and eps 1e-5 are read from it too);
# train.py checks them against the model it loads, and a resume against the checkpoint.

out_dir = 'out-smollm2-135m-internaltaper'
init_from = 'HuggingFaceTB/SmolLM2-135M'
data_dir = 'data/openwebtext-SmolLM2-135M'  # python prepare_owt.py --tokenizer=HuggingFaceTB/SmolLM2-135M

arch = 'llama'
norm = 'rmsnorm'
n_layer = 30
n_head = 9
n_embd = 576
n_kv_head = 3
mlp_hidden = 1536
tied_head = True
vocab_size = 49152
block_size = 2048
data_layout = 'blocks'

batch_size = 16
gradient_accumulation_steps = 16
learning_rate = 6e-4
min_lr = 3e-4
weight_decay = 0.01
grad_clip = 1.0
beta2 = 0.95
max_iters = 300
warmup_iters = 25
lr_decay_iters = 300

taper = 'internal'
taper_start = 25
taper_end = 100
aux_loss = 'fixed'
aux_weight = 0.1
ema_rate = 0.1

dtype = 'bfloat16'
eval_interval = 50
eval_iters = 20
log_interval = 1
