// Embedding lookup: out[i, :] = w[ids[i] - start, :]; backward
// dw[ids[i] - start, :] += dout[i, :]. The table holds the V ids
// [start, start + V) (all of them, or one rank's shard of a vocabulary split
// over tp); other ids give zero rows and no gradient.
// The backward runs serially over tokens so repeated ids are summed in a fixed
// order: deterministic, as the CUDA version must be too.
// bytes: forward 8*n*C + 4n, backward 8*n*C + 4*V*C (fp32); flops: backward n*C.
// add_positions_forward: bytes 8 B T C + 4 T C (fp32), flops B T C.
// bucket_by_id: a stable counting sort of the positions by row, O(n + V).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace eng::cpu {

template <typename T>
void embedding_forward(const T* w, const int32_t* ids, T* out, int64_t n, int64_t C, int64_t start, int64_t V) {
#pragma omp parallel for if (n * C > 16384)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = int64_t(ids[i]) - start;
    if (id >= 0 && id < V)
      std::memcpy(out + i * C, w + id * C, size_t(C) * sizeof(T));
    else
      std::memset(out + i * C, 0, size_t(C) * sizeof(T));
  }
}

template <typename T>
void embedding_backward(const T* dout, const int32_t* ids, T* dw, int64_t n, int64_t V, int64_t C, int64_t start) {
  for (int64_t i = 0; i < V * C; ++i) dw[i] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = int64_t(ids[i]) - start;
    if (id < 0 || id >= V) continue;
    T* row = dw + id * C;
    const T* d = dout + i * C;
    for (int64_t c = 0; c < C; ++c) row[c] += d[c];
  }
}

void bucket_by_id(const int32_t* ids, int64_t n, int64_t start, int64_t V, int32_t* order, int32_t* row_start) {
  std::fill(row_start, row_start + V + 1, 0);
  auto row = [&](int64_t i) { return int64_t(ids[i]) - start; };
  for (int64_t i = 0; i < n; ++i)
    if (row(i) >= 0 && row(i) < V) ++row_start[row(i) + 1];
  for (int64_t v = 0; v < V; ++v) row_start[v + 1] += row_start[v];
  std::vector<int32_t> next(row_start, row_start + V);
  for (int64_t i = 0; i < n; ++i)
    if (row(i) >= 0 && row(i) < V) order[next[size_t(row(i))]++] = int32_t(i);
}

template <typename T>
void add_positions_forward(const T* x, const T* table, T* out, int64_t B, int64_t T_, int64_t C) {
  const int64_t row = T_ * C;
#pragma omp parallel for if (B * row > 16384)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < row; ++i) out[b * row + i] = x[b * row + i] + table[i];
}

template void embedding_forward<float>(const float*, const int32_t*, float*, int64_t, int64_t, int64_t, int64_t);
template void embedding_forward<double>(const double*, const int32_t*, double*, int64_t, int64_t, int64_t, int64_t);
template void embedding_backward<float>(const float*, const int32_t*, float*, int64_t, int64_t, int64_t, int64_t);
template void embedding_backward<double>(const double*, const int32_t*, double*, int64_t, int64_t, int64_t, int64_t);
template void add_positions_forward<float>(const float*, const float*, float*, int64_t, int64_t, int64_t);
template void add_positions_forward<double>(const double*, const double*, double*, int64_t, int64_t, int64_t);

}  // namespace eng::cpu
