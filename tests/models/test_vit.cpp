// ViT checks that need no PyTorch: the patch layout (patchify puts pixel
// (c, i*p + u, j*p + v) at token i*w + j, element (c, u, v); unpatchify reads
// (u, v, c) and inverts it), timm's parameter names and the count, config and
// input errors that name the field, and one block giving the same output, loss
// and gradients on cpu and emu (the CUDA kernels emulated, non-causal attention
// included), and bf16 autocast (O2) close to fp32.
#include <string>
#include <vector>

#include "models/vit/vit.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;
using Catch::Matchers::Contains;

namespace {
ViTConfig tiny(ViTHead head) {
  ViTConfig c;
  c.in_channels = 3, c.img_h = 12, c.img_w = 8, c.patch = 4;
  c.embed = 12, c.depth = 2, c.heads = 3, c.mlp_ratio = 4;
  c.head = head, c.classes = 5, c.out_channels = 2;
  return c;
}

Tensor labels(int64_t B, int64_t classes, Device dev) {
  std::vector<int32_t> v(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) v[size_t(i)] = int32_t((3 * i + 1) % classes);
  return Tensor::from_ints(v, {B}, dev);
}
}  // namespace

TEST_CASE("vit: patchify's layout, and unpatchify after the (row, column, channel) permutation is the identity",
          "[vit]") {
  const int64_t B = 2, C = 3, H = 8, W = 12, p = 4, h = H / p, w = W / p, N = h * w, pp = p * p;
  std::vector<float> px(size_t(B * C * H * W));
  for (size_t i = 0; i < px.size(); ++i) px[i] = float(i);  // every pixel distinct
  const Tensor images = Tensor::from_vector(px, {B, C, H, W});
  const Tensor tokens = models::patchify(images, p);
  REQUIRE(tokens.shape() == Shape{B, N, C * pp});
  const std::vector<double> t = test::values(tokens);

  // Token i*w + j holds patch (i, j), flattened (channel, row, column); and the
  // same values reordered to (row, column, channel), the dense head's layout.
  std::vector<float> rcc(t.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t u = 0; u < p; ++u)
            for (int64_t v = 0; v < p; ++v) {
              const int64_t n = i * w + j;
              const double pixel = px[size_t(((b * C + c) * H + i * p + u) * W + j * p + v)];
              const double got = t[size_t((b * N + n) * C * pp + (c * p + u) * p + v)];
              if (got != pixel)
                FAIL("b " << b << " patch (" << i << ", " << j << ") c " << c << " (" << u << ", " << v << ")");
              rcc[size_t((b * N + n) * pp * C + (u * p + v) * C + c)] = float(got);
            }
  const Tensor back = models::unpatchify(Tensor::from_vector(rcc, {B, N, pp * C}), p, C, H, W);
  REQUIRE(back.shape() == images.shape());
  CHECK(test::values(back) == test::values(images));
}

TEST_CASE("vit: timm's parameter names and count", "[vit]") {
  for (ViTHead head : {ViTHead::classify, ViTHead::dense}) {
    const ViTConfig c = tiny(head);
    ViT m(c, 1);
    const auto params = m.named_parameters();
    std::vector<std::string> names;
    for (const auto& [n, p] : params) names.push_back(n);
    const std::vector<std::string> block0{
        "blocks.0.norm1.weight",     "blocks.0.norm1.bias",     "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
        "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias", "blocks.0.norm2.weight",    "blocks.0.norm2.bias",
        "blocks.0.mlp.fc1.weight",   "blocks.0.mlp.fc1.bias",   "blocks.0.mlp.fc2.weight",  "blocks.0.mlp.fc2.bias"};
    REQUIRE(names.size() == size_t(3 + 12 * c.depth + 4));
    CHECK(names[0] == "patch_embed.proj.weight");
    CHECK(names[1] == "patch_embed.proj.bias");
    CHECK(names[2] == "pos_embed.weight");
    CHECK(std::vector<std::string>(names.begin() + 3, names.begin() + 15) == block0);
    CHECK(names[15] == "blocks.1.norm1.weight");
    const std::vector<std::string> tail(names.end() - 4, names.end());
    CHECK(tail == std::vector<std::string>{"norm.weight", "norm.bias", "head.weight", "head.bias"});

    const int64_t E = c.embed, N = c.tokens(), K = head == ViTHead::classify ? c.classes : 16 * c.out_channels;
    CHECK(params[0].second.shape() == Shape{E, c.in_channels * 16});  // (embed, C*p*p): Conv2d's weight flattened
    CHECK(params[2].second.shape() == Shape{N, E});
    CHECK(params.back().second.shape() == Shape{K});
    // Per block: two layernorms 4E, qkv 3E^2 + 3E, proj E^2 + E, MLP 8E^2 + 5E.
    CHECK(m.num_parameters() ==
          (c.in_channels * 16 * E + E) + N * E + c.depth * (12 * E * E + 13 * E) + 2 * E + (E * K + K));
  }
}

