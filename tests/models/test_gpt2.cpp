// GPT-2 model checks that need no PyTorch: the loss at initialisation is
// close to ln(vocab) (the init is small, so logits start near uniform),
// parameter count and names match Hugging Face's, and activation
// checkpointing (recompute) leaves loss and gradients bitwise unchanged.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "kernels/rng.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_io.h"
#include "tests/test_util.h"

using namespace eng;
using namespace eng::models;
using eng::test::random_ids;

namespace {
GPT2Config tiny() {
  GPT2Config c;
  c.vocab_size = 256, c.block_size = 32, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
  return c;
}
}  // namespace

TEST_CASE("gpt2: loss at initialisation is close to ln(vocab)", "[gpt2]") {
  GPT2 m(tiny(), 1);
  const double loss = m.loss(random_ids(4, 32, 256, 1), random_ids(4, 32, 256, 2)).item();
  CHECK(std::fabs(loss - std::log(256.0)) < 0.05);
}

TEST_CASE("gpt2: Hugging Face parameter names and count", "[gpt2]") {
  GPT2 m(tiny(), 1);
  std::vector<std::string> names;
  for (auto& [n, p] : m.named_parameters()) names.push_back(n);
  REQUIRE(names.size() == 2 + 12 * 2 + 2);
  CHECK(names[0] == "wte.weight");
  CHECK(names[1] == "wpe.weight");
  CHECK(names[2] == "h.0.ln_1.weight");
  CHECK(names[4] == "h.0.attn.c_attn.weight");
  CHECK(names.back() == "ln_f.bias");
  // 12 C^2 + 13 C per layer, V*C + T*C embeddings, 2C final layernorm.
  const int64_t C = 32, L = 2;
  CHECK(m.num_parameters() == L * (12 * C * C + 13 * C) + 256 * C + 32 * C + 2 * C);
  CHECK(gpt2_is_conv1d_weight("h.1.mlp.c_proj.weight"));
  CHECK(!gpt2_is_conv1d_weight("h.1.mlp.c_proj.bias"));
}

TEST_CASE("gpt2: recompute gives the same loss and gradients", "[gpt2][checkpoint]") {
  GPT2 m(tiny(), 3);
  const Tensor x = random_ids(2, 16, 256, 3), y = random_ids(2, 16, 256, 4);
  auto run = [&](Recompute r) {
    m.zero_grad();
    Tensor loss = m.loss(x, y, r);
    loss.backward();
    std::vector<std::vector<double>> g{{double(loss.item())}};
    for (auto& [n, p] : m.named_parameters()) g.push_back(test::values(p.grad()));
    return g;
  };
  CHECK(run(Recompute::no) == run(Recompute::yes));
}

TEST_CASE("gpt2: bad shapes are named errors", "[gpt2][errors]") {
  GPT2 m(tiny(), 1);
  CHECK_THROWS_WITH(m.forward(random_ids(1, 33, 256, 1)),
                    Catch::Contains("sequence length 33") && Catch::Contains("block_size 32"));
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 4})), Catch::Contains("i32"));
  GPT2Config bad = tiny();
  bad.n_head = 5;
  CHECK_THROWS_WITH(GPT2(bad, 1), Catch::Contains("n_embd (32)") && Catch::Contains("n_head (5)"));
}

TEST_CASE("gpt2: the checkpoint's config.json names token ids inside the vocabulary", "[gpt2]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "engine_test_ckpt_config").string();
  std::filesystem::remove_all(dir);
  for (int64_t vocab : {int64_t(256), int64_t(50257)}) {
    GPT2Config c = tiny();
    c.vocab_size = vocab;
    GPT2 m(c, 1);
    AdamW opt(decay_groups(m.parameters(), 0.1), 1e-3);
    save_checkpoint(dir, m, opt, 0, nlohmann::json::object());
    std::ifstream in(dir + "/config.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j.at("vocab_size").get<int64_t>() == vocab);
    for (const char* k : {"bos_token_id", "eos_token_id"}) {
      const int64_t id = j.at(k).get<int64_t>();
      CHECK(id >= 0);
      CHECK(id < vocab);
    }
    if (vocab == 50257) CHECK(j.at("eos_token_id").get<int64_t>() == 50256);  // GPT-2's <|endoftext|>
  }
  std::filesystem::remove_all(dir);
}
