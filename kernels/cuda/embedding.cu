// Embedding lookup and its deterministic backward. Reference:
// kernels/cpu/embedding.cpp; walk-through: docs/kernels/embedding.md.
//   forward:  out[i, :] = w[ids[i] - start, :]   (zeros if ids[i] - start is outside [0, V))
//   backward: dw[v, :]  = sum over positions i with ids[i] == v of dout[i, :]
// The backward is a gather, not a scatter: one block owns whole rows of dw and
// sums the rows of dout that hit them in increasing position order, so there
// are no float atomics and dw is bitwise identical from run to run (a scatter
// with atomicAdd would sum repeated ids in whatever order the blocks ran).
// Conventions: fp32 math whatever the storage T (the backward accumulates in
// fp32 and rounds once); dw is written with =, rows of absent ids get zeros.
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/rowwise.cuh"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

// out = w[ids]. Launch: 1-D grid-stride over the n C output elements, 256
// threads, grid_for(n C / pack); one 16-byte pack per step when kVec.
// Preconditions: ids checked by the engine; kVec only if w and out
// are 16-byte aligned and C % pack == 0, so a pack never straddles two rows.
// bytes = 2 n C sizeof(T) + 4 n (each id is re-read per pack, from cache);
// flops = 0 (a copy).
template <typename T, bool kVec>
__global__ void embedding_forward_kernel(const T* __restrict__ w, const int32_t* __restrict__ ids, T* __restrict__ out,
                                         int64_t n, int64_t C, int64_t start, int64_t V) {
  constexpr int P = kVec ? Pack128<T>::size : 1;
  const int64_t total = n * C;
  const int64_t stride = (int64_t(gridDim.x) * blockDim.x) * P;
  for (int64_t e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * P; e < total; e += stride) {
    const int64_t i = e / C, c = e - i * C, id = int64_t(ids[i]) - start;
    const bool mine = id >= 0 && id < V;
    const T* src = w + id * C + c;
    if constexpr (kVec) {
      Pack128<T> zero;
      for (int k = 0; k < P; ++k) zero.v[k] = from_f32<T>(0.f);
      store128(out + e, mine ? load128(src) : zero);
    } else {
      out[e] = mine ? *src : from_f32<T>(0.f);
    }
  }
}

