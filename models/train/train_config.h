// The train program's configuration: one flat table of options, each with a
// type, a default and a help line. Values come from the defaults, then a
// JSON config file, then command-line overrides (--key value or --key=value),
// later sources winning. Unknown keys and wrongly typed values are errors
// naming the file (or "command line") and the key, with the closest known key
// suggested, so a typo never silently trains with a default.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace eng::models {

struct OptionSpec {
  std::string key;
  nlohmann::json default_value;  // its JSON type is the option's type
  std::string help;
  // Who reads it: "gpt2", "llama" or "vit" alone; "lm" both language
  // models (gpt2 and llama); "" every model.
  std::string model = "";
};

const std::vector<OptionSpec>& train_options();
bool option_read_by(const OptionSpec& s, const std::string& model);

class TrainConfig {
 public:
  TrainConfig();  // defaults
  void merge_file(const std::string& path);
  void set_from_cli(const std::string& key, const std::string& value);
  // Parses argv: "--config FILE" first (anywhere), then every other --key.
  // Returns false when --help was asked (the caller prints help and exits 0).
  bool parse_args(int argc, char** argv);

  int64_t i(const std::string& key) const;
  double f(const std::string& key) const;
  bool b(const std::string& key) const;
  std::string s(const std::string& key) const;
  const nlohmann::json& json() const { return values_; }
  std::string help_text() const;
  // Options set (in a config file or on the command line, whatever the
  // value) that `model` does not read: a user who sets --patch for GPT-2 is
  // told, not ignored. "" when none.
  std::string foreign_options(const std::string& model) const;
  bool is_set(const std::string& key) const;  // by a config file or the command line

 private:
  // raw: the text given on the command line, for messages ("" from a file).
  void set(const std::string& key, const nlohmann::json& v, const std::string& source, const std::string& raw = "");
  nlohmann::json values_;
  std::vector<std::string> set_keys_;  // keys a file or the command line set
};

}  // namespace eng::models
