// The kernel ladders' rungs (kernels/cuda/ladder_*.cu: the naive versions
// docs/kernels walks through) under the emulator against the cpu reference
// kernels, f32, at ragged shapes: sizes that are not multiples of a warp, a
// 16 x 16 tile or a 256-thread block, transposed GEMM operands, more rows
// than one block, and a causal and an unmasked attention with q_offset 0.
// The workbench (bench/kernels --emu --impl naive,smem) runs them again
// beside the shipped kernels.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/ladder.h"
#include "tests/kernels/emu_check.h"

using namespace eng;
using namespace eng::test;

namespace {
Tensor empty_on(const Shape& s, Device d) { return Tensor::empty(s, DType::f32, d); }
}  // namespace

TEST_CASE("ladder gemm: naive and shared-memory tiles match OpenBLAS, every transpose", "[emu][kernels]") {
  const int64_t M = 37, N = 21, K = 45;
  for (Trans ta : {Trans::N, Trans::T})
    for (Trans tb : {Trans::N, Trans::T})
      for (bool smem : {false, true}) {
        INFO((smem ? "smem" : "naive") << " ta " << int(ta) << " tb " << int(tb));
        GemmCall g;
        g.ta = ta, g.tb = tb, g.M = M, g.N = N, g.K = K;
        g.lda = ta == Trans::N ? K : M, g.ldb = tb == Trans::N ? N : K, g.ldc = N;
        const Tensor a = Tensor::randn(ta == Trans::N ? Shape{M, K} : Shape{K, M}, 1);
        const Tensor b = Tensor::randn(tb == Trans::N ? Shape{K, N} : Shape{N, K}, 2);
        Tensor ref = empty_on({M, N}, kCPU);
        cpu::gemm_call<float>(g, a.data<float>(), b.data<float>(), ref.data<float>());
        const Tensor ae = a.to(kEmu), be = b.to(kEmu), ce = empty_on({M, N}, kEmu);
        if (smem)
          ENGINE_GPU_CALL(kEmu, ladder_gemm_smem, g, ae.data<float>(), be.data<float>(), ce.data<float>(), nullptr);
        else
          ENGINE_GPU_CALL(kEmu, ladder_gemm_naive, g, ae.data<float>(), be.data<float>(), ce.data<float>(), nullptr);
        CHECK_CLOSE(values(ce.to(kCPU)), values(ref), 1e-4, 1e-4);
      }
}

TEST_CASE("ladder layernorm: one thread per row, then a warp per row, forward, match the cpu reference",
          "[emu][kernels]") {
  const int64_t N = 300, C = 37;  // more rows than one 256-thread block
  // A mean far from 0 against a small spread: the two-pass variance matters.
  const Tensor x = add(Tensor::randn({N, C}, 3, 0.5f), Tensor::full({N, C}, 30.f));
  const Tensor w = Tensor::randn({C}, 4), b = Tensor::randn({C}, 5);
  Tensor out = empty_on({N, C}, kCPU), mean = empty_on({N}, kCPU), rstd = empty_on({N}, kCPU);
  cpu::layernorm_forward(x.data<float>(), w.data<float>(), b.data<float>(), out.data<float>(), mean.data<float>(),
                         rstd.data<float>(), N, C, 1e-5);
  const Tensor xe = x.to(kEmu), we = w.to(kEmu), be = b.to(kEmu);
  for (bool warp : {false, true}) {
    INFO((warp ? "warp" : "naive"));
    Tensor oe = empty_on({N, C}, kEmu), me = empty_on({N}, kEmu), re = empty_on({N}, kEmu);
    if (warp)
      ENGINE_GPU_CALL(kEmu, ladder_layernorm_forward_warp, xe.data<float>(), we.data<float>(), be.data<float>(),
                      oe.data<float>(), me.data<float>(), re.data<float>(), N, C, 1e-5, nullptr);
    else
      ENGINE_GPU_CALL(kEmu, ladder_layernorm_forward_naive, xe.data<float>(), we.data<float>(), be.data<float>(),
                      oe.data<float>(), me.data<float>(), re.data<float>(), N, C, 1e-5, nullptr);
    CHECK_CLOSE(values(oe.to(kCPU)), values(out), 1e-4, 1e-4);
    CHECK_CLOSE(values(me.to(kCPU)), values(mean), 1e-5, 1e-5);
    CHECK_CLOSE(values(re.to(kCPU)), values(rstd), 1e-4, 1e-4);
  }
}