// dw[v, :] = sum of dout[d_order[j], :] for j in [d_row_start[v], d_row_start[v + 1]).
// With accumulate, dw[v, :] += that sum (summed from 0 first, then added: the
// same bits as a separate backward and an add), and rows no position names
// are not touched: a tied or accumulated table's gradient costs the rows the
// batch uses, not the whole table.
// Launch: grid-stride over the V rows of dw, one block per row, grid_for(V, 1)
// blocks of (32..256) x G threads, G = kEmbeddingGroups (fewer for wide
// rows: G x 256 <= 1024), kEmbeddingGroups * blockDim.x * pack * 4 bytes of
// dynamic shared memory. Each thread of x owns a pack (or one element) of
// channels; group y walks the row's positions j = begin + y, begin + y + G,
// ... in order, and group 0 adds the G sums in y order: a fixed order, so
// dw stays bitwise identical from run to run. (A single group walked them
// all in series: a token that fills a tenth of the batch made one block
// sum thousands of rows alone; the byte tokens of GPT-2's benchmark runs,
// 256 ids for 65,536 positions, took 2.3 ms a step at 5% of HBM on the H200.)
// Preconditions: d_order/d_row_start as built by the engine (embedding.h);
// kVec only if dout is 16-byte aligned, dw aligned to a pack's P values of
// TW (16 bytes, or 32 for a 16-bit dout into f32) and C % pack == 0.
// bytes = n C sizeof(TG) (dout) + V C sizeof(TW) (dw; accumulate: 2 R C sizeof(TW),
// R <= min(n, V) the rows used) + 4 (n + V + 1); flops = n C adds.
constexpr int kEmbeddingGroups = 8;
constexpr int kEmbeddingUnroll = 8;  // a group's rows in flight (16-byte packs)
// One block an SM (the launch bounds' 1): left to itself ptxas held the
// kernel to 32 registers for two, and interleaved the unrolled loads with
// the adds, two rows in flight instead of kEmbeddingUnroll.
// dout in TG, dw in TW: the same type, or a 16-bit dout into an fp32 table
// (GPT-2's, from embedding_positions: no fp32 copy of dout made first); a
// pack is dout's 16 bytes, written as P values of TW (two 16-byte stores
// for bf16 into f32).
template <typename TG, typename TW, bool kVec, bool kAccumulate>
__global__ void __launch_bounds__(1024, 1)
    embedding_backward_kernel(const TG* __restrict__ dout, const int32_t* __restrict__ d_order,
                              const int32_t* __restrict__ d_row_start, TW* __restrict__ dw, int64_t V, int64_t C) {
  using T = TG;
  constexpr int P = kVec ? Pack128<T>::size : 1;
  using Out = rowwise::RawVec<P, TW>;  // P values of dw, one or two 16-byte stores
  DYNAMIC_SMEM(float, sums);           // [groups][blockDim.x * P]
  const int groups = int(blockDim.y), g = int(threadIdx.y), width = int(blockDim.x) * P;
  for (int64_t v = blockIdx.x; v < V; v += gridDim.x) {
    const int32_t begin = d_row_start[v], end = d_row_start[v + 1];
    if (kAccumulate && begin == end) continue;  // the same for every thread of the block
    TW* row = dw + v * C;
    for (int64_t base = 0; base < C; base += width) {  // the same trip count for every thread: barriers below
      const int64_t c = base + int64_t(threadIdx.x) * P;
      float acc[P] = {};
      if (c < C) {
        int32_t j = begin + g;
        if constexpr (kVec) {
          // kEmbeddingUnroll positions' rows in flight at once, added in the
          // order of j as one at a time would: the same bits, a round trip to
          // DRAM a kEmbeddingUnroll rows (a row's id, then its dout) instead
          // of one a row, on the long buckets of frequent ids above all.
          for (; end - j > (kEmbeddingUnroll - 1) * groups; j += kEmbeddingUnroll * groups) {  // no j + ... overflow
            int32_t at[kEmbeddingUnroll];
#pragma unroll
            for (int u = 0; u < kEmbeddingUnroll; ++u) at[u] = d_order[j + u * groups];
            Pack128<T> p[kEmbeddingUnroll];
#pragma unroll
            for (int u = 0; u < kEmbeddingUnroll; ++u) p[u] = load128(dout + int64_t(at[u]) * C + c);
#pragma unroll
            for (int u = 0; u < kEmbeddingUnroll; ++u)
              for (int k = 0; k < P; ++k) acc[k] += to_f32(p[u].v[k]);
          }
        }
        for (; j < end; j += groups) {
          const T* src = dout + int64_t(d_order[j]) * C + c;
          if constexpr (kVec) {
            const Pack128<T> p = load128(src);
            for (int k = 0; k < P; ++k) acc[k] += to_f32(p.v[k]);
          } else {
            acc[0] += to_f32(*src);
          }
        }
      }
      float* mine = sums + g * width + int(threadIdx.x) * P;
      for (int k = 0; k < P; ++k) mine[k] = acc[k];
      __syncthreads();
      if (g == 0 && c < C) {
        for (int k = 0; k < P; ++k) acc[k] = 0.f;
        for (int y = 0; y < groups; ++y)
          for (int k = 0; k < P; ++k) acc[k] += sums[y * width + int(threadIdx.x) * P + k];
        if constexpr (kVec) {
          Out p;
          if constexpr (kAccumulate) {
            const Out old = load_wide<Out>(row + c);
            for (int k = 0; k < P; ++k) acc[k] = to_f32(old.v[k]) + acc[k];
          }
          for (int k = 0; k < P; ++k) p.v[k] = from_f32<TW>(acc[k]);
          store_wide(row + c, p);
        } else {
          if constexpr (kAccumulate) acc[0] = to_f32(row[c]) + acc[0];
          row[c] = from_f32<TW>(acc[0]);
        }
      }
      __syncthreads();  // sums is refilled by the next chunk or row
    }
  }
}

