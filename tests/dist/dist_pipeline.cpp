// Pipeline parallelism's pieces: point-to-point sends and receives of both
// backends (checked against the values each rank is known to send), the
// pp x dp x cp x tp grid's groups, and the afab and 1f1b schedules (against
// hand-written lists, and run through a dependency simulator whose idle
// fraction must be the formula's).
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <map>

#include "base/error.h"
#include "comm/grid.h"
#include "comm/pipeline_schedule.h"
#include "dist_util.h"

using namespace eng;
using namespace eng::comm;
using dist_test::value;
using dist_test::values;

namespace {

Tensor make(const std::vector<float>& v, DType dt, Device dev) {
  return Tensor::from_vector(v, {int64_t(v.size())}, dt, dev);
}

std::vector<std::pair<dist_test::Setup, CommOptions>> p2p_cases() {
  std::vector<std::pair<dist_test::Setup, CommOptions>> out;
  for (const auto& s : dist_test::setups()) {
    if (s.backend == Backend::mpi && !mpi_built()) continue;
    out.push_back({s, CommOptions{}});
  }
  if (mpi_built()) {
    CommOptions tiny;
    tiny.max_chunk = 3;  // every message split into MPI calls of 3 elements
    out.push_back({{kCPU, Backend::mpi}, tiny});
  }
  return out;
}

}  // namespace

TEST_CASE("send_recv: a ring shift in both listing orders, every dtype, reaches the next rank", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank(), next = (me + 1) % P, prev = (me + P - 1) % P;
  for (const auto& [s, opt] : p2p_cases()) {
    auto comm = make_communicator(world, s.dev, s.backend, opt);
    for (DType dt : {DType::f32, DType::bf16, DType::i32})
      for (bool recv_first : {false, true}) {
        INFO(s.name() << " " << dtype_name(dt) << (recv_first ? " recv listed first" : ""));
        const Tensor out = make(values(me, 11), dt, s.dev);
        Tensor in = Tensor::zeros({11}, dt, s.dev);
        std::vector<Communicator::P2pOp> ops{{Communicator::P2pOp::send, out, next},
                                             {Communicator::P2pOp::recv, in, prev}};
        if (recv_first) std::swap(ops[0], ops[1]);
        const double before = comm->bytes_sent();
        comm->send_recv(ops).wait();
        CHECK(in.to_vector() == make(values(prev, 11), dt, kCPU).to_vector());
        CHECK(comm->bytes_sent() - before == (P > 1 ? double(out.nbytes()) : 0.0));  // to itself: a copy
      }
  }
}

TEST_CASE("send and recv: messages between a pair arrive in the order they were sent", "[dist]") {
  const Group world = Group::world_group();
  const int P = world.size(), me = world.rank();
  if (P < 2) return;
  for (const auto& [s, opt] : p2p_cases()) {
    INFO(s.name());
    auto comm = make_communicator(world, s.dev, s.backend, opt);
    // Rank 0 sends two messages to the last rank with lone sends; it receives them with lone receives.
    if (me == 0) {
      const Tensor a = make(values(0, 5), DType::f32, s.dev), b = make(values(7, 9), DType::f32, s.dev);
      Work wa = comm->send(a, P - 1);
      Work wb = comm->send(b, P - 1);
      wa.wait();
      wb.wait();
    } else if (me == P - 1) {
      Tensor x = Tensor::zeros({5}, DType::f32, s.dev), y = Tensor::zeros({9}, DType::f32, s.dev);
      Work wx = comm->recv(x, 0);
      Work wy = comm->recv(y, 0);
      wx.wait();
      wy.wait();
      CHECK(x.to_vector() == values(0, 5));
      CHECK(y.to_vector() == values(7, 9));
    }
    comm->barrier();
  }
}

TEST_CASE("send_recv: bad peers and unmatched sends to self are one-line errors", "[dist]") {
  const Group world = Group::world_group();
  auto comm = make_communicator(world, kCPU, mpi_built() ? Backend::mpi : Backend::mpi);
  Tensor t = Tensor::zeros({4});
  CHECK_THROWS_WITH(comm->send(t, world.size()),
                    Catch::Contains("peer " + std::to_string(world.size()) + " outside group world"));
  CHECK_THROWS_WITH(comm->recv(t, -1), Catch::Contains("outside group world"));
  CHECK_THROWS_WITH(comm->send(t, world.rank()), Catch::Contains("1 send(s) to this rank"));
  Tensor u = Tensor::zeros({5});
  CHECK_THROWS_WITH(
      comm->send_recv({{Communicator::P2pOp::send, t, world.rank()}, {Communicator::P2pOp::recv, u, world.rank()}}),
      Catch::Contains("send_recv to self"));
}

