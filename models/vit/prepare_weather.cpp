// prepare_weather: writes a SYNTHETIC, ERA5-like forecasting set in the layout
// of the NERSC "Deep Learning at Scale" tutorial, to develop the ViT and the
// loader without 100s of GB of reanalysis:
//   <out>/{train,valid}/<year>.h5  fields (T, C, H, W) float32, contiguous (the
//       reader's pread path), and lat (H) float32 degrees, cell centres from
//       +90 to -90. Years from 2000, train first; 6-hour steps, year y covers
//       days 365 (y - 2000) + [0, T / 4).
//   <out>/stats.h5  mean, std (C) and climatology (C, H, W) float32, over the
//       train years: the climatology is each grid point's time mean, the
//       reference the anomaly correlation (ACC) of a forecast is taken from.
//   <out>/stats/  the same as the tutorial keeps them, NumPy files:
//       global_means.npy, global_stds.npy (1, C, 1, 1), time_means.npy (1, C, H, W).
// A toy atmosphere on the lat-lon grid, periodic in longitude, in levels of
// four channels, c = 4 l + k, k = z, u, v, t:
//   z  geopotential height (m): a zonal jet profile whose strength cycles;
//      zonal waves, each in its own mid-latitude band (so none shears out),
//      carried east by the jet; vortex-like blobs that drift with it, turn,
//      and live about a week;  u, v  geostrophic winds (m/s) from z;
//   t  temperature (K): a tracer carried by (u, v) and relaxed to a seasonal
//      profile, plus a diurnal heating bump that follows the sun.
// Lower levels: lower z, wave phase tilted westward, stronger blobs and
// diurnal cycle. AR(1) noise in a few smooth modes on z and t, small next to
// the 6-hour change: a model can beat persistence but not reach zero error.
// Everything is a pure function of --seed: counter-based draws (kernels/rng.h)
// keyed by what they are for, so all years share the dynamics' constants and
// any year can be made alone (after kSpinup steps for the tracer to settle).
// One time step (C, H, W) is held at a time, with the climatology's sums (one
// double per point, 41 MB at the --nersc shape), so that shape streams.
// Exit 2: bad command line; 1: failure while writing (the Writer renames a
// file into place only when it is complete).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/hdf5_write.h"
#include "io/npy.h"
#include "kernels/rng.h"

using namespace eng;

namespace {

constexpr double kPi = 3.14159265358979323846, kDeg = kPi / 180;
constexpr double kRadius = 6.371e6;      // m
constexpr double kGOverF = 9.81 / 1e-4;  // g / f with mid-latitude f; m/s per unit slope
constexpr double kStepDays = 0.25, kStepSeconds = 6 * 3600.0;
constexpr int kSpinup = 80, kFirstYear = 2000, kWaves = 8, kBlobs = 10, kModes = 12;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string out = "data/weather";
  int64_t C = 4, H = 32, W = 64, train_years = 2, valid_years = 1, steps = 300, seed = 1;
  bool help = false;
};

const char* kHelp =
    "usage: prepare_weather [options]\n"
    "Writes synthetic ERA5-like OUT/{train,valid}/<year>.h5 (fields (T, C, H, W) float32, lat (H)) and\n"
    "OUT/stats.h5 (per-channel mean, std; climatology (C, H, W): each point's time mean; all over\n"
    "train), and the same as the NERSC tutorial's NumPy files, OUT/stats/global_means.npy,\n"
    "global_stds.npy (1, C, 1, 1) and time_means.npy (1, C, H, W). Years from 2000, 6-hour steps.\n"
    "  --out DIR          output directory (default data/weather)\n"
    "  --channels C       channels, in levels of four: z, u, v, t (default 4)\n"
    "  --height H         latitudes, at least 4 (default 32)\n"
    "  --width W          longitudes, at least 4 (default 64)\n"
    "  --train_years N    training years 2000 .. (default 2)\n"
    "  --valid_years N    validation years after them (default 1)\n"
    "  --steps T          6-hour steps per year, at least 2 (default 300 = 75 days, 9.8 MB a file)\n"
    "  --seed S           random seed, >= 0 (default 1)\n"
    "  --nersc            the tutorial's shape: 20 channels, 360 x 720, 1460 steps (explicit options win)\n"
    "  --help             this text\n";

