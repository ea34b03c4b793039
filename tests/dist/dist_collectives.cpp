// Every collective of both backends against a serial reference computed on
// each rank from every rank's known inputs: np 1..4 (3 leaves uneven
// blocks), odd sizes, in place and out of place, sum, avg and max, f32, bf16,
// f64 and i32, and the MPI backend with tiny chunks (its int-count split).
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>

#include "comm/grid.h"
#include "dist_util.h"

using namespace eng;
using namespace eng::comm;
using dist_test::value;
using dist_test::values;

namespace {

// Expected value rounded to the tensor's dtype, as the backends store it.
float rounded(double v, DType dt) {
  if (dt == DType::bf16) return bf16_to_float(float_to_bf16(float(v)));
  if (dt == DType::f16) return f16_to_float(float_to_f16(float(v)));
  if (dt == DType::i32) return float(int64_t(v));
  return float(v);
}

// Sums are exact; an average is one division by P then one rounding to the
// dtype, which a backend may do in either order (NCCL pre-divides): allow
// one unit in the last place of the dtype.
void check_close(const std::vector<float>& got, const std::vector<double>& want, DType dt, const std::string& what) {
  const double ulp = dt == DType::bf16 ? 1.0 / 128 : dt == DType::f16 ? 1.0 / 1024 : 1e-6;
  int bad = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double tol = ulp * std::max(1.0, std::fabs(want[i]));
    if (std::fabs(double(got[i]) - double(rounded(want[i], dt))) > tol && ++bad <= 3)
      FAIL_CHECK(what << ": element " << i << " is " << got[i] << ", expected " << want[i]);
  }
  CHECK(got.size() == want.size());
  CHECK(bad == 0);
}

struct Case {
  Device dev;
  Backend backend;
  CommOptions opt;
  std::string name;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& s : dist_test::setups()) {
    CommOptions o;
    // A group of one exercises the backend too, except the mpi backend in a
    // build without MPI (ENGINE_MPI=OFF: the ASan build), which has none.
    o.short_circuit = s.backend == Backend::mpi && !mpi_built();
    out.push_back({s.dev, s.backend, o, s.name()});
  }
  if (mpi_built()) {
    CommOptions tiny;
    tiny.short_circuit = false;
    tiny.max_chunk = 3;  // every call split into chunks of 3 elements
    out.push_back({kCPU, Backend::mpi, tiny, "cpu/mpi chunks of 3"});
  }
  return out;
}

Tensor make(const std::vector<float>& v, DType dt, Device dev) {
  return Tensor::from_vector(v, {int64_t(v.size())}, dt, dev);
}

// The serial reference: element i is the sum (or max) over the P ranks of
// their element first + i; an average divides the sum by P.
std::vector<double> serial_reduce(int P, int64_t first, int64_t n, ReduceOp op) {
  std::vector<double> want(size_t(n), op == ReduceOp::max ? -1e30 : 0);
  for (int r = 0; r < P; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double& w = want[size_t(i)];
      w = op == ReduceOp::max ? std::max(w, double(value(r, first + i))) : w + value(r, first + i);
    }
  if (op == ReduceOp::avg)
    for (double& w : want) w /= P;
  return want;
}

std::string label(const Case& c, DType dt, int64_t n, ReduceOp op, bool in_place) {
  return c.name + " " + dtype_name(dt) + " n=" + std::to_string(n) +
         (op == ReduceOp::avg   ? " avg"
          : op == ReduceOp::max ? " max"
                                : " sum") +
         (in_place ? " in place" : "");
}

}  // namespace

TEST_CASE("all_reduce matches the serial sum, average and max", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  for (const Case& c : cases()) {
    auto comm = make_communicator(world, c.dev, c.backend, c.opt);
    for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::i32})
      for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000)})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          for (bool in_place : {true, false}) {
            if (dt == DType::i32 && op == ReduceOp::avg) continue;
            const std::string what = label(c, dt, n, op, in_place);
            const std::vector<double> want = serial_reduce(P, 0, n, op);
            Tensor in = make(values(me, n), dt, c.dev);
            Tensor out = in_place ? in : Tensor::empty({n}, dt, c.dev);
            comm->all_reduce(in, out, op).wait();
            check_close(out.to_vector(), want, dt, what);
            const std::vector<float> mine = values(me, n);
            if (!in_place)
              check_close(in.to_vector(), std::vector<double>(mine.begin(), mine.end()), dt,
                          what + " (input untouched)");
          }
  }
}