// out[b, t, c] = x[b, t, c] + table[first + t, c], TI in and TO out (the sum
// rounded once to TO). Launch: 1-D grid-stride over the B T C elements, V at a
// time (V = 4 when C % 4 == 0 and x, table and out allow it, else 1), 256
// threads, grid_for(B T C / V, 256).
// bytes = B T C (sizeof(TI) + sizeof(TO)) + T C sizeof(TI); flops = B T C.
template <typename TI, typename TO, int V>
__global__ void add_positions_kernel(const TI* __restrict__ x, const TI* __restrict__ table, TO* __restrict__ out,
                                     int64_t T, int64_t C, int64_t first, int64_t total) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x * V;
  for (int64_t e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V; e < total; e += stride) {
    const int64_t c = e % C, t = (e / C) % T;
    const TI* row = table + (first + t) * C + c;
#pragma unroll
    for (int k = 0; k < V; ++k) out[e + k] = from_f32<TO>(to_f32(x[e + k]) + to_f32(row[k]));
  }
}

void add_positions_forward(gpu::Storage st, gpu::Storage out_st, const void* x, const void* table, void* out, int64_t B,
                           int64_t T, int64_t C, int64_t first, void* stream) {
  const int64_t total = B * T * C;
  if (total == 0) return;
  ENGINE_CHECK(first >= 0 && T >= 0, "add_positions_forward: positions ", first, "..", first + T);
  const bool vec = C % 4 == 0 && aligned16(x, table, out);
  dispatch_storage(st, [&]<typename TI>() {
    dispatch_storage(out_st, [&]<typename TO>() {
      auto launch = [&]<int V>() {
        LAUNCH_KERNEL((add_positions_kernel<TI, TO, V>), grid_for(total / V, 256), 256, 0, as_stream(stream),
                      static_cast<const TI*>(x), static_cast<const TI*>(table), static_cast<TO*>(out), T, C, first,
                      total);
      };
      if (vec)
        launch.template operator()<4>();
      else
        launch.template operator()<1>();
    });
  });
}

void embedding_forward(gpu::Storage st, const void* w, const int32_t* ids, void* out, int64_t n, int64_t C,
                       int64_t start, int64_t V, void* stream) {
  if (n == 0 || C == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    constexpr int P = Pack128<T>::size;
    const T* pw = static_cast<const T*>(w);
    T* po = static_cast<T*>(out);
    if (aligned16(w, out) && C % P == 0)
      LAUNCH_KERNEL(embedding_forward_kernel<T, true>, grid_for(n * C / P, 256), 256, 0, as_stream(stream), pw, ids, po,
                    n, C, start, V);
    else
      LAUNCH_KERNEL(embedding_forward_kernel<T, false>, grid_for(n * C, 256), 256, 0, as_stream(stream), pw, ids, po, n,
                    C, start, V);
  });
}

// out[i, :] = w[ids[i] - start, :] + pos[first + i % T, :], TI in and TO out
// (the sum rounded once to TO): the token embedding gathered and the position
// embedding added in one pass, as llm.c's encoder_forward, with the autocast
// cast fused. The same values as embedding_forward then add_positions_forward
// (the gather is a copy, the sum the same fp32 add and rounding), without
// the (n, C) tensor in TI between them. An id outside [start, start + V)
// gives its position row alone (a zero token row). Launch: 1-D grid-stride
// over the n C elements, 256 threads, P at a time (P = a 16-byte pack of TI
// when C % P == 0 and w, pos and out allow it, else 1), grid_for(n C / P, 256).
// bytes = n C (sizeof(TI) + sizeof(TO)) + T C sizeof(TI) + 4 n; flops = n C.
template <typename TI, typename TO, int P>
__global__ void embedding_positions_kernel(const TI* __restrict__ w, const int32_t* __restrict__ ids,
                                           const TI* __restrict__ pos, TO* __restrict__ out, int64_t n, int64_t T,
                                           int64_t C, int64_t start, int64_t V, int64_t first) {
  using In = rowwise::RawVec<P, TI>;
  using Out = rowwise::RawVec<P, TO>;
  const int64_t total = n * C, stride = int64_t(gridDim.x) * blockDim.x * P;
  for (int64_t e = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * P; e < total; e += stride) {
    const int64_t i = e / C, c = e - i * C, id = int64_t(ids[i]) - start;
    const In p = load_wide<In>(pos + (first + i % T) * C + c);
    In x{};
    if (id >= 0 && id < V) x = load_wide<In>(w + id * C + c);
    Out o;
    for (int k = 0; k < P; ++k) o.v[k] = from_f32<TO>(to_f32(x.v[k]) + to_f32(p.v[k]));
    store_wide(out + e, o);
  }
}