int64_t parse_int(const std::string& flag, const std::string& v, int64_t min) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) throw UsageError(flag + ": expected an integer, got '" + v + "'");
  if (x < min) throw UsageError(flag + " must be at least " + std::to_string(min) + ", got " + v);
  return x;
}

// --nersc only changes defaults: it is applied before the other options, so
// explicit ones win whatever their order.
Options parse_options(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a)
    if (std::string(argv[a]) == "--nersc") o.C = 20, o.H = 360, o.W = 720, o.steps = 1460;
  // flag -> (value, minimum)
  const std::map<std::string, std::pair<int64_t*, int64_t>> ints = {{"--channels", {&o.C, 1}},
                                                                    {"--height", {&o.H, 4}},
                                                                    {"--width", {&o.W, 4}},
                                                                    {"--steps", {&o.steps, 2}},
                                                                    {"--train_years", {&o.train_years, 1}},
                                                                    {"--valid_years", {&o.valid_years, 1}},
                                                                    {"--seed", {&o.seed, 0}}};
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    const auto it = ints.find(flag);
    if (flag == "--help" || flag == "--nersc") {
      o.help = o.help || flag == "--help";
    } else if (flag != "--out" && it == ints.end()) {
      throw UsageError("unknown option '" + flag + "' (see --help)");
    } else if (a + 1 >= argc) {
      throw UsageError(flag + " needs a value");
    } else if (flag == "--out") {
      o.out = argv[++a];
    } else {
      *it->second.first = parse_int(flag, argv[++a], it->second.second);
    }
  }
  return o;
}

// Counter-based draws: the key names what a number is for, so no generator
// state is carried and any year or step can be produced alone.
enum class Tag : uint64_t { wave = 1, mode, slot, blob, noise, index };
uint64_t key(Tag tag, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return rng::mix64(uint64_t(tag) ^ rng::mix64(a ^ rng::mix64(b ^ rng::mix64(c))));
}
double uniform(uint64_t seed, uint64_t k, int i, double lo, double hi) {
  return lo + (hi - lo) * rng::uniform(seed, k + uint64_t(i));
}

// Jet: eastward drift in degrees of longitude per day, fastest at 45 N/S.
double jet(double lat_deg) {
  const double d = (std::abs(lat_deg) - 45) / 15;
  return 2 + 14 * std::exp(-d * d);
}

// Zonal wavenumber m in a Gaussian band (lat0, width: degrees) of amplitude
// amp (m), moving at speed (deg/day at jet index 1); its amplitude swings by
// 35% at mod_freq (rad/day).
struct Wave {
  double m, lat0, width, amp, speed, phase, mod_freq, mod_phase;
};

// The grid and the constants of the dynamics, shared by every year.
struct Model {
  int64_t H = 0, W = 0, C = 0, levels = 0;
  uint64_t seed = 0;
  std::vector<double> lat, lon;  // degrees
  std::vector<Wave> waves;
  std::vector<double> slot_life, slot_offset;          // days
  double index_freq[2] = {}, index_phase[2] = {};      // jet strength cycle, north and south
  std::vector<std::vector<float>> mode_row, mode_col;  // noise basis q: mode_row[q][i] * mode_col[q][j]
};

