// train: the main job. Trains a model (--model gpt2, llama: token files;
// --model vit: HDF5 images or weather fields) with AdamW (weight decay on
// matrices only), warmup + cosine LR, gradient clipping and accumulation;
// reports progress and validation; writes metrics.jsonl, a TensorBoard event
// file and resumable checkpoints. What differs per model (data, loss,
// validation, checkpoint layout) is a TrainTask (task.h); --precision picks
// O0..O3 (docs/precision.md). `train --help` lists every option (docs/train.md).
// Inputs are all checked before out_dir is touched. Under mpirun the ranks
// form a dp x cp x tp x pp grid (docs/distributed.md); rank 0 alone writes.
// The map of run(): set-up (config, grid, model, optimizer, resume), then
// one loop over the steps whose body is one of three step loops, in order:
//   1. the host step: a loop over the micro-batches, forward, backward,
//      then the dp all-reduce (ddp->finish), clip, optimizer. The cpu's, and
//      emu/cuda's under fp16 loss scaling (the scale is read each step).
//      Read this one first; examples/ has each parallelism alone.
//   2. the host pipeline step (--pp on the cpu): pipeline_step.h runs the
//      stage's schedule, then the same dp, clip and optimizer.
//   3. the device step (emu, cuda): train_step.h's GpuTrainStep, no host
//      read inside the step, eager or at O3 one CUDA graph, pipelined or not.
// After the step: the loss over the grid, the progress line, replica checks,
// validation, checkpoints and the scheduler's signals (run_stop.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "base/error.h"
#include "comm/ddp.h"
#include "comm/grid.h"
#include "comm/pipeline_schedule.h"
#include "comm/replicas.h"
#include "comm/watchdog.h"
#include "comm/world.h"
#include "comm/zero.h"
#include "engine/autograd.h"
#include "engine/compute_copies.h"
#include "engine/gpu_model.h"
#include "engine/memory_report.h"
#include "engine/ops.h"
#include "engine/optim/loss_scaler.h"
#include "engine/optim/optimizer.h"
#include "engine/profile.h"
#include "kernels/cpu/vmath.h"
#include "kernels/emu/count_only.h"
#include "kernels/gemm/gemm.h"
#include "models/train/attention_option.h"
#include "models/train/config_checks.h"
#include "models/train/error_exit.h"
#include "models/train/llama_task.h"
#include "models/train/loaded_checks.h"
#include "models/train/memory_plan.h"
#include "models/train/mfu_peak.h"
#include "models/train/optimizer_option.h"
#include "models/train/out_dir.h"
#include "models/train/pipeline_step.h"
#include "models/train/progress.h"
#include "models/train/run_checkpoints.h"
#include "models/train/run_stop.h"
#include "models/train/step_profile.h"
#include "models/train/task.h"
#include "models/train/tasks.h"
#include "models/train/train_config.h"
#include "models/train/train_dist.h"
#include "models/train/train_step.h"

using namespace eng;
using namespace eng::models;
namespace {

// Runs checks that every rank makes alike (after agree()): their error is a
// WorldError, printed once.
template <typename F>
auto alike(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const WorldError&) {
    throw;
  } catch (const Error& e) {
    throw WorldError(e.what());
  }
}