void embedding_positions_forward(gpu::Storage st, gpu::Storage out_st, const void* w, const int32_t* ids,
                                 const void* pos, void* out, int64_t n, int64_t T, int64_t C, int64_t start, int64_t V,
                                 int64_t first, void* stream) {
  if (n == 0 || C == 0) return;
  dispatch_storage(st, [&]<typename TI>() {
    dispatch_storage(out_st, [&]<typename TO>() {
      constexpr int P = Pack128<TI>::size;
      auto launch = [&]<int kP>() {
        LAUNCH_KERNEL((embedding_positions_kernel<TI, TO, kP>), grid_for(n * C / kP, 256), 256, 0, as_stream(stream),
                      static_cast<const TI*>(w), ids, static_cast<const TI*>(pos), static_cast<TO*>(out), n, T, C,
                      start, V, first);
      };
      if (C % P == 0 && aligned16(w, pos) && aligned_to(out, P * sizeof(TO)))
        launch.template operator()<P>();
      else
        launch.template operator()<1>();
    });
  });
}

// The launch of embedding_backward_kernel<TG, TW>, its block and its grid.
template <typename T, typename TW>
void embedding_backward_as(const void* dout, const int32_t* d_order, const int32_t* d_row_start, void* dw,
                           bool accumulate, int64_t V, int64_t C, void* stream) {
  constexpr int P = Pack128<T>::size;
  const T* pd = static_cast<const T*>(dout);
  TW* pw = static_cast<TW*>(dw);
  // dw's P values a pack are 32 bytes in f32 from 16-bit dout: aligned so.
  const bool vec = aligned16(dout, dw) && aligned_to(dw, P * sizeof(TW)) && C % P == 0;
  const int64_t lanes = vec ? C / P : C;
  const unsigned width = unsigned(lanes >= 256 ? 256 : (lanes + 31) / 32 * 32);
  const unsigned groups = unsigned(kEmbeddingGroups) * width <= 1024 ? unsigned(kEmbeddingGroups) : 1024 / width;
  const dim3 block(width, groups);
  const size_t smem = size_t(groups) * width * (vec ? P : 1) * sizeof(float);  // at most 32 KiB
  auto launch = [&]<bool kVec, bool kAcc>() {
    LAUNCH_KERNEL((embedding_backward_kernel<T, TW, kVec, kAcc>), grid_for(V, 1), block, smem, as_stream(stream), pd,
                  d_order, d_row_start, pw, V, C);
  };
  if (vec && accumulate)
    launch.template operator()<true, true>();
  else if (vec)
    launch.template operator()<true, false>();
  else if (accumulate)
    launch.template operator()<false, true>();
  else
    launch.template operator()<false, false>();
}

void embedding_backward(gpu::Storage st, gpu::Storage dw_st, const void* dout, const int32_t* d_order,
                        const int32_t* d_row_start, void* dw, bool accumulate,
                        int64_t /*n: d_row_start[V], for the cost*/, int64_t V, int64_t C, void* stream) {
  if (V == 0 || C == 0) return;
  ENGINE_CHECK(dw_st == st || dw_st == gpu::Storage::f32, "embedding_backward: a ", int(st), " gradient into a ",
               int(dw_st), " table (the same type, or fp32)");
  dispatch_storage(st, [&]<typename T>() {
    if (dw_st == st)
      embedding_backward_as<T, T>(dout, d_order, d_row_start, dw, accumulate, V, C, stream);
    else
      embedding_backward_as<T, float>(dout, d_order, d_row_start, dw, accumulate, V, C, stream);
  });
}

}  // namespace eng::ENGINE_GPU_NS