TEST_CASE("the pp x dp x cp x tp grid: stages outermost, each group the ranks that share the other coordinates",
          "[dist]") {
  const int P = world().size;
  // (pp, tp, cp): np 4 allows pp 2 with tp 2, with cp 2, with dp 2, and pp 4; np 2 pp 2; np 3 pp 3.
  std::vector<std::array<int, 3>> shapes{{1, 1, 1}};
  if (P % 2 == 0) shapes.push_back({2, 1, 1});
  if (P == 3) shapes.push_back({3, 1, 1});
  if (P == 4) shapes.insert(shapes.end(), {{2, 2, 1}, {2, 1, 2}, {4, 1, 1}});
  for (const auto& [pp, tp, cp] : shapes) {
    INFO("pp " << pp << " tp " << tp << " cp " << cp);
    const Grid grid(tp, cp, pp);
    const int dp = P / (pp * tp * cp), me = world().rank;
    CHECK(grid.dp() == dp);
    CHECK(grid.pp() == pp);
    CHECK(me == grid.tp_rank() + tp * (grid.cp_rank() + cp * (grid.dp_rank() + dp * grid.pp_rank())));
    // Coordinates (t, c, d, p) of a world rank, from the formula.
    auto coords = [&](int r) {
      return std::array<int, 4>{r % tp, (r / tp) % cp, (r / (tp * cp)) % dp, r / (tp * cp * dp)};
    };
    const std::array<int, 4> mine = coords(me);
    auto members = [&](std::array<bool, 4> varies) {
      std::vector<int> want;
      for (int r = 0; r < P; ++r) {
        bool in = true;
        for (size_t x = 0; x < 4; ++x) in = in && (varies[x] || coords(r)[x] == mine[x]);
        if (in) want.push_back(r);
      }
      return want;
    };
    CHECK(grid.tp_group().world_ranks() == members({true, false, false, false}));
    CHECK(grid.cp_group().world_ranks() == members({false, true, false, false}));
    CHECK(grid.dp_group().world_ranks() == members({false, false, true, false}));
    CHECK(grid.dp_cp_group().world_ranks() == members({false, true, true, false}));
    CHECK(grid.pp_group().world_ranks() == members({false, false, false, true}));
    // embed: my pp group's first and last stage, if I am one of them; else me alone.
    std::vector<int> embed{me};
    if (mine[3] == 0 || mine[3] == pp - 1) {
      const std::vector<int> stages = grid.pp_group().world_ranks();
      embed = pp == 1 ? std::vector<int>{me} : std::vector<int>{stages.front(), stages.back()};
    }
    CHECK(grid.embed_group().world_ranks() == embed);
  }
  CHECK_THROWS_WITH(Grid(1, 1, P + 1), Catch::Contains("pp x cp x tp = " + std::to_string(P + 1) + " x 1 x 1"));
}

TEST_CASE("send_recv over the pp group: each stage passes to the next, as the pipeline does", "[dist]") {
  const int P = world().size;
  if (P < 2) return;
  const Grid grid(1, 1, P);
  const int stage = grid.pp_rank();
  for (const auto& [s, opt] : p2p_cases()) {
    INFO(s.name());
    auto pp = make_communicator(grid.pp_group(), s.dev, s.backend, opt);
    // Forward: stage k > 0 receives from k - 1 while sending its own to k + 1, in one call.
    Tensor in = Tensor::zeros({6}, DType::f32, s.dev);
    const Tensor out = make(values(stage, 6), DType::f32, s.dev);
    std::vector<Communicator::P2pOp> ops;
    if (stage > 0) ops.push_back({Communicator::P2pOp::recv, in, stage - 1});
    if (stage + 1 < P) ops.push_back({Communicator::P2pOp::send, out, stage + 1});
    pp->send_recv(ops).wait();
    if (stage > 0) CHECK(in.to_vector() == values(stage - 1, 6));
  }
}

// ---- the schedules ----

TEST_CASE("pipeline schedules: pp 4, m 8 as written out by hand", "[dist]") {
  const std::array<const char*, 4> afab{
      "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7", "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7",
      "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7", "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7"};
  // 1f1b: stage s warms up with 3 - s forwards, then alternates, then cools down.
  const std::array<const char*, 4> one{
      "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7", "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7", "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"};
  for (int s = 0; s < 4; ++s) {
    CHECK(schedule_string(pipeline_schedule(PipeSchedule::afab, 4, s, 8)) == afab[size_t(s)]);
    CHECK(schedule_string(pipeline_schedule(PipeSchedule::one_f_one_b, 4, s, 8)) == one[size_t(s)]);
    CHECK(max_in_flight(pipeline_schedule(PipeSchedule::afab, 4, s, 8)) == 8);
    CHECK(max_in_flight(pipeline_schedule(PipeSchedule::one_f_one_b, 4, s, 8)) == 4 - s);
  }
  // Fewer micro-batches than stages: 1f1b's warm-up takes them all.
  CHECK(schedule_string(pipeline_schedule(PipeSchedule::one_f_one_b, 4, 0, 2)) == "F0 F1 B0 B1");
  CHECK(schedule_string(pipeline_schedule(PipeSchedule::one_f_one_b, 4, 3, 2)) == "F0 B0 F1 B1");
  CHECK(parse_pipe_schedule("1f1b") == PipeSchedule::one_f_one_b);
  CHECK_THROWS_WITH(parse_pipe_schedule("zb"), Catch::Contains("pp_schedule 'zb': afab or 1f1b"));
}