TEST_CASE("vit: config errors name the field", "[vit][errors]") {
  ViTConfig c = tiny(ViTHead::classify);
  c.patch = 5;  // divides neither 12 nor 8
  CHECK_THROWS_WITH(ViT(c, 1), Contains("patch 5") && Contains("12 x 8"));
  c = tiny(ViTHead::classify);
  c.img_w = 10;  // 4 divides the height only
  CHECK_THROWS_WITH(ViT(c, 1), Contains("patch 4") && Contains("12 x 10"));
  c = tiny(ViTHead::classify);
  c.heads = 5;
  CHECK_THROWS_WITH(ViT(c, 1), Contains("embed (12)") && Contains("heads (5)"));
  c = tiny(ViTHead::classify);
  c.classes = 1;
  CHECK_THROWS_WITH(ViT(c, 1), Contains("classes"));
  c = tiny(ViTHead::dense);
  c.out_channels = 0;
  CHECK_THROWS_WITH(ViT(c, 1), Contains("out_channels"));
}

TEST_CASE("vit: a wrong image shape or target is an error naming both shapes", "[vit][errors]") {
  ViT m(tiny(ViTHead::classify), 1);
  // Height and width swapped.
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3, 8, 12})), Contains("(B, 3, 12, 8)") && Contains("(2, 3, 8, 12)"));
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({3, 12, 8})), Contains("(B, 3, 12, 8)") && Contains("(3, 12, 8)"));
  CHECK_THROWS_WITH(m.loss(Tensor::zeros({2, 3, 12, 8}), Tensor::zeros({2})), Contains("labels must be i32"));
  ViT d(tiny(ViTHead::dense), 1);
  CHECK_THROWS_WITH(d.loss(Tensor::zeros({2, 3, 12, 8}), Tensor::zeros({2, 2, 8, 12})),
                    Contains("(2, 2, 8, 12)") && Contains("(2, 2, 12, 8)"));
}

// One block on cpu and on emu (the CUDA kernels emulated). fp32 throughout;
// tolerance 1e-4 relative, 1e-5 absolute, as the GPT-2 check (tiled GEMMs,
// block reductions and the online softmax sum in other orders than OpenBLAS and
// the serial cpu loops). 18 tokens are one full attention tile (16) and a
// ragged one, and head size 6 is padded, so the ragged paths run.
//
// The whole model on emu (the CUDA kernels under the emulator: non-causal
// attention, the token mean of kernels/cuda/reduce.cu, the MSE) against the cpu.
TEST_CASE("vit: one block gives the same output, loss and gradients on cpu and emu, both heads", "[vit][emu][e2e]") {
  const Device emu{DeviceType::emu, 0};
  for (ViTHead head : {ViTHead::classify, ViTHead::dense}) {
    INFO((head == ViTHead::classify ? "classify" : "dense"));
    ViTConfig c;
    c.in_channels = 3, c.img_h = 24, c.img_w = 12, c.patch = 4;  // 6 x 3 = 18 tokens: a full tile and a partial one
    c.embed = 18, c.heads = 3, c.depth = 1, c.mlp_ratio = 4;
    c.head = head, c.classes = 5, c.out_channels = 2;
    const int64_t B = 3;
    const ViT cpu_model(c, 3), emu_model(c, 3, emu);
    const Tensor images = Tensor::randn({B, c.in_channels, c.img_h, c.img_w}, 11);
    const Tensor targets = head == ViTHead::classify ? labels(B, c.classes, kCPU)
                                                     : Tensor::randn({B, c.out_channels, c.img_h, c.img_w}, 12);
    const Tensor out_cpu = cpu_model.forward(images);
    const Tensor out_emu = emu_model.forward(images.to(emu));
    REQUIRE(out_emu.device() == emu);
    CHECK_CLOSE(test::values(out_emu.to(kCPU)), test::values(out_cpu), 1e-5, 1e-4);
    const Tensor loss_cpu = cpu_model.loss(images, targets);
    const Tensor loss_emu = emu_model.loss(images.to(emu), targets.to(emu));
    REQUIRE(loss_emu.device() == emu);
    CHECK_CLOSE(test::values(loss_emu.to(kCPU)), test::values(loss_cpu), 1e-5, 1e-4);
    loss_cpu.backward();
    loss_emu.backward();
    test::check_same_grads(cpu_model, emu_model, 1e-5, 1e-4);
  }
}

// O2: bf16 weights and activations with fp32 master weights; the patch
// embedding (bf16) plus the fp32 position table is summed in fp32 as torch
// promotes it. The loss stays within bf16's rounding of the fp32 loss.
TEST_CASE("vit: O2 autocast runs both heads and stays close to fp32", "[vit][precision]") {
  for (ViTHead head : {ViTHead::classify, ViTHead::dense}) {
    INFO((head == ViTHead::classify ? "classify" : "dense"));
    const ViTConfig c = tiny(head);
    const ViT m(c, 7);
    const int64_t B = 2;
    const Tensor x = Tensor::randn({B, c.in_channels, c.img_h, c.img_w}, 3);
    const Tensor y = head == ViTHead::classify ? labels(B, c.classes, kCPU)
                                               : Tensor::randn({B, c.out_channels, c.img_h, c.img_w}, 4);
    const double l0 = m.loss(x, y).item(), l2 = m.loss(x, y, Autocast(Precision::O2)).item();
    CHECK(l2 == Approx(l0).epsilon(2e-2));
    CHECK(l2 != l0);  // bf16 rounding happened (on the cpu it is emulated in fp32 storage)
  }
}