Model make_model(const Options& o) {
  Model M;
  M.H = o.H, M.W = o.W, M.C = o.C, M.levels = (o.C + 3) / 4, M.seed = uint64_t(o.seed);
  for (int64_t i = 0; i < M.H; ++i) M.lat.push_back(90.0 - 180.0 * (double(i) + 0.5) / double(M.H));
  for (int64_t j = 0; j < M.W; ++j) M.lon.push_back(360.0 * double(j) / double(M.W));
  for (int k = 0; k < kWaves; ++k) {
    const uint64_t r = key(Tag::wave, uint64_t(k));
    const double lat0 = (k % 2 ? -1 : 1) * uniform(M.seed, r, 0, 30, 60);
    M.waves.push_back({double(5 + k / 2), lat0, uniform(M.seed, r, 2, 8, 14), uniform(M.seed, r, 3, 100, 170),
                       jet(lat0) * uniform(M.seed, r, 4, 0.8, 1.1), uniform(M.seed, r, 5, 0, 2 * kPi),
                       2 * kPi / uniform(M.seed, r, 6, 8, 30), uniform(M.seed, r, 7, 0, 2 * kPi)});
  }
  for (int b = 0; b < kBlobs; ++b) {
    M.slot_life.push_back(uniform(M.seed, key(Tag::slot, uint64_t(b)), 0, 5, 10));
    M.slot_offset.push_back(uniform(M.seed, key(Tag::slot, uint64_t(b)), 1, 0, 10));
  }
  for (int h = 0; h < 2; ++h) {
    M.index_freq[h] = 2 * kPi / uniform(M.seed, key(Tag::index, uint64_t(h)), 0, 15, 35);
    M.index_phase[h] = uniform(M.seed, key(Tag::index, uint64_t(h)), 1, 0, 2 * kPi);
  }
  for (int q = 0; q < kModes; ++q) {
    const uint64_t r = key(Tag::mode, uint64_t(q));
    const double m = std::floor(uniform(M.seed, r, 0, 0, 5)), n = std::floor(uniform(M.seed, r, 1, 1, 5));
    const double a = uniform(M.seed, r, 2, 0, 2 * kPi), b = uniform(M.seed, r, 3, 0, 2 * kPi);
    M.mode_row.emplace_back(), M.mode_col.emplace_back();
    for (double la : M.lat)
      M.mode_row[q].push_back(float((m > 0 ? std::cos(la * kDeg) : 1) * std::cos(n * la * kDeg + b)));
    for (double lo : M.lon) M.mode_col[q].push_back(float(std::cos(m * lo * kDeg + a)));
  }
  return M;
}

// The jet's strength cycles (a "zonal index cycle", 15-35 days, per
// hemisphere): it scales the zonal z gradient, hence u, and the speed of all
// the jet carries, so a model must read the speed off the u field instead of
// learning one shift per latitude. travel() is its integral: days at index 1.
constexpr double kIndexAmp = 0.35;
double jet_index(const Model& M, double lat, double t) {
  return 1 + kIndexAmp * std::sin(M.index_freq[lat < 0] * t + M.index_phase[lat < 0]);
}
double travel(const Model& M, double lat, double t) {
  const double w = M.index_freq[lat < 0], p = M.index_phase[lat < 0];
  return t + kIndexAmp / w * (std::cos(p) - std::cos(w * t + p));
}

// Solar declination (degrees) on day t of the 365-day model year.
double declination(double t) { return 23.44 * std::sin(2 * kPi * (t - 80) / 365); }

// z without noise: zonal profile + waves + blobs (precomputed, weighted).
void geopotential(const Model& M, int l, double t, const std::vector<float>& blobs, float* z) {
  const double base = 5500 * std::pow(0.75, l), grad = 120 * std::pow(0.8, l), dec = declination(t) * kDeg;
  const double index[2] = {jet_index(M, 1, t), jet_index(M, -1, t)};
  for (int64_t i = 0; i < M.H; ++i) {
    const double la = M.lat[i] * kDeg;
    const float zonal =
        float(base + grad + grad * index[M.lat[i] < 0] * (std::tanh((45 - std::abs(M.lat[i])) / 12) - 1) +
              60 * std::sin(la) * std::sin(dec));
    for (int64_t j = 0; j < M.W; ++j) z[i * M.W + j] = zonal + float(1 + 0.25 * l) * blobs[i * M.W + j];
  }
  std::vector<float> col(static_cast<size_t>(M.W));
  for (const Wave& w : M.waves) {
    // Each level's wave leads the one above by 0.3 rad: the westward tilt with height of baroclinic waves.
    const double shift = w.speed * travel(M, w.lat0, t),
                 amp = w.amp * std::pow(0.85, l) * (1 + 0.35 * std::sin(w.mod_freq * t + w.mod_phase));
    for (int64_t j = 0; j < M.W; ++j)
      col[j] = float(amp * std::cos(w.m * (M.lon[j] - shift) * kDeg + w.phase + 0.3 * l));
    for (int64_t i = 0; i < M.H; ++i) {
      const double d = (M.lat[i] - w.lat0) / w.width;
      if (d * d > 30) continue;
      const float env = float(std::exp(-d * d / 2));
      for (int64_t j = 0; j < M.W; ++j) z[i * M.W + j] += env * col[j];
    }
  }
}