int run(int argc, char** argv) {
  TrainConfig cfg;
  // Every rank parses the same command line: its errors are every rank's,
  // said once by rank 0 (WorldError), without MPI's abort banner.
  if (!alike([&] { return cfg.parse_args(argc, argv); })) {
    std::printf("%s", cfg.help_text().c_str());
    return 0;
  }
  alike([&] { llama_shape_from_init(cfg); });  // a Llama's shape from --init_from's config.json
  const comm::World& world = comm::init_world();
  const bool lead = world.rank == 0;  // rank 0 alone prints and writes
  // SIGTERM, SIGUSR1, SIGINT: finish the step, save, exit kStoppedExit
  // (run_stop.h). Installed again after MPI's start-up, with rank 0's notice.
  install_stop_handlers(lead);
  const int threads = share_cores();
  // Every call that waits for the other ranks is watched from here on, the
  // start-up agreement included: a rank that never arrives ends the job
  // after --comm_timeout, naming the call.
  if (world.size > 1) comm::start_watchdog(cfg.f("comm_timeout"));
  // Before any other collective: every rank runs the same configuration.
  agree(cfg.json(), "configuration");
  // The ranks agree on the configuration, so its errors are every rank's:
  // said once, by rank 0 (WorldError).
  alike([&] { validate_config(cfg); });
  // Refuses a fresh run into an earlier run's out_dir, and a second job on a live one.
  OutDir out(cfg.s("out_dir"), out_dir_mode(cfg.json()["resume"], cfg.b("overwrite")));
  const Precision precision = parse_precision(cfg.s("precision"));
  const int64_t zero_stage = cfg.i("zero");
  const comm::Grid grid = alike([&] { return comm::Grid(int(cfg.i("tp")), int(cfg.i("cp")), int(cfg.i("pp"))); });
  // Every op has a cpu kernel and a hand-written CUDA kernel: cpu, cuda (auto:
  // when a GPU answers) and emu (the emulated CUDA kernels: slow, for checking).
  const Device dev = rank_device(Device::parse(cfg.s("device")));
  // The device type is every rank's; cuDNN's presence is each rank's own (an error there ends the job).
  alike([&] { check_attention_device(cfg, dev); });
  alike([&] { check_optimizer_device(cfg, dev); });
  check_cudnn_loads(cfg);
  // NVTX ranges (engine/profile.h) on the cuda device.
  profile::enable_nvtx(dev.type == DeviceType::cuda);
  if (dev.type == DeviceType::emu && lead)
    std::printf("device emu: the CUDA kernels run in the emulator, one fiber per GPU thread (slow)\n");
  const BatchPlan plan = alike([&] {
    return plan_batches(cfg.i("batch_size"), cfg.i("grad_accum"), cfg.i("global_batch"), grid.dp(), grid.dp_rank());
  });
  const int64_t accum = plan.accum;
  const int64_t steps = cfg.i("steps");
  // --profile_steps A:B (checked in validate): the CUDA profiler records steps A to B.
  const profile::StepWindow window = profile::parse_step_window(cfg.s("profile_steps"), steps, "profile_steps");
  if (lead) std::printf("config:\n%s\n", cfg.json().dump(2).c_str());

  const comm::Backend backend = comm::parse_backend(cfg.s("comm"), dev);
  // Tensor parallel: the model is split over the tp group (adjacent ranks);
  // context parallel: the sequence over the cp group (the split model's
  // forward, with a tp group of one when tp = 1); pipeline parallel: the
  // blocks in stages over the pp group (outermost), GPT-2's token table on
  // the first and last stage (the embed group).
  std::unique_ptr<comm::Communicator> tp_comm, cp_comm, pp_comm, embed_comm;
  if (grid.tp() > 1 || grid.cp() > 1 || grid.pp() > 1) tp_comm = comm::make_communicator(grid.tp_group(), dev, backend);
  if (grid.cp() > 1) cp_comm = comm::make_communicator(grid.cp_group(), dev, backend);
  ModelGrid mg;
  mg.tp = tp_comm.get(), mg.cp = cp_comm.get();
  if (grid.pp() > 1) {
    pp_comm = comm::make_communicator(grid.pp_group(), dev, backend);
    embed_comm = comm::make_communicator(grid.embed_group(), dev, backend);
    mg.pp = pp_comm.get();
    mg.stage_layers = model_stage_layers(cfg);
    mg.stage_leader = grid.dp_rank() == 0 && grid.cp_rank() == 0 && grid.tp_rank() == 0;
  }
  // The data files are opened here, by every rank: an error names the file.
  std::unique_ptr<TrainTask> task = make_task(cfg, plan, dev, mg);
  const TpGrads& tp_grads = task->tp_grads();
  // Some of the model's parameters, by name (what --check_replicas compares).
  auto named = [&](const std::vector<Tensor>& ts) {
    std::vector<std::pair<std::string, Tensor>> found;
    for (const auto& [name, p] : task->model().named_parameters())
      for (const Tensor& t : ts)
        if (t.same(p)) found.emplace_back(name, p);
    return found;
  };
  const auto tp_replicated = named(tp_grads.replicated);  // across tp
  Module& model = task->model();
  if (!cfg.s("init_from").empty()) {
    task->init_from(cfg.s("init_from"));
    check_loaded_weights(model.named_parameters(), cfg.s("init_from"));  // a NaN is the file's, not the lr's
  }
  const std::unique_ptr<Optimizer> opt_owner =
      make_optimizer(cfg, decay_groups(model.parameters(), cfg.f("weight_decay")));
  Optimizer& opt = *opt_owner;  // --optimizer (optimizer_option.h); ZeRO-1 (adamw) steps in its place
  const WarmupDecayLR sched = make_lr_schedule(cfg, steps);  // --lr_schedule (optimizer_option.h)
  nlohmann::json shapes;
  for (const Tensor& p : model.parameters()) shapes.push_back(p.shape());
  agree({{"parameters", model.num_parameters()}, {"shapes", shapes}}, "model", grid.pp_rank());  // per stage
  // Pipeline parallel: this stage's passes in the schedule's order (eager, any device).
  const comm::PipeSchedule pipe_schedule = comm::parse_pipe_schedule(cfg.s("pp_schedule"));
  std::unique_ptr<PipelineStep> pipe;
  if (pp_comm) pipe = std::make_unique<PipelineStep>(*pp_comm, pipe_schedule, accum);
  const int64_t mp_in_flight =
      pipe ? comm::max_in_flight(comm::pipeline_schedule(pipe_schedule, grid.pp(), grid.pp_rank(), accum)) : 1;
  const std::vector<Tensor> tied = task->tied_parameters();
  // The last stage's copy of a tied table: its gradient equals the first stage's (summed), so the norm skips it.
  const std::vector<Tensor> uncounted = pipe && pipe->last() ? tied : std::vector<Tensor>{};
  // Data parallel: one replica per dp rank, all starting from rank 0's
  // weights. Parameters are replicated over cp as well, so their gradients
  // are averaged over dp x cp (the mean of the cp ranks' losses).
  const comm::Group& replicas = grid.cp() > 1 ? grid.dp_cp_group() : grid.dp_group();
  std::unique_ptr<comm::Communicator> dp_comm;
  std::unique_ptr<comm::DistributedDataParallel> ddp;
  std::unique_ptr<comm::ZeroAdamW> zero;  // --zero 1 on more than one replica
  if (replicas.size() > 1) {
    dp_comm = comm::make_communicator(replicas, dev, backend);
    comm::DdpOptions dopt;
    dopt.naive = cfg.s("ddp") == "naive";
    dopt.bucket_mb = cfg.f("bucket_mb");
    dopt.first_bucket_mb = cfg.f("first_bucket_mb");
    dopt.shard = zero_stage == 1;
    dopt.alone = tied;  // a tied table's ZeRO shards line up on its two stages
    const bool eight_bit = cfg.s("optimizer") == "adamw8bit";
    if (eight_bit) dopt.align = 256;  // ZeRO keeps the 8-bit blocks whole (zero.h)
    ddp = std::make_unique<comm::DistributedDataParallel>(model.parameters(), *dp_comm, dopt);
    ddp->broadcast_parameters();
    if (zero_stage == 1)
      zero = std::make_unique<comm::ZeroAdamW>(decay_groups(model.parameters(), cfg.f("weight_decay")), *ddp, *dp_comm,
                                               cfg.f("lr"), cfg.f("beta1"), cfg.f("beta2"), 1e-8, eight_bit);
    if (zero && tp_grads.active()) zero->set_tensor_parallel(*tp_grads.tp, tp_grads.replicated, tp_grads.partial);
    if (zero && pipe) zero->set_pipeline(*pp_comm, uncounted);
  }
  Optimizer& optim = zero ? static_cast<Optimizer&>(*zero) : opt;  // what steps, saves and loads
  const std::string out_dir = cfg.s("out_dir"), ckpt_dir = out_dir + "/checkpoint",
                    from = cfg.s("resume_from").empty() ? ckpt_dir : cfg.s("resume_from");
  int64_t start = 0;
  nlohmann::json resumed;  // state.json of the checkpoint resumed from (`from`)
  if (lead && !out.auto_note().empty()) std::printf("%s\n", out.auto_note().c_str());
  if (out.resuming()) {
    check_resume_optimizer(from, cfg);  // before its state is loaded
    resumed = task->load_checkpoint(from, optim);
    check_loaded_weights(model.named_parameters(), from + "/model.safetensors");
    check_loaded_state(zero ? zero->shard_optimizer().state() : opt.state(), from + "/optimizer.safetensors");
    check_resumed_config(from, resumed, cfg, task->shape_keys(), steps);
    start = resumed["step"].get<int64_t>();
    task->check_resume(from, resumed);
  }
  if (lead) {
    std::printf("model: %s on %s\n", task->summary().c_str(), dev.str().c_str());
    const std::string shape = cat(grid.pp() > 1 ? cat("pp ", grid.pp(), " x ") : "", "dp ", grid.dp(),
                                  grid.cp() > 1 ? cat(" x cp ", grid.cp()) : "", " x tp ", grid.tp());
    if (world.size > 1)
      std::printf(
          "distributed: %d ranks (%s) on %s, %s backend, %d thread(s) each; global batch %lld = %lld "
          "x %lld micro-batches x %lld ranks; gradients in %s\n",
          world.size, shape.c_str(), dev.str().c_str(), comm::backend_name(backend), threads, (long long)plan.global(),
          (long long)plan.micro, (long long)accum, (long long)plan.dp, ddp ? ddp->bucket_summary().c_str() : "-");
    std::printf("%s\n", optimizer_line(cfg).c_str());
    if (zero)
      std::printf(
          "ZeRO-1: %s state sharded over %d %s ranks: %.2f MiB of moments on this rank, %.2f MiB without ZeRO\n",
          cfg.s("optimizer") == "adamw8bit" ? "8-bit AdamW" : "AdamW", replicas.size(),
          grid.cp() > 1 ? "dp x cp" : "dp", double(zero->shard_state_bytes()) / 1048576.0,
          double(model.num_parameters()) * optimizer_bytes_per_param(cfg) / 1048576.0);
    std::printf("blas: %s; exp: libmvec %s\n", cpu::blas_info().c_str(), cpu::vmath_isa());
  }
  // The weights' bf16 copies kept between steps (engine/compute_copies.h):
  // only where the fused AdamW is the one writer of the masters.
  ComputeCopies copies(model.parameters());
  AdamW* const fused_adamw = zero ? nullptr : dynamic_cast<AdamW*>(&opt);
  const bool keep_copies =
      dev.type != DeviceType::cpu && fused_adamw && precision_policy(precision).compute == DType::bf16;
  if (keep_copies) fused_adamw->set_compute_copies(&copies);
  const Autocast ac(precision, keep_copies ? &copies : nullptr);
  apply_precision(precision, dev);                // O1: TF32 GEMMs on cuda
  set_gemm_impl(parse_gemm_impl(cfg.s("gemm")));  // --gemm mma: our tensor-core GEMM
  if (lead) std::printf("%s\n", precision_summary(precision, dev).c_str());
  // fp16 gradients need a loss scale (bf16 has fp32's range and does not).
  std::unique_ptr<LossScaler> scaler;
  if (ac.policy().loss_scaling == LossScaling::dynamic) {
    LossScalerOptions lso;
    lso.init_scale = cfg.f("loss_scale_init");
    lso.growth_interval = cfg.i("loss_scale_growth_interval");
    scaler = std::make_unique<LossScaler>(lso);
    if (resumed.contains("loss_scaler")) {
      const nlohmann::json& ls = resumed["loss_scaler"];
      scaler->load_state(
          {ls.at("scale").get<double>(), ls.at("clean_run").get<int64_t>(), ls.at("skipped").get<int64_t>()});
    }
  }
  if (lead) std::printf("data: %s\n", task->data_summary().c_str());

  {
    // Before the first step: the planned peak against the device's free memory.
    MemoryPlan mp;
    mp.state_bytes =
        state_bytes(model.num_parameters(), precision, zero ? replicas.size() : 1, optimizer_bytes_per_param(cfg));
    mp.activations_per_sample = task->activation_bytes_per_sample(precision);
    // A stage holds the activations of the micro-batches in flight: all of them under afab, at most pp under 1f1b.
    mp.micro = plan.micro;
    mp.in_flight = mp_in_flight;
    const std::string line = check_memory_plan(mp, dev, cfg.f("memory_limit_gb"));
    if (lead) std::printf("%s\n", line.c_str());
  }
  out.begin_output();  // inputs are all valid: now output may begin
  Progress progress(out_dir + "/metrics.jsonl", cfg.i("log_every"), start, lead, task->unit(),
                    out.tensorboard_dir(cfg.s("tensorboard")));
  // MFU per device: the job's FLOP/s / world size / this device's peak.
  MfuPeak peak(dev, precision, task->peak_gemm(), progress);
  const double flops_per_step = task->flops_per_step();
  // On the cpu, the step's cached blocks go back to the system before a
  // validation or a sample: their tensors are other sizes, and the host's
  // allocations outside the allocator (a sample's vectors) need the address
  // space under ulimit -v. Rare enough that the next step's new mappings cost nothing.
  auto free_cached = [&] {
    if (dev.type == DeviceType::cpu) allocator_for(dev).empty_cache();
  };
  auto validation = [&](int64_t step) {
    free_cached();
    const EvalResult r = task->evaluate(ac);
    progress.val(step, r.loss, r.metrics, r.line);
  };
  if (start > 0)
    progress.message("resumed from " + from + " at step " + std::to_string(start));
  else
    validation(0);

  // On emu/cuda (without loss scaling) the step runs on the device with no
  // host read until it is done, eagerly or, at O3, as a CUDA graph.
  std::unique_ptr<GpuTrainStep> gpu_step;
  if (dev.type != DeviceType::cpu && !scaler)
    gpu_step = std::make_unique<GpuTrainStep>(
        model.parameters(), opt, accum, [&](const Tensor& x, const Tensor& y) { return task->loss(x, y, ac); },
        cfg.f("grad_clip"), ac.policy().cuda_graph, ddp.get(), zero.get(), tp_grads.active() ? &tp_grads : nullptr);
  // --kernel_profile N: step N's kernels (step_profile.h); at O3 step N runs
  // eagerly and the capture comes after it.
  StepProfile step_profile(cfg.i("kernel_profile") > start ? cfg.i("kernel_profile") : 0, dev, precision,
                           cfg.s("model_gpu"), cfg.s("out_dir"), lead);
  if (gpu_step && step_profile.active()) gpu_step->set_eager_steps(step_profile.step() - start);
  // Count-only emu: the numbers are meaningless, so their checks are off.
  const bool counting = dev.type == DeviceType::emu && emu::count_only();
  if (counting && lead)
    std::printf(
        "emu: count-only (ENGINE_EMU_COUNT_ONLY=1): kernels are checked and counted, not run; the losses "
        "are meaningless\n");
  if (gpu_step && pipe)
    gpu_step->set_pipeline({pipe.get(),
                            [&](const Tensor& in, const MicroBatch& b) { return task->stage_forward(in, b, ac); },
                            task->stage_io(ac), tied, uncounted, embed_comm.get()});
  // The samplers and the RNGs are counter-based: their positions are
  // functions of the step, recorded in state.json so the file says so explicitly.
  auto save_checkpoint = [&](int64_t done) {
    const uint64_t seed = uint64_t(cfg.i("seed"));
    nlohmann::json run_state{{"sampler", task->data_state(done)},
                             {"rng",
                              {{"kind", "counter-based SplitMix64, value i of stream s = f(s, i)"},
                               {"init_seed", seed},
                               {"sample_seed", seed * 977 + uint64_t(done)}}}};
    if (scaler) {
      const LossScaler::State ls = scaler->state();
      run_state["loss_scaler"] = {{"scale", ls.scale}, {"clean_run", ls.clean_run}, {"skipped", ls.skipped}};
    }
    // ZeRO: gathered over dp; tp: gathered to full shapes; every rank taking part.
    const auto opt_state = task->gather_for_checkpoint(optim.state());
    if (lead) task->save_checkpoint(ckpt_dir, opt_state, done, cfg.json(), run_state);
  };
  // The final, periodic, clock's and stopping checkpoints (run_checkpoints.h).
  RunCheckpoints checkpoints(save_checkpoint, ckpt_dir, cfg.f("checkpoint_minutes"), cfg.i("checkpoint_every"),
                             cfg.i("keep_checkpoints"), progress, lead);
  int stopped_by = 0;  // the signal that stopped the run (0: it ran to its end)
  task->start(start);
  // What each group's communicator sends per training step (forward,
  // backward, gradients, optimizer; not validation): the figures of
  // docs/distributed.md, tensor_parallel.md and pipeline.md, measured (Communicator::bytes_sent).
  const std::vector<std::pair<const char*, const comm::Communicator*>> comms{
      {"tp", tp_comm.get()},
      {"cp", cp_comm.get()},
      {grid.cp() > 1 ? "dpcp" : "dp", dp_comm.get()},
      {"pp", pp_comm.get()},
      {"embed", embed_comm.get()}};
  std::vector<double> step_bytes(comms.size(), 0.0);
  const auto t_start = std::chrono::steady_clock::now();
  BubbleMeter bubble;  // pp: the steps after the first that ran host code (not graph replays)
  double step_time_avg = 0;
  bool replay_reported = false;
  const int64_t end = cfg.i("stop_after") > 0 ? std::min(steps, start + cfg.i("stop_after")) : steps;
  for (int64_t step = start; step < end; ++step) {
    inject_fault(step + 1);
    // The window opens at its first step, or at the first step this run makes
    // inside it (a resumed run); it closes after its last step, or this run's.
    if (!window.empty() && step + 1 == std::max(window.first, start + 1) && step + 1 <= window.last) {
      profile::profiler_start();
      progress.message(
          cat("profiler: recording steps ", step + 1, " to ", window.last,
              dev.type == DeviceType::cuda ? "" : " (no CUDA profiler on this device: nothing to record)"));
    }
    std::optional<profile::Range> step_range(std::in_place, "step " + std::to_string(step + 1));
    step_profile.before(step + 1);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < comms.size(); ++i)
      if (comms[i].second) step_bytes[i] -= comms[i].second->bytes_sent();
    double loss_sum = 0, norm = 0;
    auto add_loss = [&](double l) {
      ENGINE_CHECK(counting || std::isfinite(l), "loss is ", l, " at step ", step + 1, " (diverged: lower lr?)");
      loss_sum += l;
    };
    if (!gpu_step && !pipe) {  // step loop 1 of 3, the host step (the map at the top of this file)
      opt.set_lr(sched.lr_at(step));
      opt.zero_grad();
      for (int64_t m = 0; m < accum; ++m) {
        MicroBatch b;
        {
          const profile::Range r("data");
          b = task->next(m);
        }
        Tensor loss;
        {
          const profile::Range r("forward");
          loss = task->loss(b.x.to(dev), b.y.to(dev), ac);
          add_loss(loss.item());
        }
        if (accum > 1) loss = scale(loss, 1.0 / double(accum));
        if (ddp) ddp->set_sync(m + 1 == accum);  // only the last micro-step communicates
        const profile::Range r("backward");
        (scaler ? scaler->scale(loss) : loss).backward();
      }
      {
        const profile::Range r("communication");
        if (ddp) ddp->finish();                                   // gradients averaged over dp: the same on every rank
        if (tp_grads.active() && !zero) tp_grads.sync_partial();  // ZeRO sums them in its shard
      }
      const profile::Range opt_range("optimizer");
      if (scaler) {
        // Clip the unscaled gradients; an overflow skips the step and halves the scale.
        norm = scaler->unscale_(opt);
        if (std::isfinite(norm)) clip_grad_norm(model.parameters(), cfg.f("grad_clip"));
        if (!scaler->step(opt))
          progress.message(
              cat("step ", step + 1, ": fp16 gradient overflow, step skipped, loss scale now ", scaler->get_scale()));
      } else {
        if (zero) {
          zero->set_lr(opt.lr());
          norm = zero->clip_and_step(cfg.f("grad_clip"));  // the global norm over the shards
        } else {
          norm = tp_grads.active() ? tp_clip_grad_norm(tp_grads, cfg.f("grad_clip"))
                                   : clip_grad_norm(model.parameters(), cfg.f("grad_clip"));
          opt.step();
        }
        ENGINE_CHECK(counting || std::isfinite(norm), "gradient norm is ", norm, " at step ", step + 1);
      }
    } else if (!gpu_step) {  // step loop 2 of 3, the host pipeline step
      opt.set_lr(sched.lr_at(step));
      opt.zero_grad();
      const std::vector<Tensor> losses = pipe->run(
          [&](int64_t m, const Tensor& in) {
            MicroBatch b;
            {
              const profile::Range r("data");
              b = task->next(m);
            }
            return task->stage_forward(in, b, ac);
          },
          task->stage_io(ac), ddp.get());
      for (const Tensor& l : losses) add_loss(l.item());
      if (step > start) bubble.add(*pipe);  // the first step warms the caches
      {
        const profile::Range r("communication");
        if (ddp) ddp->finish();
        if (tp_grads.active() && !zero) tp_grads.sync_partial();  // ZeRO sums them in its shard
        sum_tied_gradients(tied, *embed_comm, zero ? ddp.get() : nullptr);
      }
      const profile::Range opt_range("optimizer");
      if (zero) {
        zero->set_lr(opt.lr());
        norm = zero->clip_and_step(cfg.f("grad_clip"));  // summed over dp, tp and the stages
      } else {
        norm = pipeline_clip_grad_norm(model.parameters(), tp_grads, uncounted, *pp_comm, cfg.f("grad_clip"));
        opt.step();
      }
      ENGINE_CHECK(counting || std::isfinite(norm), "gradient norm is ", norm, " at step ", step + 1);
    } else {  // step loop 3 of 3, the device step: eager or a CUDA graph, pipelined or not
      const GpuTrainStep::Result r = gpu_step->run(
          [&](int64_t m) {
            const profile::Range data("data");
            return task->next(m);
          },
          sched.lr_at(step));
      if (r.replayed && !replay_reported) {
        progress.message("O3: the training step was captured as a CUDA graph on " + dev.str() +
                         "; every step from now on is one graph replay");
        replay_reported = true;
      }
      for (double l : r.losses) add_loss(l);
      if (pipe && !r.replayed && step > start) bubble.add(*pipe);  // a replay runs no host code: nothing to time
      norm = r.grad_norm;
      ENGINE_CHECK(counting || std::isfinite(norm), "gradient norm is ", norm, " at step ", step + 1);
    }
    for (size_t i = 0; i < comms.size(); ++i)
      if (comms[i].second) step_bytes[i] += comms[i].second->bytes_sent();
    nlohmann::json mem_json = nlohmann::json::object();
    if (step == start) {
      const MemoryReport mr =
          memory_report(model, zero ? static_cast<const Optimizer&>(zero->shard_optimizer()) : opt, precision);
      const std::string stage =
          pipe ? cat("pipeline stage ", pipe->stage(), " of ", grid.pp(), " (", comm::pipe_schedule_name(pipe_schedule),
                     ": the activations of up to ", mp_in_flight, " micro-batches at once); ")
               : "";
      progress.message(grid.tp() > 1   ? cat(stage, "tensor parallel: per rank, the shards of tp rank 0 of ", grid.tp(),
                                             " (the others hold as much)\n", mr.str())
                       : grid.cp() > 1 ? cat(stage, "context parallel: per rank, with ", grid.cp(),
                                             " slices of the sequence\n", mr.str())
                       : pipe          ? cat(stage, "per rank (rank 0's stage)\n", mr.str())
                                       : mr.str());
      // The first step's metrics line carries rank 0's memory (what tp and ZeRO buy).
      mem_json = {{"memory_per_rank",
                   {{"parameters", mr.params},
                    {"weights_bytes", mr.weights + mr.master},
                    {"grads_bytes", mr.grads},
                    {"optimizer_bytes", mr.optimizer},
                    {"peak_bytes", allocator_for(dev).stats().peak_bytes}}}};
    }
    // The global batch's loss: every rank adds its own; the tp ranks of a dp
    // rank hold the same one, its cp ranks the means of their slices.
    loss_sum = comm::all_reduce_host(loss_sum, comm::HostOp::sum, cat("the loss of step ", step + 1)) /
               double(world.size / grid.pp());  // only the last stage has losses
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (const std::string table = step_profile.after(step + 1); !table.empty()) progress.message(table);
    if (step_profile.active() && step == step_profile.step() + 1 && gpu_step && gpu_step->captured())
      progress.message(step_profile.replay_line(step + 1, dt));
    step_time_avg = step == start ? dt : 0.9 * step_time_avg + 0.1 * dt;
    StepStats s;
    s.step = step + 1, s.total = steps, s.loss = loss_sum / double(accum), s.lr = opt.lr(), s.grad_norm = norm;
    s.items_per_s = double(task->items_per_step()) / dt;
    s.flops_per_s = flops_per_step / dt;
    s.data = task->take_data_stats();
    s.mfu = peak.mfu(s.flops_per_s / double(world.size));  // per device
    s.eta_s = step_time_avg * double(steps - step - 1);
    s.mem_bytes = allocator_for(dev).stats().peak_bytes;
    s.extra = mem_json;
    progress.step(s);
    const int64_t done = step + 1;
    if (cfg.i("check_replicas") > 0 && done % cfg.i("check_replicas") == 0) {
      try {
        comm::check_replicas(model.named_parameters(), replicas);
        // The replicated parameters agree across tp, bit for bit.
        if (tp_grads.active()) comm::check_replicas(tp_replicated, grid.tp_group());
        // The first and last stage's copies of a tied table agree (a group of one on the other stages).
        if (pipe) comm::check_replicas(named(tied), grid.embed_group());
      } catch (const comm::ReplicaDrift& e) {
        throw WorldError(cat("step ", done, ": ", e.what()));  // every rank found it
      }
    }
    if ((stopped_by = checkpoints.before_evaluation(done, end)) != 0) break;
    const int64_t ve = cfg.i("val_every"), se = cfg.i("sample_every");
    if ((ve > 0 && done % ve == 0) || done == steps) {
      const profile::Range r("validation");
      validation(done);
    }
    if (task->has_samples() && ((se > 0 && done % se == 0) || done == steps)) {
      const profile::Range r("sample");
      free_cached();
      if (task->sample_on_every_rank()) {
        const std::string text = task->sample(done);
        if (lead) progress.message(text);
      } else {
        if (lead) progress.message(task->sample(done));
        comm::barrier_world(cat("while rank 0 draws the text sample of step ", done));
      }
    }
    checkpoints.after_evaluation(done, end);
    step_range.reset();  // closed inside the window
    if (!window.empty() && (done == window.last || (done == end && done >= window.first && done < window.last))) {
      profile::profiler_stop();  // the step's work is done: its results were read above
      progress.message(cat("profiler: stopped after step ", done));
    }
  }
  progress.finish();
  if (stopped_by != 0) return kStoppedExit;
  if (pipe && !bubble.empty()) {
    const double idle = bubble.idle();  // collective: every rank runs the same steps
    progress.message(cat("pipeline ", comm::pipe_schedule_name(pipe_schedule), ", pp ", grid.pp(), ", m ", accum,
                         ": stages idle ", std::round(idle * 1000) / 10, "% of the step on average (the bubble ",
                         "(pp - 1) / (m + pp - 1) = ", std::round(comm::ideal_bubble(grid.pp(), accum) * 1000) / 10,
                         "%), steps 2 on"));
  }
  if (world.size > 1 && end > start) {
    std::string line = "communication per step, rank 0 (ring model, as sent):";
    for (size_t i = 0; i < comms.size(); ++i)
      if (comms[i].second && comms[i].second->size() > 1)
        line += cat(" ", comms[i].first, " ", step_bytes[i] / double(end - start), " bytes;");
    progress.message(line);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  progress.message(cat("done: ", end - start, " steps in ", std::round(secs * 10) / 10, " s; checkpoint ", ckpt_dir,
                       " (", task->checkpoint_note(), ")"));
  progress.message(
      cat("plot: /usr/bin/python3 scripts/plot.py metrics ", out_dir, "/metrics.jsonl -o ", out_dir, "/metrics.png"));
  // Written after the last step's check: a failure here still fails the run (its checkpoint is saved).
  if (!progress.io_error().empty()) {
    std::fflush(stdout);  // the lines before it come before it in a log
    std::fprintf(stderr, "train: error: %s; the checkpoint of step %lld is saved\n", progress.io_error().c_str(),
                 (long long)end);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A write past a file-size limit (ulimit -f, some quotas) would kill the
  // process by SIGXFSZ mid-write; ignored, it fails with EFBIG and the run
  // stops as on a full disk: the file and the reason named, a checkpoint kept.
  std::signal(SIGXFSZ, SIG_IGN);
  // From the first instruction: a scheduler's signal may come while MPI and
  // the data start (a requeued job's time-limit signal can be seconds away).
  install_stop_handlers(false);
  const int rc = run_or_report([&] { return run(argc, argv); });
  comm::finalize_world();
  return rc;
}
