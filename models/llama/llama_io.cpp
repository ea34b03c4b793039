// Llama safetensors export/import, config.json both ways, checkpoints.
#include "models/llama/llama_io.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"
#include "io/safetensors.h"

namespace eng::models {

namespace {
namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
std::string prefix_of(const std::string& name, const std::string& suffix) {
  return name.substr(0, name.size() - suffix.size());
}

// How a packed parameter splits into Hugging Face's tensors: (name suffix, rows).
struct Part {
  std::string suffix;
  int64_t rows;
};
std::vector<Part> parts_of(const std::string& name, const LlamaConfig& c) {
  const int64_t HS = c.head_size();
  if (ends_with(name, "self_attn.qkv_proj.weight"))
    return {{"self_attn.q_proj.weight", c.n_head * HS},
            {"self_attn.k_proj.weight", c.n_kv_head * HS},
            {"self_attn.v_proj.weight", c.n_kv_head * HS}};
  if (ends_with(name, "mlp.gate_up_proj.weight"))
    return {{"mlp.gate_proj.weight", c.hidden()}, {"mlp.up_proj.weight", c.hidden()}};
  return {};
}
const char* packed_suffix(const std::string& name) {
  return ends_with(name, "self_attn.qkv_proj.weight") ? "self_attn.qkv_proj.weight" : "mlp.gate_up_proj.weight";
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> llama_hf_split(const LlamaConfig& c,
                                                           const std::vector<std::pair<std::string, Tensor>>& named) {
  NoGradGuard ng;
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : named) {
    const Tensor t = p.detach().to(kCPU);
    const std::vector<Part> parts = parts_of(name, c);
    if (parts.empty()) {
      out.emplace_back(name, t);
      continue;
    }
    int64_t row = 0;
    for (const Part& part : parts) {
      out.emplace_back(prefix_of(name, packed_suffix(name)) + part.suffix, narrow(t, 0, row, part.rows));
      row += part.rows;
    }
  }
  return out;
}

std::vector<std::pair<std::string, Tensor>> llama_hf_tensors(const Llama& model) {
  return llama_hf_split(model.config(), model.named_parameters());
}

void save_llama_weights(const std::string& path, const Llama& model) {
  save_safetensors(path, llama_hf_tensors(model), {{"format", "pt"}});
}

void load_llama_weights(const std::string& path, Llama& model) {
  NoGradGuard ng;
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "model.safetensors").string() : path;
  ENGINE_USER_CHECK(fs::exists(file), file,
                    ": no such file (a Llama safetensors file, or a directory holding "
                    "model.safetensors; sharded checkpoints are not read yet)");
  const SafetensorsFile f = load_safetensors(file);
  auto fetch = [&](const std::string& name, const Shape& shape) {
    ENGINE_USER_CHECK(f.has(name), file, ": missing tensor '", name, "'");
    const Tensor& t = f.get(name);
    ENGINE_USER_CHECK(is_floating(t.dtype()), file, ": tensor '", name, "' has dtype ", dtype_name(t.dtype()));
    ENGINE_USER_CHECK(t.shape() == shape, file, ": tensor '", name, "' has shape ", shape_str(t.shape()),
                      ", the model needs ", shape_str(shape), " (the file's shape differs from the run's)");
    return t.to(DType::f32);
  };
  for (auto& [name, p] : model.named_parameters()) {
    const std::vector<Part> parts = parts_of(name, model.config());
    Tensor t;
    if (parts.empty()) {
      t = fetch(name, p.shape());
    } else {
      std::vector<Tensor> pieces;
      for (const Part& part : parts)
        pieces.push_back(fetch(prefix_of(name, packed_suffix(name)) + part.suffix, {part.rows, p.size(1)}));
      t = concat(pieces, 0);
    }
    Tensor dst = p;
    dst.copy_from(t.to(p.device()));
  }
}

nlohmann::json llama_hf_config(const LlamaConfig& c) {
  nlohmann::json j{{"architectures", {"LlamaForCausalLM"}},
                   {"model_type", "llama"},
                   {"vocab_size", c.vocab_size},
                   {"hidden_size", c.n_embd},
                   {"intermediate_size", c.hidden()},
                   {"num_hidden_layers", c.n_layer},
                   {"num_attention_heads", c.n_head},
                   {"num_key_value_heads", c.n_kv_head},
                   {"head_dim", c.head_size()},
                   {"max_position_embeddings", c.block_size},
                   {"rms_norm_eps", c.rms_eps},
                   {"rope_theta", c.rope.theta},
                   {"rope_scaling", nullptr},
                   {"hidden_act", "silu"},
                   {"attention_bias", false},
                   {"mlp_bias", false},
                   {"tie_word_embeddings", c.tie_embeddings},
                   {"torch_dtype", "float32"},
                   {"bos_token_id", nullptr},
                   {"eos_token_id", nullptr}};
  if (c.rope.factor > 0)
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope.factor},
                         {"low_freq_factor", c.rope.low_freq_factor},
                         {"high_freq_factor", c.rope.high_freq_factor},
                         {"original_max_position_embeddings", c.rope.original_max_positions}};
  return j;
}