// Vortex-like blobs: slot b restarts every slot_life days with fresh
// parameters (keyed by slot and generation), grows and decays as sin^2 of its
// age, drifts with the jet, wanders in latitude and turns its long axis.
void add_blobs(const Model& M, double t, std::vector<float>& f) {
  std::fill(f.begin(), f.end(), 0.0f);
  for (int b = 0; b < kBlobs; ++b) {
    const double life = M.slot_life[b], age = (t + M.slot_offset[b]) / life;
    const double gen = std::floor(age), days = (age - gen) * life;
    const uint64_t r = key(Tag::blob, uint64_t(b), uint64_t(int64_t(gen) + (int64_t(1) << 40)));
    const double lat0 = (uniform(M.seed, r, 0, 0, 1) < 0.5 ? -1 : 1) * uniform(M.seed, r, 1, 25, 65);
    const double lat = std::clamp(lat0 + uniform(M.seed, r, 2, -3, 3) * days, -75.0, 75.0);
    const double lon =
        uniform(M.seed, r, 3, 0, 360) + 0.8 * jet(lat0) * (travel(M, lat0, t) - travel(M, lat0, t - days));
    const double amp = uniform(M.seed, r, 4, -220, 160) * std::pow(std::sin(kPi * (age - gen)), 2);
    const double sx = uniform(M.seed, r, 5, 6, 12), sy = uniform(M.seed, r, 6, 5, 9);
    const double ang = uniform(M.seed, r, 7, 0, kPi) + uniform(M.seed, r, 8, -60, 60) * kDeg * days;
    const double ca = std::cos(ang), sa = std::sin(ang), coslat = std::cos(lat * kDeg);
    for (int64_t i = 0; i < M.H; ++i) {
      const double dy = M.lat[i] - lat;
      if (std::abs(dy) > 4 * std::max(sx, sy)) continue;
      for (int64_t j = 0; j < M.W; ++j) {
        const double dx = (std::remainder(M.lon[j] - lon, 360.0)) * coslat;
        const double x = (ca * dx + sa * dy) / sx, y = (-sa * dx + ca * dy) / sy, r2 = x * x + y * y;
        if (r2 < 16) f[i * M.W + j] += float(amp * std::exp(-r2 / 2));
      }
    }
  }
}

// Geostrophic winds from z by centred differences (one-sided at the edge
// rows). g/f uses one f for all latitudes, its sign turned by tanh(lat / 15)
// so the southern hemisphere's westerlies come out westerly and the equator
// has no singularity; 1/cos(lat) is capped near the poles.
void winds(const Model& M, const float* z, float* u, float* v) {
  const double dy = kRadius * kPi / double(M.H), dx = kRadius * 2 * kPi / double(M.W);
  for (int64_t i = 0; i < M.H; ++i) {
    const double la = M.lat[i], s = kGOverF * std::tanh(la / 15);
    const int64_t n = std::max<int64_t>(i - 1, 0), so = std::min(i + 1, M.H - 1);  // north, south rows
    const double cosl = std::max(std::cos(la * kDeg), 0.25);
    for (int64_t j = 0; j < M.W; ++j) {
      const int64_t e = (j + 1) % M.W, w = (j + M.W - 1) % M.W;
      u[i * M.W + j] = float(-s * (z[n * M.W + j] - z[so * M.W + j]) / (double(so - n) * dy));
      v[i * M.W + j] = float(s * (z[i * M.W + e] - z[i * M.W + w]) / (2 * dx * cosl));
    }
  }
}

