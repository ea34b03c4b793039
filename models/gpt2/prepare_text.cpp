// prepare_text: turns text files into byte-level token files (vocabulary 256:
// each byte is its own token, as a character-level nanoGPT run) with a
// train/validation split. Files are concatenated in the order given; the last
// val_fraction of the bytes becomes val.bin, the rest train.bin.
// Usage: prepare_text OUT_DIR VAL_FRACTION FILE... (a directory argument adds
// its regular files, sorted by name, skipping fortune's *.dat index files).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/token_file.h"

namespace fs = std::filesystem;
using namespace eng;

static void add_file(const fs::path& p, std::vector<uint16_t>& tokens) {
  std::ifstream in(p, std::ios::binary);
  ENGINE_CHECK(in, p.string(), ": cannot open");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (unsigned char c : bytes) tokens.push_back(c);
}

int main(int argc, char** argv) {
  try {
    if (argc < 4 || std::string(argv[1]) == "--help") {
      std::printf(
          "usage: prepare_text OUT_DIR VAL_FRACTION FILE_OR_DIR...\n"
          "Writes OUT_DIR/train.bin and OUT_DIR/val.bin: byte-level uint16 tokens (vocabulary 256).\n"
          "The last VAL_FRACTION (e.g. 0.1) of the concatenated text is the validation split.\n");
      return argc < 4 && !(argc == 2 && std::string(argv[1]) == "--help");
    }
    const fs::path out_dir = argv[1];
    char* end = nullptr;
    const double frac = std::strtod(argv[2], &end);
    ENGINE_CHECK(end && *end == '\0' && frac > 0 && frac < 1, "VAL_FRACTION must be in (0, 1), got '", argv[2], "'");
    std::vector<uint16_t> tokens;
    for (int a = 3; a < argc; ++a) {
      const fs::path p = argv[a];
      ENGINE_CHECK(fs::exists(p), p.string(), ": no such file or directory");
      if (fs::is_directory(p)) {
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(p))
          if (e.is_regular_file() && e.path().extension() != ".dat" && !e.is_symlink()) files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const auto& f : files) add_file(f, tokens);
      } else {
        add_file(p, tokens);
      }
    }
    const size_t n_val = size_t(double(tokens.size()) * frac);
    ENGINE_CHECK(tokens.size() > 1000 && n_val > 256, "only ", tokens.size(), " bytes of text: too little to train on");
    fs::create_directories(out_dir);
    write_token_file((out_dir / "train.bin").string(),
                     std::vector<uint16_t>(tokens.begin(), tokens.end() - std::ptrdiff_t(n_val)));
    write_token_file((out_dir / "val.bin").string(),
                     std::vector<uint16_t>(tokens.end() - std::ptrdiff_t(n_val), tokens.end()));
    std::printf("prepare_text: %zu tokens -> %s/train.bin (%zu), val.bin (%zu)\n", tokens.size(),
                out_dir.string().c_str(), tokens.size() - n_val, n_val);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepare_text: error: %s\n", e.what());
    return 1;
  }
}
