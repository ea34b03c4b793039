#include "models/gpt2/hellaswag.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng::models {

std::vector<HellaSwagExample> load_hellaswag(const std::string& path, const text::Tokenizer& tok, int64_t limit) {
  std::ifstream in(path);
  if (!in) throw UserError(cat(path, ": cannot open the HellaSwag file"));
  std::vector<HellaSwagExample> out;
  std::string line;
  auto encode = [&](const std::string& s) {
    std::vector<int> ids;
    tok.encode(s, ids);
    return std::vector<int32_t>(ids.begin(), ids.end());
  };
  for (int64_t no = 1; std::getline(in, line) && (limit <= 0 || int64_t(out.size()) < limit); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = cat(path, ":", no, ": ");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw UserError(where + "not a JSON object (HellaSwag's jsonl: one {\"ctx\", \"endings\", \"label\"} a line)");
    }
    if (!j.is_object() || !j.contains("ctx") || !j["ctx"].is_string())
      throw UserError(where + "no string \"ctx\" (HellaSwag's jsonl: ctx, endings, label)");
    if (!j.contains("endings") || !j["endings"].is_array() || j["endings"].size() < 2)
      throw UserError(where + "no \"endings\" array of two or more strings");
    HellaSwagExample ex;
    ex.ctx = encode(j["ctx"].get<std::string>());
    for (const auto& e : j["endings"]) {
      if (!e.is_string()) throw UserError(where + "an ending that is not a string");
      std::string spaced(1, ' ');  // GPT-2's words carry their leading space
      spaced += e.get<std::string>();
      ex.endings.push_back(encode(spaced));
      if (ex.endings.back().empty()) throw UserError(where + "an empty ending");
    }
    const nlohmann::json& l = j.value("label", nlohmann::json());
    const std::string digits = l.is_string() ? l.get<std::string>() : std::string();
    const bool is_digits =
        !digits.empty() && digits.size() < 10 && digits.find_first_not_of("0123456789") == std::string::npos;
    if (!l.is_number_integer() && !is_digits) throw UserError(where + "no integer \"label\"");
    const int64_t label = l.is_number_integer() ? l.get<int64_t>() : std::stoll(digits);
    if (label < 0 || label >= int64_t(ex.endings.size()))
      throw UserError(cat(where, "label ", label, " for ", ex.endings.size(), " endings"));
    ex.label = int(label);
    if (ex.ctx.empty()) throw UserError(where + "an empty \"ctx\" (an ending's first token would have no score)");
    out.push_back(std::move(ex));
  }
  if (out.empty()) throw UserError(cat(path, ": no examples"));
  return out;
}

std::vector<HellaSwagScore> score_hellaswag(const GPT2& model, const std::vector<HellaSwagExample>& examples,
                                            int64_t first, int64_t stride, int64_t batch, const Autocast& ac) {
  NoGradGuard ng;
  const int64_t ctx_max = model.config().block_size;
  std::vector<int64_t> mine;
  for (int64_t i = first; i < int64_t(examples.size()); i += stride) mine.push_back(i);
  std::vector<HellaSwagScore> out;
  for (size_t b0 = 0; b0 < mine.size(); b0 += size_t(batch)) {
    const size_t b1 = std::min(mine.size(), b0 + size_t(batch));
    // Rows: context + ending, cut from the left to block_size; the targets
    // are the next tokens where they are the ending's, -100 elsewhere.
    std::vector<std::vector<int32_t>> rows;
    std::vector<size_t> ending_from;  // the row's first ending position
    for (size_t e = b0; e < b1; ++e) {
      const HellaSwagExample& ex = examples[size_t(mine[e])];
      for (const auto& end : ex.endings) {
        std::vector<int32_t> r = ex.ctx;
        r.insert(r.end(), end.begin(), end.end());
        size_t from = ex.ctx.size();
        if (int64_t(r.size()) > ctx_max) {
          const size_t cut = r.size() - size_t(ctx_max);
          r.erase(r.begin(), r.begin() + std::ptrdiff_t(cut));
          from = from > cut ? from - cut : 1;  // an ending longer than the window keeps its last tokens
        }
        from = std::max<size_t>(from, 1);  // the first token has no prediction
        rows.push_back(std::move(r));
        ending_from.push_back(from);
      }
    }
    size_t T = 0;
    for (const auto& r : rows) T = std::max(T, r.size());
    std::vector<int32_t> ids(rows.size() * T, 0), targets(rows.size() * T, -100);
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t t = 0; t < rows[r].size(); ++t) {
        ids[r * T + t] = rows[r][t];
        if (t + 1 < rows[r].size() && t + 1 >= ending_from[r]) targets[r * T + t] = rows[r][t + 1];
      }
    const Device dev = model.device();
    const int64_t R = int64_t(rows.size()), Ti = int64_t(T);
    Tensor logits = model.forward(Tensor::from_ints(ids, {R, Ti}, dev), Recompute::no, ac, AttentionImpl::ours);
    if (logits.dtype() != DType::f32) logits = ac.f32(logits);
    size_t row = 0;
    for (size_t e = b0; e < b1; ++e) {
      const HellaSwagExample& ex = examples[size_t(mine[e])];
      HellaSwagScore s;
      s.index = mine[e];
      s.label = ex.label;
      for (size_t k = 0; k < ex.endings.size(); ++k, ++row) {
        const double n = double(rows[row].size() - ending_from[row]);
        const std::vector<int32_t> tg(targets.begin() + std::ptrdiff_t(row * T),
                                      targets.begin() + std::ptrdiff_t((row + 1) * T));
        const double mean =
            cross_entropy(narrow(logits, 0, int64_t(row) * Ti, Ti), Tensor::from_ints(tg, {Ti}, dev)).item();
        s.avg_loss.push_back(mean);
        s.sum_loss.push_back(mean * n);
      }
      s.pred = int(std::min_element(s.sum_loss.begin(), s.sum_loss.end()) - s.sum_loss.begin());
      s.pred_norm = int(std::min_element(s.avg_loss.begin(), s.avg_loss.end()) - s.avg_loss.begin());
      out.push_back(std::move(s));
    }
  }
  return out;
}

HellaSwagTally tally(const std::vector<HellaSwagScore>& scores) {
  HellaSwagTally t;
  for (const auto& s : scores) {
    t.examples += 1;
    t.correct += s.pred == s.label;
    t.correct_norm += s.pred_norm == s.label;
  }
  return t;
}

}  // namespace eng::models