// Semi-Lagrangian step: each point takes the bilinearly interpolated value
// where its air was 6 hours ago (periodic in longitude, clamped in latitude).
void advect(const Model& M, const float* u, const float* v, const float* in, float* out) {
  const double rows_per_m = double(M.H) / (kPi * kRadius), cols_per_m = double(M.W) / (2 * kPi * kRadius);
  for (int64_t i = 0; i < M.H; ++i) {
    const double cosl = std::max(std::cos(M.lat[i] * kDeg), 0.1);
    for (int64_t j = 0; j < M.W; ++j) {
      const int64_t p = i * M.W + j;
      const double fi = std::clamp(double(i) + v[p] * kStepSeconds * rows_per_m, 0.0, double(M.H - 1));
      double fj = std::fmod(double(j) - u[p] * kStepSeconds * cols_per_m / cosl, double(M.W));
      if (fj < 0) fj += double(M.W);
      const int64_t i0 = std::min(int64_t(fi), M.H - 2), j0 = int64_t(fj) % M.W, j1 = (j0 + 1) % M.W;
      const double a = fi - double(i0), b = fj - std::floor(fj);
      out[p] = float((1 - a) * ((1 - b) * in[i0 * M.W + j0] + b * in[i0 * M.W + j1]) +
                     a * ((1 - b) * in[(i0 + 1) * M.W + j0] + b * in[(i0 + 1) * M.W + j1]));
    }
  }
}

// Radiative equilibrium temperature of row i (seasonal), and the diurnal
// heating bump, which peaks where the sun is overhead and moves 90 degrees
// west per step.
double t_equilibrium(const Model& M, int l, int64_t i, double t) {
  const double la = M.lat[i] * kDeg, c = std::cos(la - 0.5 * declination(t) * kDeg);
  return 250 + 8 * l + 30 * (c * c - 0.5);
}
double diurnal(const Model& M, int l, int64_t i, int64_t j, double t) {
  const double la = M.lat[i] * kDeg, dec = declination(t) * kDeg;
  const double hour = (M.lon[j] - 180) * kDeg + 2 * kPi * t;
  const double sun = std::cos(la) * std::cos(dec) * std::cos(hour) + std::sin(la) * std::sin(dec);
  return (5.0 + 1.5 * l) * 0.25 * (1 + sun) * (1 + sun);
}

// The state carried from step to step for one level: the temperature tracer
// and the AR(1) amplitudes of its z and t noise (noise[0], noise[1]).
constexpr double kNoiseRho = 0.9;            // per step: a ~2.5-day memory
constexpr double kNoiseStd[2] = {8.0, 0.6};  // per mode, m and K
constexpr double kRelaxDays = 8;             // the tracer's pull to equilibrium
struct Level {
  Level(const Model& M, int64_t year, int l, double t);
  std::vector<float> z, u, v, t, tracer, next;
  std::vector<double> noise[2] = {std::vector<double>(kModes), std::vector<double>(kModes)};
};

// Step -1 - kSpinup draws the AR(1) process's stationary distribution; later
// steps take one step of it.
void noise_step(const Model& M, int64_t year, int64_t step, int l, Level& L) {
  const double rho = step < -kSpinup ? 0 : kNoiseRho, innov = std::sqrt(1 - rho * rho);
  for (int f = 0; f < 2; ++f) {
    const uint64_t k = key(Tag::noise, uint64_t(year), uint64_t(step + kSpinup + 1), uint64_t(2 * l + f));
    for (int q = 0; q < kModes; ++q)
      L.noise[f][q] = rho * L.noise[f][q] + innov * kNoiseStd[f] * rng::normal(M.seed, k + uint64_t(q));
  }
}

// Starts at equilibrium; the spin-up steps then build the tracer's eddies.
Level::Level(const Model& M, int64_t year, int l, double t0) : tracer(size_t(M.H * M.W)) {
  z = u = v = t = next = tracer;
  for (int64_t i = 0; i < M.H; ++i) std::fill_n(tracer.begin() + i * M.W, M.W, float(t_equilibrium(M, l, i, t0)));
  noise_step(M, year, -kSpinup - 1, l, *this);
}