TEST_CASE("reduce_scatter gives each rank the reduction of its block", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  for (const Case& c : cases()) {
    auto comm = make_communicator(world, c.dev, c.backend, c.opt);
    for (DType dt : {DType::f32, DType::bf16, DType::i32})
      for (int64_t n : {int64_t(1), int64_t(5), int64_t(333)})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max})
          for (bool in_place : {true, false}) {
            if (dt == DType::i32 && op == ReduceOp::avg) continue;
            const std::string what = label(c, dt, n, op, in_place);
            const std::vector<double> want = serial_reduce(P, me * n, n, op);
            Tensor in = make(values(me, P * n), dt, c.dev);
            Tensor out = in_place ? in.slice(me * n, (me + 1) * n) : Tensor::empty({n}, dt, c.dev);
            comm->reduce_scatter(in, out, op).wait();
            check_close(out.to_vector(), want, dt, what);
          }
  }
}

TEST_CASE("all_gather concatenates every rank's block in rank order", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  for (const Case& c : cases()) {
    auto comm = make_communicator(world, c.dev, c.backend, c.opt);
    for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::i32})
      for (int64_t n : {int64_t(1), int64_t(5), int64_t(333)})
        for (bool in_place : {true, false}) {
          const std::string what =
              c.name + " " + dtype_name(dt) + " n=" + std::to_string(n) + (in_place ? " in place" : "");
          std::vector<double> want;
          for (int r = 0; r < P; ++r)
            for (int64_t j = 0; j < n; ++j) want.push_back(value(r, j));
          Tensor out = Tensor::full({P * n}, -99, dt, c.dev), in;
          if (in_place) {
            in = out.slice(me * n, (me + 1) * n);
            in.copy_from(make(values(me, n), dt, kCPU));
          } else {
            in = make(values(me, n), dt, c.dev);
          }
          comm->all_gather(in, out).wait();
          check_close(out.to_vector(), want, dt, what);
        }
  }
}

TEST_CASE("broadcast copies the root's tensor to every rank", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  for (const Case& c : cases())
    for (int root : {0, P - 1}) {
      auto comm = make_communicator(world, c.dev, c.backend, c.opt);
      for (DType dt : {DType::f32, DType::bf16, DType::i32}) {
        Tensor t = make(values(me, 11), dt, c.dev);
        comm->broadcast(t, root).wait();
        const std::vector<float> root_vals = values(root, 11);
        check_close(t.to_vector(), std::vector<double>(root_vals.begin(), root_vals.end()), dt,
                    c.name + " root " + std::to_string(root));
      }
      comm->barrier();
    }
}

