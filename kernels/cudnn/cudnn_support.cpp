// The host-side half of kernels/cudnn/cudnn.h, compiled in every build: the
// shapes cuDNN's attention takes. No cuDNN call here, so the cpu tests check
// exactly what a GPU run would refuse before reaching cuDNN.
#include <sstream>

#include "kernels/cudnn/cudnn.h"

namespace eng {

std::string SdpaShape::str() const {
  std::ostringstream os;
  os << "B=" << B << " T=" << T << " NH=" << NH << " HS=" << HS << " "
     << (st == gpu::Storage::bf16  ? "bf16"
         : st == gpu::Storage::f16 ? "f16"
                                   : "f32")
     << (mask == gpu::AttentionMask::causal ? " causal" : " full") << (NKV && NKV != NH ? " NKV=" : "")
     << (NKV && NKV != NH ? std::to_string(NKV) : "") << (packed ? " packed qkv" : "");
  return os.str();
}

std::string cudnn_sdpa_unsupported(const SdpaShape& s) {
  if (s.B < 1 || s.T < 1 || s.NH < 1 || s.HS < 1 || s.NKV < 0) return "every size must be at least 1 (" + s.str() + ")";
  if (s.NH % s.kv_heads() != 0)
    return std::to_string(s.kv_heads()) + " K/V heads do not divide the " + std::to_string(s.NH) + " query heads";
  if (s.st == gpu::Storage::f32)
    return "cuDNN's fused attention runs on bf16 or fp16 only, not f32 (use precision O2 or O3)";
  if (s.HS % 8 != 0) return "head size " + std::to_string(s.HS) + " is not a multiple of 8";
  if (s.HS > 128) return "head size " + std::to_string(s.HS) + " is above 128 (the backward's limit on Ampere)";
  return "";
}

}  // namespace eng
