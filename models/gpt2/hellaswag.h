// HellaSwag (Zellers et al. 2019) as llm.c and lm-eval score it: for each
// example, the context followed by each ending, the ending's tokens scored
// by the model's cross-entropy; the prediction is the ending of the lowest
// mean loss over its tokens (acc_norm, the figure llm.c reports and GPT-2
// reproductions compare), or of the lowest summed loss (acc).
// The file is the jsonl of the HellaSwag validation split (hellaswag_val.jsonl
// as llm.c downloads it, or lm-eval's rows): one object a line with "ctx"
// (a string), "endings" (two or more strings) and "label" (an integer, or
// its digits as a string). Each ending is tokenized as " " + ending after the
// context (GPT-2's tokens carry their leading space), as llm.c does. An
// example longer than block_size loses context tokens from its start.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "models/gpt2/gpt2.h"

namespace eng::models {

struct HellaSwagExample {
  std::vector<int32_t> ctx;
  std::vector<std::vector<int32_t>> endings;
  int label = 0;
};

struct HellaSwagScore {
  int64_t index = 0;  // the example's line, from 0
  int label = 0, pred = 0, pred_norm = 0;
  std::vector<double> sum_loss, avg_loss;  // per ending
};

// Reads and tokenizes FILE; limit > 0 keeps the first limit examples. A
// malformed line is a UserError naming the file, the line and the key.
std::vector<HellaSwagExample> load_hellaswag(const std::string& path, const text::Tokenizer& tok, int64_t limit = 0);

// Scores examples first, first + stride, ... (dp rank r of n: first r,
// stride n), `batch` examples a forward (their rows padded to the longest).
std::vector<HellaSwagScore> score_hellaswag(const GPT2& model, const std::vector<HellaSwagExample>& examples,
                                            int64_t first, int64_t stride, int64_t batch,
                                            const Autocast& ac = Autocast());

struct HellaSwagTally {
  double examples = 0, correct = 0, correct_norm = 0;  // doubles: summed over ranks by a host all-reduce
};
HellaSwagTally tally(const std::vector<HellaSwagScore>& scores);

}  // namespace eng::models