// dw and db are float atomics' sums over 300 rows, in whatever order the
// threads run: their last bits change with the emulator's schedule, as on a
// GPU from run to run ([order_dependent]: tests/main.cpp's digest, which
// scripts/emu_schedules.sh compares across schedules, skips its hash).
TEST_CASE("ladder layernorm: the naive and the warp backward with atomics match the cpu reference",
          "[emu][kernels][order_dependent]") {
  const int64_t N = 300, C = 37;
  const Tensor x = add(Tensor::randn({N, C}, 3, 0.5f), Tensor::full({N, C}, 30.f));
  const Tensor w = Tensor::randn({C}, 4), dout = Tensor::randn({N, C}, 6);
  Tensor out = empty_on({N, C}, kCPU), mean = empty_on({N}, kCPU), rstd = empty_on({N}, kCPU);
  cpu::layernorm_forward(x.data<float>(), w.data<float>(), Tensor::zeros({C}).data<float>(), out.data<float>(),
                         mean.data<float>(), rstd.data<float>(), N, C, 1e-5);
  Tensor dx = empty_on({N, C}, kCPU), dw = empty_on({C}, kCPU), db = empty_on({C}, kCPU);
  cpu::layernorm_backward(dout.data<float>(), x.data<float>(), w.data<float>(), mean.data<float>(), rstd.data<float>(),
                          dx.data<float>(), dw.data<float>(), db.data<float>(), N, C);
  const Tensor xe = x.to(kEmu), we = w.to(kEmu), de = dout.to(kEmu);
  // From the cpu's statistics, into dw and db that hold garbage: the launcher zeroes them first.
  const Tensor mc = mean.to(kEmu), rc = rstd.to(kEmu);
  for (bool warp : {false, true}) {
    INFO((warp ? "warp" : "naive"));
    Tensor dxe = empty_on({N, C}, kEmu), dwe = Tensor::full({C}, 7.f).to(kEmu), dbe = Tensor::full({C}, 7.f).to(kEmu);
    if (warp)
      ENGINE_GPU_CALL(kEmu, ladder_layernorm_backward_warp, de.data<float>(), xe.data<float>(), we.data<float>(),
                      mc.data<float>(), rc.data<float>(), dxe.data<float>(), dwe.data<float>(), dbe.data<float>(), N, C,
                      nullptr);
    else
      ENGINE_GPU_CALL(kEmu, ladder_layernorm_backward_naive, de.data<float>(), xe.data<float>(), we.data<float>(),
                      mc.data<float>(), rc.data<float>(), dxe.data<float>(), dwe.data<float>(), dbe.data<float>(), N, C,
                      nullptr);
    CHECK_CLOSE(values(dxe.to(kCPU)), values(dx), 1e-3, 1e-3);
    CHECK_CLOSE(values(dwe.to(kCPU)), values(dw), 1e-4, 1e-4);
    CHECK_CLOSE(values(dbe.to(kCPU)), values(db), 1e-4, 1e-4);
  }
}

TEST_CASE("ladder softmax: one thread per row, causal and not, matches the cpu reference", "[emu][kernels]") {
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const int64_t T = 33, rows = 9 * T;  // nine (T, T) blocks: 297 rows, more than one block
    const Tensor x = Tensor::randn({rows, T}, 8, 5.f);
    Tensor y = empty_on({rows, T}, kCPU);
    cpu::softmax_forward(x.data<float>(), y.data<float>(), rows, T, causal);
    const Tensor xe = x.to(kEmu), ye = empty_on({rows, T}, kEmu);
    ENGINE_GPU_CALL(kEmu, ladder_softmax_forward_naive, xe.data<float>(), ye.data<float>(), rows, T, causal, nullptr);
    CHECK_CLOSE(values(ye.to(kCPU)), values(y), 1e-5, 1e-5);
  }
}

// Rows of 33 (a lane takes two elements, one lane three: the vec rung falls
// back to scalar loads), 36 (16-byte loads, most lanes idle) and 136 (two
// 128-element strides, the second ragged).
TEST_CASE("ladder softmax: a warp per row, scalar and 16-byte loads, causal and not, match the cpu reference",
          "[emu][kernels]") {
  for (int64_t T : {33, 36, 136})
    for (bool causal : {false, true})
      for (bool vec : {false, true}) {
        INFO("T " << T << " causal " << causal << (vec ? " vec" : " warp"));
        const int64_t rows = 3 * T + 5;  // more than a block's 8 rows; a causal row sees row % T + 1 keys
        const Tensor x = Tensor::randn({rows, T}, 8, 5.f);
        Tensor y = empty_on({rows, T}, kCPU);
        cpu::softmax_forward(x.data<float>(), y.data<float>(), rows, T, causal);
        const Tensor xe = x.to(kEmu), ye = empty_on({rows, T}, kEmu);
        if (vec)
          ENGINE_GPU_CALL(kEmu, ladder_softmax_forward_vec, xe.data<float>(), ye.data<float>(), rows, T, causal,
                          nullptr);
        else
          ENGINE_GPU_CALL(kEmu, ladder_softmax_forward_warp, xe.data<float>(), ye.data<float>(), rows, T, causal,
                          nullptr);
        CHECK_CLOSE(values(ye.to(kCPU)), values(y), 1e-5, 1e-5);
      }
}

TEST_CASE("ladder attention: three kernels through global memory match the cpu reference", "[emu][kernels]") {
  const int64_t B = 2, T = 19, NH = 3, HS = 8;
  for (bool causal : {true, false}) {
    INFO("causal " << causal);
    const Tensor q = Tensor::randn({B, T, NH, HS}, 9), k = Tensor::randn({B, T, NH, HS}, 10),
                 v = Tensor::randn({B, T, NH, HS}, 11);
    Tensor out = empty_on({B, T, NH, HS}, kCPU), att = empty_on({B, NH, T, T}, kCPU);
    cpu::attention_forward(q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(), att.data<float>(),
                           cpu::AttentionDims{B, T, T, NH, HS, 0},
                           causal ? cpu::AttentionMask::causal : cpu::AttentionMask::none);
    const Tensor qe = q.to(kEmu), ke = k.to(kEmu), ve = v.to(kEmu);
    Tensor oe = empty_on({B, T, NH, HS}, kEmu), se = empty_on({B, NH, T, T}, kEmu);
    ENGINE_GPU_CALL(kEmu, ladder_attention_forward_naive, qe.data<float>(), ke.data<float>(), ve.data<float>(),
                    oe.data<float>(), se.data<float>(), gpu::AttentionDims{B, T, T, NH, HS, 0},
                    causal ? gpu::AttentionMask::causal : gpu::AttentionMask::none, nullptr);
    CHECK_CLOSE(values(oe.to(kCPU)), values(out), 1e-5, 1e-5);
    CHECK_CLOSE(values(se.to(kCPU)), values(att), 1e-5, 1e-5);  // the probabilities it kept, as the cpu's att
  }
}
