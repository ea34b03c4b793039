// --keep_checkpoints N: besides out_dir/checkpoint (the latest, swapped whole
// at every save), the last N saves stay as out_dir/checkpoints/step_NNNNNN,
// to roll back past a loss spike with --resume_from (llm.c's -nk, Megatron's
// iter_* directories). A kept directory is made of hard links to the files
// the save just wrote (a save writes new files and never changes them, so the
// links cost no space; a copy where the file system has none), under
// step_NNNNNN.tmp and a rename, so it is whole or absent.
// Pruning keeps the N highest steps up to the one saved: after a rollback,
// the abandoned run's later kept steps stay until the new run saves that
// step again (then replaced) - nothing else of the user's is removed.
#pragma once
#include <cstdint>
#include <string>

namespace eng::models {

// Rank 0, right after ckpt_dir holds step `step`. Throws on an I/O error.
void keep_checkpoint(const std::string& ckpt_dir, int64_t step, int64_t keep);

}  // namespace eng::models