namespace {
// Runs every stage's list in order on its own clock: F(s, i) after F(s-1, i)
// ends, B(s, i) after B(s+1, i) ends (and the stage's own F(s, i)); forward
// time f, backward b, sends free. Returns the step's length, or -1 when the
// lists deadlock.
double simulate(PipeSchedule kind, int pp, int64_t m, double f, double b) {
  std::vector<std::vector<PipeOp>> lists;
  for (int s = 0; s < pp; ++s) lists.push_back(pipeline_schedule(kind, pp, s, m));
  std::map<std::array<int64_t, 3>, double> done;  // (stage, kind, micro) -> end time
  std::vector<size_t> next(size_t(pp), 0);
  std::vector<double> clock(size_t(pp), 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < pp; ++s) {
      if (next[size_t(s)] == lists[size_t(s)].size()) continue;
      const PipeOp op = lists[size_t(s)][next[size_t(s)]];
      const bool fwd = op.kind == PipeOp::forward;
      const int dep = fwd ? s - 1 : s + 1;
      double ready = clock[size_t(s)];
      if (dep >= 0 && dep < pp) {
        auto it = done.find({dep, fwd ? 0 : 1, op.micro});
        if (it == done.end()) continue;  // its input has not been sent yet
        ready = std::max(ready, it->second);
      }
      if (!fwd && !done.count({s, 0, op.micro})) return -1;  // a backward before its forward
      clock[size_t(s)] = ready + (fwd ? f : b);
      done[{s, fwd ? 0 : 1, op.micro}] = clock[size_t(s)];
      ++next[size_t(s)];
      progress = true;
    }
  }
  for (int s = 0; s < pp; ++s)
    if (next[size_t(s)] != lists[size_t(s)].size()) return -1;
  return *std::max_element(clock.begin(), clock.end());
}
}  // namespace

TEST_CASE("pipeline schedules: no deadlock, and the simulated idle fraction is (pp - 1) / (m + pp - 1)", "[dist]") {
  for (PipeSchedule kind : {PipeSchedule::afab, PipeSchedule::one_f_one_b})
    for (int pp = 1; pp <= 6; ++pp)
      for (int64_t m = 1; m <= 12; ++m) {
        INFO(pipe_schedule_name(kind) << " pp " << pp << " m " << m);
        const double f = 1, b = 2, t = simulate(kind, pp, m, f, b);
        REQUIRE(t > 0);
        const double idle = 1.0 - double(m) * (f + b) / t;
        CHECK(idle == Approx(ideal_bubble(pp, m)).margin(1e-12));
      }
}