TEST_CASE("collectives on the grid's dp, cp, tp and dp x cp groups reduce within the group only", "[dist]") {
  const int P = world().size;
  // np 4: tp 2 x cp 2 (dp 1), and cp 2 alone (dp 2); np 2: each of tp 2 and cp 2; np 3: cp 3.
  std::vector<std::pair<int, int>> shapes{{1, 1}};
  if (P % 2 == 0) shapes.insert(shapes.end(), {{2, 1}, {1, 2}});
  if (P == 4) shapes.push_back({2, 2});
  if (P == 3) shapes.push_back({1, 3});
  for (const auto& [tp, cp] : shapes) {
    INFO("tp " << tp << " cp " << cp);
    const Grid grid(tp, cp);
    CHECK(grid.dp() * grid.cp() * grid.tp() == P);
    CHECK(grid.dp_cp_group().size() == grid.dp() * grid.cp());
    const int me = world().rank;
    CHECK(me == grid.tp_rank() + tp * (grid.cp_rank() + cp * grid.dp_rank()));
    // Each group holds exactly the ranks that agree on the other coordinates.
    auto coords = [&](int r) { return std::array<int, 3>{r % tp, (r / tp) % cp, r / (tp * cp)}; };
    const std::array<int, 3> mine = coords(me);
    for (const auto& [g, varies] :
         {std::pair<const Group*, std::array<bool, 3>>{&grid.tp_group(), {true, false, false}},
          {&grid.cp_group(), {false, true, false}},
          {&grid.dp_group(), {false, false, true}},
          {&grid.dp_cp_group(), {false, true, true}}}) {
      std::vector<int> want;
      for (int r = 0; r < P; ++r) {
        bool in = true;
        for (int x = 0; x < 3; ++x) in = in && (varies[size_t(x)] || coords(r)[size_t(x)] == mine[size_t(x)]);
        if (in) want.push_back(r);
      }
      CHECK(g->world_ranks() == want);
    }
  }
  const int tp = P % 2 == 0 ? 2 : 1;
  const Grid grid(tp);
  for (const Case& c : cases()) {
    for (const Group* g : {&grid.dp_group(), &grid.tp_group()}) {
      auto comm = make_communicator(*g, c.dev, c.backend, c.opt);
      Tensor t = make(values(world().rank, 9), DType::f32, c.dev);
      comm->all_reduce(t, ReduceOp::sum).wait();
      std::vector<double> want(9, 0);
      for (int wr : g->world_ranks())
        for (int64_t i = 0; i < 9; ++i) want[size_t(i)] += value(wr, i);
      check_close(t.to_vector(), want, DType::f32, c.name + " group " + g->name());
    }
  }
}

TEST_CASE("bad arguments are one-line errors naming the op", "[dist]") {
  const Group world = Group::world_group();
  auto comm = make_communicator(world, kCPU, Backend::mpi);
  Tensor a = Tensor::zeros({world.size() * 3 + 1}), b = Tensor::zeros({3});
  CHECK_THROWS_WITH(comm->reduce_scatter(a, b, ReduceOp::sum), Catch::Contains("pad it to a multiple"));
  Tensor i = Tensor::zeros({4}, DType::i32);
  CHECK_THROWS_WITH(comm->all_reduce(i, ReduceOp::avg), Catch::Contains("avg of i32"));
  Tensor e = Tensor::zeros({4}, DType::f32, Device{DeviceType::emu, 0});
  CHECK_THROWS_WITH(comm->all_reduce(e, ReduceOp::sum), Catch::Contains("on cpu"));
  CHECK_THROWS_WITH(make_communicator(world, kCPU, Backend::nccl), Catch::Contains("needs a GPU device"));
  CHECK_THROWS_WITH(Grid(world.size() + 1), Catch::Contains("does not divide the world size"));
  CHECK_THROWS_WITH(Grid(1, world.size() + 1), Catch::Contains("tp x cp = 1 x " + std::to_string(world.size() + 1)));
}

TEST_CASE("group calls: collectives between group_start and group_end all complete at its Work", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  for (const Case& c : cases()) {
    auto comm = make_communicator(world, c.dev, c.backend, c.opt);
    Tensor a = make(values(me, 13), DType::f32, c.dev), b = make(values(me, 6), DType::bf16, c.dev);
    Tensor part = Tensor::empty({3}, DType::f32, c.dev), whole = make(values(me, 3 * P), DType::f32, c.dev);
    comm->group_start();
    std::vector<Work> works{comm->all_reduce(a, ReduceOp::sum), comm->all_reduce(b, ReduceOp::avg),
                            comm->reduce_scatter(whole, part, ReduceOp::sum)};
    works.push_back(comm->group_end());
    for (Work& w : works) w.wait();
    check_close(a.to_vector(), serial_reduce(P, 0, 13, ReduceOp::sum), DType::f32, c.name + " grouped all_reduce");
    check_close(b.to_vector(), serial_reduce(P, 0, 6, ReduceOp::avg), DType::bf16, c.name + " grouped all_reduce avg");
    check_close(part.to_vector(), serial_reduce(P, me * 3, 3, ReduceOp::sum), DType::f32,
                c.name + " grouped reduce_scatter");
  }
}
