# The CPU quick start (README): a run that tapers every internal norm to g = 0 in a few minutes on a
# laptop-class CPU, then folds and samples. Data: `python prepare_tinystories.py --vocab_size=2048
# --max_stories=20000` (a slice of TinyStories) or any data folder in 2,048 SentencePiece pieces.
# Internal-Taper (+aux), as config/taper_internal_*.py, at d = 64, depth 4, context 128; the taper
# runs from the end of warmup (step 15) to step 225, so the last 75 steps train at g = 0.

out_dir = 'out-quick-cpu'
data_dir = 'data/tinystories2048'
vocab_size = 2048

arch = 'llama'
norm = 'rmsnorm'
taper = 'internal'
aux_loss = 'fixed'
n_layer = 4
n_head = 4
n_embd = 64
block_size = 128

batch_size = 16
learning_rate = 2e-3
min_lr = 0.0
weight_decay = 0.0
max_iters = 300
warmup_iters = 15
lr_decay_iters = 300
taper_start = 15
taper_end = 225
aux_weight = 0.1
ema_rate = 0.1

eval_interval = 100
eval_iters = 16
log_interval = 25
device = 'cpu'
