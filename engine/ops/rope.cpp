// The rotary position embedding (Llama's): the cos/sin table as Hugging
// Face's LlamaRotaryEmbedding computes it (fp32, with Llama 3's frequency
// scaling when asked), and rope_, which turns the q and k heads of a packed
// qkv in place. On emu/cuda: kernels/cuda/rope.cu; on the cpu:
// kernels/cpu/rope.cpp. The backward turns the gradient back into a new
// tensor (the gradient may be shared with another branch: never written).
#include <cmath>
#include <vector>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/rope.h"

namespace eng {
using namespace detail;

void RopeOptions::validate() const {
  ENGINE_CHECK(theta > 0, "rope: rope_theta must be > 0, got ", theta);
  if (factor == 0) return;
  ENGINE_CHECK(factor > 0 && low_freq_factor > 0 && high_freq_factor > low_freq_factor && original_max_positions > 0,
               "rope: llama3 rope_scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and "
               "original_max_position_embeddings > 0, got factor ",
               factor, ", low_freq_factor ", low_freq_factor, ", high_freq_factor ", high_freq_factor,
               ", original_max_position_embeddings ", original_max_positions);
}

Tensor rope_table(int64_t positions, int64_t head_size, const RopeOptions& o, Device dev) {
  o.validate();
  ENGINE_CHECK(positions > 0 && head_size > 0 && head_size % 2 == 0, "rope_table: ", positions,
               " positions of head size ", head_size, " (positive, the head size even)");
  const int64_t half = head_size / 2;
  // The frequencies in fp32 as transformers computes them: base ** (2i / HS)
  // in fp32, its reciprocal, and Llama 3's smoothing between the low- and
  // high-frequency wavelengths (_compute_llama3_parameters).
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = 1.0f / std::pow(float(o.theta), float(2 * i) / float(head_size));
  if (o.factor > 0) {
    const float old_len = float(o.original_max_positions), lo = float(o.low_freq_factor),
                hi = float(o.high_freq_factor), f = float(o.factor);
    const float low_wavelen = old_len / lo, high_wavelen = old_len / hi;
    for (float& v : inv) {
      const float wavelen = 2.0f * float(M_PI) / v;
      const float scaled = wavelen > low_wavelen ? v / f : v;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        const float smooth = (old_len / wavelen - lo) / (hi - lo);
        v = (1.0f - smooth) * scaled / f + smooth * scaled;
      } else {
        v = scaled;
      }
    }
  }
  // Angles as fp32 products (position x frequency, transformers' matmul of
  // K = 1); cos and sin of the fp32 angle.
  Tensor table = Tensor::empty({positions, head_size}, DType::f32);
  float* p = table.data<float>();
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(t) * inv[size_t(i)];
      p[t * head_size + i] = float(std::cos(double(angle)));
      p[t * head_size + half + i] = float(std::sin(double(angle)));
    }
  return dev.type == DeviceType::cpu ? table : table.to(dev);
}

namespace {
// Turns (direction +1) or turns back (-1) the first `rot` heads of x's rows
// into out (the rest copied when out is not x).
void rope_run(const Tensor& x, const Tensor& out, const Tensor& table, int64_t rot, int64_t pos_offset, int direction) {
  const int64_t B = x.size(0), T = x.size(1), HS = table.size(1), W = x.numel() / std::max<int64_t>(B * T, 1);
  const int64_t copy = x.data_ptr() == out.data_ptr() ? 0 : W / HS - rot;
  if (on_gpu(x)) {
    const gpu::RopeDims d{B, T, HS, W, rot, copy, pos_offset};
    ENGINE_GPU_CALL(x.device(), rope_apply, storage_of(x.dtype()), x.data_ptr(), out.data_ptr(), table.data<float>(), d,
                    direction, nullptr);
  } else {
    const cpu::RopeDims d{B, T, HS, W, rot, copy, pos_offset};
    dispatch_float(x.dtype(), [&]<typename F>() {
      cpu::rope_apply(x.data<F>(), out.data<F>(), table.data<float>(), d, direction);
    });
  }
}
}  // namespace

Tensor rope_(const Tensor& x, const Tensor& table, int64_t rot_heads, int64_t pos_offset) {
  check_float_inputs("rope_", {x}, GpuKernel::yes);
  ENGINE_CHECK(table.defined() && table.dtype() == DType::f32 && table.ndim() == 2 && table.device() == x.device(),
               "rope_: the table must be fp32 (positions, head size) on ", x.device().str(), ", got ",
               table.defined() ? table.desc() : std::string("none"));
  ENGINE_CHECK(x.ndim() >= 3, "rope_: x must be (B, T, heads...), got ", x.desc());
  const int64_t B = x.size(0), T = x.size(1), HS = table.size(1), W = x.numel() / std::max<int64_t>(B * T, 1);
  ENGINE_CHECK(W % HS == 0 && rot_heads >= 0 && rot_heads * HS <= W, "rope_: ", rot_heads, " heads of ", HS,
               " to turn in rows of ", W, " values: ", x.desc());
  ENGINE_CHECK(pos_offset >= 0 && pos_offset + T <= table.size(0), "rope_: positions ", pos_offset, "..",
               pos_offset + T - 1, " lie beyond the table's ", table.size(0), " (the model's max positions)");
  ENGINE_CHECK(!(x.requires_grad() && x.is_leaf()), "rope_: x ", x.desc(),
               " is a leaf that requires grad; turning it in place would lose its values (rotate a copy)");
  Tensor out = x.detach();
  rope_run(x, out, table, rot_heads, pos_offset, +1);
  record("rope", out, {x}, [table, rot_heads, pos_offset](const Tensor& g, const std::vector<bool>&) {
    Tensor dx = empty_like(g);
    rope_run(g, dx, table, rot_heads, pos_offset, -1);
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace eng
