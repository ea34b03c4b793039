// Tensor parallelism's communication, as autograd ops over the tp group
// (Megatron-LM's mappings). Each op is a collective in the forward and its
// adjoint in the backward, so a layer built from them gets correct
// gradients from the ordinary backward pass:
//
//   op                     forward                    backward
//   copy_to_tp             identity                   all-reduce (sum)
//   reduce_from_tp         all-reduce (sum)           identity
//   scatter_to_tp          keep my slice of dim -1    all-gather along dim -1
//   gather_from_tp         all-gather along dim -1    keep my slice of dim -1
//   gather_from_sp         all-gather along dim 0     reduce-scatter along dim 0
//   reduce_scatter_to_sp   reduce-scatter along dim 0 all-gather along dim 0
//   scatter_to_sp          keep my slice of dim 0     all-gather along dim 0
//   gather_from_sp_to_replicated
//                          all-gather along dim 0     keep my slice of dim 0
//
// The first four are the tensor-parallel region's entry and exit (the "f"
// and "g" of the Megatron paper). The last three serve sequence parallelism:
// outside the tp region each rank keeps 1/tp of the token rows. Our
// activations are (B, T, C), so the model flattens them to (B T, C) and
// shards dim 0: rank r holds rows [r n, (r + 1) n) of the B T token rows, a
// contiguous block, so the collectives need no transposes (Megatron keeps
// [s, b, h] for the same reason). Every row-wise op (layernorm, dropout,
// the residual add) is indifferent to which rows a rank holds.
// gather_from_sp ends the sharded rows where a tp-parallel layer follows
// (each rank's gradient is a partial sum: reduce-scatter); where a
// replicated layer follows (the ViT's head, the same on every rank), every
// rank's gradient is already the whole, so its backward keeps my rows
// (Megatron's tensor_parallel_output_grad = False).
//
// A group of one makes every op an identity. Slices of dim -1 and dim 0 must
// divide evenly by the tp size (a one-line error names the shape). The
// communicator must outlive the backward of the graph these ops are in.
#pragma once
#include "comm/communicator.h"
#include "engine/tensor.h"

namespace eng::comm {

Tensor copy_to_tp(const Tensor& x, Communicator& tp);
Tensor reduce_from_tp(const Tensor& x, Communicator& tp);
Tensor scatter_to_tp(const Tensor& x, Communicator& tp);
Tensor gather_from_tp(const Tensor& x, Communicator& tp);
Tensor gather_from_sp(const Tensor& x, Communicator& tp);
Tensor reduce_scatter_to_sp(const Tensor& x, Communicator& tp);
Tensor scatter_to_sp(const Tensor& x, Communicator& tp);
Tensor gather_from_sp_to_replicated(const Tensor& x, Communicator& tp);

}  // namespace eng::comm
