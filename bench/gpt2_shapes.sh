# Sourced by bench/bench_gpt2_cpu.sh, bench/profile_gpt2_cpu.sh and
# bench/gemm_census.sh: the GPT-2 shapes they run, by name in $shape; sets
# cfg (the options train and bench/gpt2_torch.py both take), shape_name, and
# run_opts (train's options for a cpu run that only trains: no evaluation or
# sampling beyond the minimum; the caller adds --steps and --out_dir).
#   tiny: configs/gpt2-tiny.json's model (4 layers of 128, 4 heads, vocab 256)
#         at B16 T128 (tiny's global batch in one micro-batch)
#   l6:   6 layers of 192, 6 heads, vocab 320, B8 T256
case "$shape" in
  tiny) cfg=(--vocab_size 256 --block_size 128 --n_layer 4 --n_head 4 --n_embd 128 --batch_size 16 --seq_len 128)
        shape_name="4x128 B16 T128" ;;
  l6) cfg=(--vocab_size 320 --block_size 256 --n_layer 6 --n_head 6 --n_embd 192 --batch_size 8 --seq_len 256)
      shape_name="6x192 B8 T256" ;;
  *) echo "bench: unknown shape '$shape': tiny or l6"; exit 1 ;;
esac
run_opts=(--device cpu --warmup_steps 1 --val_every 0 --sample_every 0 --val_batches 1 --sample_tokens 1)
