// Counter-based random numbers: value i of stream `seed` is a pure function of
// (seed, i), so any element can be drawn independently, on any device, in
// any order, and a run is reproducible without carrying generator state
// around (the idea behind Philox in cuRAND, here with the SplitMix64 finaliser
// as the mixing function, which passes BigCrush and is a few lines long).
#pragma once
#include <cmath>
#include <cstdint>

namespace eng::rng {

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t bits(uint64_t seed, uint64_t counter) {
  return mix64(mix64(seed + 0x9e3779b97f4a7c15ull) ^ (counter * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
inline float uniform(uint64_t seed, uint64_t counter) {
  return float(bits(seed, counter) >> 40) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller on two 32-bit halves of one draw.
inline float normal(uint64_t seed, uint64_t counter) {
  const uint64_t b = bits(seed, counter);
  const double u1 = (double((b >> 32) & 0xffffffffu) + 1.0) * (1.0 / 4294967297.0);  // (0, 1)
  const double u2 = double(b & 0xffffffffu) * (1.0 / 4294967296.0);
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace eng::rng