namespace {
// Every stage's plan under NCCL's rules: a send completes only when its
// receiver has posted the matching receive (no buffering), a stage waits for
// its whole batch before its pass, and each direction of a pair matches in
// issue order. Returns "" when every plan runs to its end, else where it stuck.
std::string rendezvous(PipeSchedule kind, int pp, int64_t m) {
  std::vector<std::vector<PipeStep>> plans;
  for (int s = 0; s < pp; ++s) plans.push_back(pipeline_plan(kind, pp, s, m));
  // Per directed pair and kind, the micro-batches in the order sent and received.
  std::map<std::array<int, 3>, std::vector<int64_t>> sent, received;
  for (int s = 0; s < pp; ++s)
    for (const PipeStep& st : plans[size_t(s)])
      for (const PipeMsg& msg : st.batch) {
        const int peer = msg.kind == PipeMsg::act ? (msg.send ? s + 1 : s - 1) : (msg.send ? s - 1 : s + 1);
        if (peer < 0 || peer >= pp) return eng::cat("stage ", s, " talks to stage ", peer);
        const int from = msg.send ? s : peer, to = msg.send ? peer : s;
        (msg.send ? sent : received)[{from, to, int(msg.kind)}].push_back(msg.micro);
      }
  if (sent != received) return "a pair's sends and receives differ in order or number";
  std::vector<size_t> at(static_cast<size_t>(pp), 0);
  std::vector<std::vector<bool>> done(static_cast<size_t>(pp));
  auto posted = [&](int s, const PipeMsg& want) {  // the peer's current batch holds the matching op
    if (at[size_t(s)] >= plans[size_t(s)].size()) return -1;
    const auto& b = plans[size_t(s)][at[size_t(s)]].batch;
    for (size_t i = 0; i < b.size(); ++i)
      if (b[i] == want) return int(i);
    return -1;
  };
  for (int s = 0; s < pp; ++s)
    done[size_t(s)].assign(plans[size_t(s)].empty() ? 0 : plans[size_t(s)][0].batch.size(), false);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < pp; ++s) {
      if (at[size_t(s)] >= plans[size_t(s)].size()) continue;
      const auto& batch = plans[size_t(s)][at[size_t(s)]].batch;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (done[size_t(s)][i]) continue;
        const PipeMsg& msg = batch[i];
        const int peer = msg.kind == PipeMsg::act ? (msg.send ? s + 1 : s - 1) : (msg.send ? s - 1 : s + 1);
        const int j = posted(peer, {msg.kind, !msg.send, msg.micro});
        if (j < 0) continue;
        done[size_t(s)][i] = done[size_t(peer)][size_t(j)] = true;
        progress = true;
      }
      if (std::all_of(done[size_t(s)].begin(), done[size_t(s)].end(), [](bool d) { return d; })) {
        ++at[size_t(s)];  // the batch is through: the pass runs, the next batch is posted
        done[size_t(s)].assign(
            at[size_t(s)] < plans[size_t(s)].size() ? plans[size_t(s)][at[size_t(s)]].batch.size() : 0, false);
        progress = true;
      }
    }
  }
  for (int s = 0; s < pp; ++s)
    if (at[size_t(s)] < plans[size_t(s)].size())
      return eng::cat("stage ", s, " stuck at step ", at[size_t(s)], " of ", plans[size_t(s)].size());
  return "";
}
}  // namespace

TEST_CASE("pipeline plans: sends go with the next receive, and no plan deadlocks under rendezvous sends", "[dist]") {
  // Stage 1 of 2, 1f1b, m 3: a lone send alone would deadlock in the steady state; paired it does not.
  const std::vector<PipeStep> plan = pipeline_plan(PipeSchedule::one_f_one_b, 3, 1, 3);
  std::string text;
  for (const PipeStep& st : plan) {
    text += "[";
    for (const PipeMsg& msg : st.batch)
      text += eng::cat(msg.send ? "s" : "r", msg.kind == PipeMsg::act ? "a" : "g", msg.micro, " ");
    text += st.has_op ? eng::cat("] ", st.op.kind == PipeOp::forward ? "F" : "B", st.op.micro, " ") : "]";
  }
  CHECK(text == "[ra0 ] F0 [sa0 ra1 ] F1 [sa1 rg0 ] B0 [sg0 ra2 ] F2 [sa2 rg1 ] B1 [sg1 rg2 ] B2 [sg2 ]");
  for (PipeSchedule kind : {PipeSchedule::afab, PipeSchedule::one_f_one_b})
    for (int pp = 1; pp <= 6; ++pp)
      for (int64_t m = 1; m <= 10; ++m) {
        INFO(pipe_schedule_name(kind) << " pp " << pp << " m " << m);
        CHECK(rendezvous(kind, pp, m) == "");
      }
}

TEST_CASE("stage_layers: balanced by cost, or as given, with one-line errors", "[dist]") {
  // Equal blocks: as even as can be, the remainder on the earlier stages.
  CHECK(stage_layers("", std::vector<double>(8, 1.0), 0, 0, 4) == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(stage_layers("", std::vector<double>(5, 1.0), 0, 0, 2) == std::vector<int64_t>{3, 2});
  // A head worth two blocks on the last stage moves blocks to the first.
  CHECK(stage_layers("", std::vector<double>(6, 1.0), 0, 2.0, 2) == std::vector<int64_t>{4, 2});
  CHECK(stage_layers("3,1", std::vector<double>(4, 1.0), 0, 0, 2) == std::vector<int64_t>{3, 1});
  CHECK_THROWS_WITH(stage_layers("", std::vector<double>(2, 1.0), 0, 0, 3),
                    Catch::Contains("pp = 3 stages for n_layer = 2"));
  CHECK_THROWS_WITH(stage_layers("3,2", std::vector<double>(4, 1.0), 0, 0, 2),
                    Catch::Contains("sums to 5 blocks, n_layer = 4"));
  CHECK_THROWS_WITH(stage_layers("4", std::vector<double>(4, 1.0), 0, 0, 2), Catch::Contains("lists 1 stages, pp = 2"));
  CHECK_THROWS_WITH(stage_layers("2,x", std::vector<double>(4, 1.0), 0, 0, 2),
                    Catch::Contains("'x' is not a block count"));
  CHECK_THROWS_WITH(stage_layers("4,0", std::vector<double>(4, 1.0), 0, 0, 2),
                    Catch::Contains("'0' is not a block count"));
}