LlamaConfig llama_config_from_hf(const std::string& path) {
  const std::string file = fs::is_directory(path) ? (fs::path(path) / "config.json").string() : path;
  nlohmann::json j;
  try {
    std::ifstream in(file);
    ENGINE_USER_CHECK(in.good(), file, ": cannot read (a Hugging Face config.json)");
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ENGINE_USER_FAIL(file, ": bad JSON: ", e.what());
  }
  // Each key's type checked before use, so a null or a string where a
  // number belongs is one line naming the file and the key.
  auto integer_in = [&](const nlohmann::json& o, const std::string& where, const char* key) {
    ENGINE_USER_CHECK(o.contains(key) && o[key].is_number_integer(), file, ": missing integer '", where, key, "'");
    return o[key].get<int64_t>();
  };
  auto number_in = [&](const nlohmann::json& o, const std::string& where, const char* key, std::optional<double> dflt) {
    if (dflt && (!o.contains(key) || o[key].is_null())) return *dflt;
    ENGINE_USER_CHECK(o.contains(key) && o[key].is_number(), file, ": '", where, key, "' is not a number");
    return o[key].get<double>();
  };
  auto integer = [&](const char* key) { return integer_in(j, "", key); };
  auto number = [&](const char* key, double dflt) { return number_in(j, "", key, dflt); };
  auto boolean = [&](const char* key, bool dflt) {
    if (!j.contains(key) || j[key].is_null()) return dflt;
    ENGINE_USER_CHECK(j[key].is_boolean(), file, ": '", key, "' is not true or false");
    return j[key].get<bool>();
  };
  auto text = [&](const nlohmann::json& o, const char* key, const std::string& dflt) {
    if (!o.contains(key) || o[key].is_null()) return dflt;
    ENGINE_USER_CHECK(o[key].is_string(), file, ": '", key, "' is not a string");
    return o[key].get<std::string>();
  };
  ENGINE_USER_CHECK(j.is_object(), file, ": not a JSON object (a Hugging Face config.json)");
  const std::string type = text(j, "model_type", "");
  ENGINE_USER_CHECK(type == "llama", file, ": model_type '", type, "', not llama");
  LlamaConfig c;
  c.vocab_size = integer("vocab_size");
  c.n_embd = integer("hidden_size");
  c.ffn_hidden = integer("intermediate_size");
  c.n_layer = integer("num_hidden_layers");
  c.n_head = integer("num_attention_heads");
  c.n_kv_head = j.contains("num_key_value_heads") ? integer("num_key_value_heads") : c.n_head;
  c.block_size = integer("max_position_embeddings");
  c.rms_eps = number("rms_norm_eps", 1e-6);
  c.rope.theta = number("rope_theta", 10000.0);
  c.tie_embeddings = boolean("tie_word_embeddings", false);
  ENGINE_USER_CHECK(!boolean("attention_bias", false) && !boolean("mlp_bias", false), file,
                    ": attention_bias / mlp_bias: Llama's projections here have no biases");
  const std::string act = text(j, "hidden_act", "silu");
  ENGINE_USER_CHECK(act == "silu", file, ": hidden_act '", act, "': only silu (SwiGLU)");
  ENGINE_USER_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0, file, ": hidden_size ", c.n_embd,
                    " is not a multiple of num_attention_heads ", c.n_head);
  if (j.contains("head_dim") && !j["head_dim"].is_null())
    ENGINE_USER_CHECK(integer("head_dim") == c.n_embd / c.n_head, file, ": head_dim ", integer("head_dim"),
                      " differs from hidden_size / num_attention_heads = ", c.n_embd / c.n_head, " (not supported)");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const nlohmann::json& r = j["rope_scaling"];
    ENGINE_USER_CHECK(r.is_object(), file, ": rope_scaling is not an object");
    const std::string rt = text(r, "rope_type", text(r, "type", ""));
    ENGINE_USER_CHECK(rt == "llama3", file, ": rope_scaling type '", rt, "': only llama3's (or none)");
    c.rope.factor = number_in(r, "rope_scaling.", "factor", std::nullopt);  // required, as transformers requires it
    c.rope.low_freq_factor = number_in(r, "rope_scaling.", "low_freq_factor", std::nullopt);
    c.rope.high_freq_factor = number_in(r, "rope_scaling.", "high_freq_factor", std::nullopt);
    c.rope.original_max_positions = integer_in(r, "rope_scaling.", "original_max_position_embeddings");
  }
  try {
    c.validate();
  } catch (const Error& e) {
    ENGINE_USER_FAIL(file, ": ", e.what());
  }
  return c;
}

void save_llama_checkpoint(const std::string& dir, const Llama& model,
                           const std::vector<std::pair<std::string, Tensor>>& opt_state, int64_t step,
                           const nlohmann::json& config, const nlohmann::json& extra) {
  save_checkpoint_dir(
      dir, [&](const std::string& path) { save_llama_weights(path, model); }, llama_hf_config(model.config()),
      opt_state, step, config, extra);
}

nlohmann::json load_llama_checkpoint(const std::string& dir, Llama& model, Optimizer& opt) {
  return load_checkpoint_dir(
      dir, [&](const std::string& path) { load_llama_weights(path, model); }, opt);
}

}  // namespace eng::models