void add_modes(const Model& M, const std::vector<double>& amp, float* f) {
  for (int q = 0; q < kModes; ++q)
    for (int64_t i = 0; i < M.H; ++i) {
      const float r = float(amp[q]) * M.mode_row[q][i];
      for (int64_t j = 0; j < M.W; ++j) f[i * M.W + j] += r * M.mode_col[q][j];
    }
}

// One step of one level: the output fields at time t, then the tracer and
// the noise advanced to t + 6 h.
void step_level(const Model& M, int64_t year, int64_t step, int l, double t, const std::vector<float>& blobs,
                Level& L) {
  geopotential(M, l, t, blobs, L.z.data());
  add_modes(M, L.noise[0], L.z.data());
  winds(M, L.z.data(), L.u.data(), L.v.data());
  L.t = L.tracer;
  add_modes(M, L.noise[1], L.t.data());
  for (int64_t i = 0; i < M.H; ++i)
    for (int64_t j = 0; j < M.W; ++j) L.t[i * M.W + j] += float(diurnal(M, l, i, j, t));
  advect(M, L.u.data(), L.v.data(), L.tracer.data(), L.next.data());
  for (int64_t i = 0; i < M.H; ++i) {
    const float teq = float(t_equilibrium(M, l, i, t)), relax = float(kStepDays / kRelaxDays);
    for (int64_t j = 0; j < M.W; ++j) L.next[i * M.W + j] += relax * (teq - L.next[i * M.W + j]);
  }
  std::swap(L.tracer, L.next);
  noise_step(M, year, step, l, L);
}

// Per-channel sums of x and x^2 in double, each time slab summed on its own
// first, so the rounding of 10^8-value sums stays far below float32's; and
// per-point sums over time (the climatology), added as each step is made so
// no second pass over the files is needed.
struct Moments {
  std::vector<double> sum, sumsq, point_sum;
  double count = 0;  // values per channel
  int64_t steps = 0;
  void add(const float* x, int64_t C, int64_t n) {
    sum.resize(size_t(C)), sumsq.resize(size_t(C)), point_sum.resize(size_t(C * n));
    for (int64_t c = 0; c < C; ++c) {
      double a = 0, b = 0;
      for (int64_t p = c * n; p < (c + 1) * n; ++p) a += x[p], b += double(x[p]) * x[p];
      sum[c] += a, sumsq[c] += b;
    }
    for (int64_t p = 0; p < C * n; ++p) point_sum[p] += x[p];
    count += double(n);
    ++steps;
  }
};

// mean and std (population) per channel, float32, shape (C); climatology
// (C, H, W), the time mean at each point.
std::vector<float> write_stats(const std::string& path, const Moments& s, int64_t H, int64_t W) {
  const int64_t C = int64_t(s.sum.size());
  std::vector<float> mean(s.sum.size()), std(s.sum.size());
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = float(s.sum[c] / s.count);
    std[c] = float(std::sqrt(std::max(s.sumsq[c] / s.count - std::pow(s.sum[c] / s.count, 2), 0.0)));
    ENGINE_CHECK(std[c] > 0, "channel ", c, " is constant over the train years");
  }
  h5::Writer w(path);
  w.create("mean", h5::ElemType::f32, {C});
  w.create("std", h5::ElemType::f32, {C});
  w.write("mean", 0, C, mean.data());
  w.write("std", 0, C, std.data());
  std::vector<float> clim(s.point_sum.size());
  for (size_t p = 0; p < clim.size(); ++p) clim[p] = float(s.point_sum[p] / double(s.steps));
  w.create("climatology", h5::ElemType::f32, {C, H, W});
  w.write("climatology", 0, C, clim.data());
  w.commit();
  const std::string dir = std::filesystem::path(path).parent_path().string() + "/stats";
  std::filesystem::create_directories(dir);
  write_npy(dir + "/global_means.npy", {1, C, 1, 1}, mean);
  write_npy(dir + "/global_stds.npy", {1, C, 1, 1}, std);
  write_npy(dir + "/time_means.npy", {1, C, H, W}, clim);
  return std;
}

