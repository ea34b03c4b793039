// Catch2 entry point, compiled once for all test files.
//
// ENGINE_EMU_DIGEST=FILE appends one line per test case to FILE: its name,
// the number of emu -> cpu copies it made and an FNV-1a hash of their bytes
// in order. scripts/emu_schedules.sh runs the emulated suite under each
// ENGINE_EMU_SCHEDULE and compares these lines: a kernel whose results
// depend on the order of threads or blocks shows up as a changed hash.
// A test case tagged [order_dependent] reads back results that vary with
// the order by design (float atomics: the ladder's naive layernorm
// backward); its line says so instead of a hash.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/device.h"

namespace {

uint64_t g_hash = 0;
uint64_t g_copies = 0;

void observe(const void* bytes, size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) g_hash = (g_hash ^ p[i]) * 0x100000001b3ull;
  ++g_copies;
}

struct ReadbackDigest : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    file_ = std::getenv("ENGINE_EMU_DIGEST");
    if (!file_ || !*file_) return;
    g_hash = 0xcbf29ce484222325ull, g_copies = 0;
    order_dependent_ = false;
    for (const std::string& tag : info.lcaseTags) order_dependent_ = order_dependent_ || tag == "order_dependent";
    eng::set_emu_readback_observer(observe);
  }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    TestEventListenerBase::testCaseEnded(stats);
    if (!file_ || !*file_) return;
    eng::set_emu_readback_observer(nullptr);
    if (FILE* f = std::fopen(file_, "a")) {
      char hash[32];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(g_hash));
      std::fprintf(f, "%s\t%llu\t%s\n", stats.testInfo.name.c_str(), static_cast<unsigned long long>(g_copies),
                   order_dependent_ ? "order-dependent" : hash);
      std::fclose(f);
    }
  }

 private:
  const char* file_ = nullptr;
  bool order_dependent_ = false;
};

}  // namespace

CATCH_REGISTER_LISTENER(ReadbackDigest)