// Writes one year, step by step. Train years feed the stats; valid years the
// persistence error (sums of (x[t+1] - x[t])^2 per channel).
void write_year(const Model& M, const Options& o, const std::string& path, int64_t year, Moments* stats,
                std::vector<double>* persist) {
  const int64_t n = M.H * M.W;
  h5::Writer w(path);
  w.create("fields", h5::ElemType::f32, {o.steps, M.C, M.H, M.W});
  std::string names;
  for (int64_t c = 0; c < M.C; ++c) names += std::string(c ? "," : "") + "zuvt"[c % 4] + std::to_string(c / 4);
  w.set_attribute("fields", "channels", names);
  w.set_attribute("fields", "hours_per_step", 6.0);
  w.create("lat", h5::ElemType::f32, {M.H});
  std::vector<float> lat(M.lat.begin(), M.lat.end());
  w.write("lat", 0, M.H, lat.data());
  const double day0 = 365.0 * double(year - kFirstYear);
  std::vector<Level> levels;
  for (int l = 0; l < M.levels; ++l) levels.emplace_back(M, year, l, day0 - kSpinup * kStepDays);
  std::vector<float> blobs(static_cast<size_t>(n)), slab(static_cast<size_t>(M.C * n)), prev;
  for (int64_t s = -kSpinup; s < o.steps; ++s) {
    const double t = day0 + double(s) * kStepDays;
    add_blobs(M, t, blobs);
    for (int l = 0; l < M.levels; ++l) step_level(M, year, s, l, t, blobs, levels[l]);
    if (s < 0) continue;
    for (int64_t c = 0; c < M.C; ++c) {
      const Level& L = levels[c / 4];
      const std::vector<float>* src[] = {&L.z, &L.u, &L.v, &L.t};
      std::copy(src[c % 4]->begin(), src[c % 4]->end(), slab.begin() + c * n);
    }
    w.write("fields", s, 1, slab.data());
    if (stats) stats->add(slab.data(), M.C, n);
    if (persist && !prev.empty())
      for (int64_t p = 0; p < M.C * n; ++p) (*persist)[p / n] += std::pow(double(slab[p]) - prev[p], 2);
    if (persist) prev = slab;
  }
  w.commit();
  std::printf("prepare_weather: %s: fields (%lld, %lld, %lld, %lld) float32, %.1f MB\n", path.c_str(),
              (long long)o.steps, (long long)M.C, (long long)M.H, (long long)M.W, double(o.steps * M.C * n) * 4 / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "prepare_weather: error: %s\n", e.what());
    return 2;
  }
  if (o.help) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  try {
    const Model M = make_model(o);
    for (const char* d : {"/train", "/valid"}) std::filesystem::create_directories(o.out + d);
    Moments sums;
    for (int64_t y = 0; y < o.train_years; ++y)
      write_year(M, o, o.out + "/train/" + std::to_string(kFirstYear + y) + ".h5", kFirstYear + y, &sums, nullptr);
    const std::vector<float> std = write_stats(o.out + "/stats.h5", sums, M.H, M.W);
    std::vector<double> persist(size_t(M.C), 0.0);
    for (int64_t y = 0; y < o.valid_years; ++y) {
      const int64_t year = kFirstYear + o.train_years + y;
      write_year(M, o, o.out + "/valid/" + std::to_string(year) + ".h5", year, nullptr, &persist);
    }
    const double pairs = double(o.valid_years * (o.steps - 1) * M.H * M.W);
    std::printf("prepare_weather: %s/stats.h5 and stats/*.npy; valid persistence RMSE / std (dt = 6 h) per channel:",
                o.out.c_str());
    for (size_t c = 0; c < size_t(M.C); ++c) std::printf(" %.3f", std::sqrt(persist[c] / pairs) / std[c]);
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "prepare_weather: error: %s\n", e.what());
    return 1;
  }
}
