// --optimizer (optimizer_option.h).
#include "models/train/optimizer_option.h"

#include "base/error.h"

namespace eng::models {

namespace {
AdafactorOptions adafactor_options(const TrainConfig& c) {
  AdafactorOptions o;
  o.beta1 = c.f("adafactor_beta1");
  o.relative_step = c.b("adafactor_relative_step");
  o.scale_parameter = c.b("adafactor_scale_parameter");
  o.warmup_init = c.b("adafactor_warmup_init");
  return o;
}
}  // namespace

WarmupDecayLR make_lr_schedule(const TrainConfig& c, int64_t steps) {
  return WarmupDecayLR(parse_lr_shape(c.s("lr_schedule")), c.f("lr"), c.f("min_lr"), c.i("warmup_steps"), steps,
                       c.f("wsd_decay_fraction"));
}

void check_optimizer_options(const TrainConfig& c) {
  const std::string o = c.s("optimizer");
  ENGINE_USER_CHECK(o == "adamw" || o == "adamw8bit" || o == "adafactor" || o == "sgd", "config: optimizer '", o,
                    "': adamw, adamw8bit, adafactor or sgd");
  parse_lr_shape(c.s("lr_schedule"));  // a one-line error naming the choices
  ENGINE_USER_CHECK(c.f("wsd_decay_fraction") >= 0 && c.f("wsd_decay_fraction") <= 1,
                    "config: wsd_decay_fraction must be in [0, 1], got ", c.f("wsd_decay_fraction"));
  // torch.optim's ranges: a beta of 1 never forgets (and 1 - beta2^t is 0: a
  // division by zero), a negative one oscillates; decay below 0 grows weights.
  for (const char* k : {"beta1", "beta2"})
    ENGINE_USER_CHECK(c.f(k) >= 0 && c.f(k) < 1, "config: ", k, " = ", c.f(k), ": in [0, 1) (",
                      std::string(k) == "beta1" ? "0.9" : "0.95", " is usual)");
  ENGINE_USER_CHECK(c.f("weight_decay") >= 0, "config: weight_decay = ", c.f("weight_decay"),
                    ": must be >= 0 (0: none)");
  const double b1 = c.f("adafactor_beta1");
  ENGINE_USER_CHECK(b1 >= 0 && b1 < 1, "config: adafactor_beta1 = ", b1, ": in [0, 1) (0: no first moment)");
  ENGINE_USER_CHECK(!c.b("adafactor_warmup_init") || c.b("adafactor_relative_step"),
                    "config: adafactor_warmup_init needs adafactor_relative_step (it shapes the relative step)");
  if (o == "adamw") return;
  ENGINE_USER_CHECK(c.i("zero") == 0 || o == "adamw8bit", "config: zero 1 with optimizer ", o, ": ZeRO-1 shards ",
                    o == "adafactor"
                        ? "AdamW's moments; Adafactor's state is already under 0.1 B per matrix parameter, so "
                          "run it with --zero 0"
                        : "AdamW's moments; SGD's momentum is not sharded, run it with --zero 0");
  ENGINE_USER_CHECK(
      c.i("tp") == 1 || o != "adafactor", "config: optimizer adafactor with tp = ", c.i("tp"),
      ": the row and column statistics and the RMS of a split matrix would have to be reduced over tp; use "
      "adamw with tensor parallelism");
  ENGINE_USER_CHECK(c.i("tp") == 1 || o != "sgd", "config: optimizer sgd with tp = ", c.i("tp"),
                    " is not supported; use adamw");
  // --device auto is decided later (check_optimizer_device): cpu where no GPU answers.
  ENGINE_USER_CHECK(o != "sgd" || c.s("device") == "cpu" || c.s("device") == "auto", "config: optimizer sgd on ",
                    c.s("device"), ": SGD has no GPU kernel; use adamw, adamw8bit or adafactor there");
}

void check_optimizer_device(const TrainConfig& c, Device dev) {
  ENGINE_USER_CHECK(c.s("optimizer") != "sgd" || dev.type == DeviceType::cpu, "config: optimizer sgd on ", dev.str(),
                    c.s("device") == "auto" ? " (--device auto found a GPU)" : "",
                    ": SGD has no GPU kernel; use adamw, adamw8bit or adafactor there, or --device cpu");
}

std::unique_ptr<Optimizer> make_optimizer(const TrainConfig& c, std::vector<ParamGroup> groups) {
  const std::string o = c.s("optimizer");
  const double lr = c.f("lr"), b1 = c.f("beta1"), b2 = c.f("beta2");
  if (o == "adamw8bit") return std::make_unique<AdamW8bit>(std::move(groups), lr, b1, b2);
  if (o == "adafactor") return std::make_unique<Adafactor>(std::move(groups), lr, adafactor_options(c));
  if (o == "sgd") return std::make_unique<SGD>(std::move(groups), lr, b1);
  return std::make_unique<AdamW>(std::move(groups), lr, b1, b2);
}

double optimizer_bytes_per_param(const TrainConfig& c) {
  const std::string o = c.s("optimizer");
  return o == "adamw8bit" ? 2.0 + 8.0 / 256.0 : o == "sgd" ? 4.0 : o == "adafactor" ? 0.1 : 8.0;
}

std::string optimizer_line(const TrainConfig& c) {
  const std::string o = c.s("optimizer");
  const double wd = c.f("weight_decay");
  if (o == "adamw")
    return cat("optimizer: adamw (beta1 ", c.f("beta1"), ", beta2 ", c.f("beta2"), ", weight decay ", wd, ")");
  if (o == "adamw8bit")
    return cat("optimizer: adamw8bit (beta1 ", c.f("beta1"), ", beta2 ", c.f("beta2"), ", weight decay ", wd,
               "; moments in 8 bits, blocks of 256, fp32 for tensors under 4096 elements)");
  if (o == "sgd") return cat("optimizer: sgd (momentum ", c.f("beta1"), ", weight decay ", wd, ")");
  const AdafactorOptions a = adafactor_options(c);
  return cat("optimizer: adafactor (",
             a.relative_step ? cat("relative step", a.warmup_init ? " with warmup_init" : "", ", lr ignored")
                             : std::string("external lr"),
             a.scale_parameter ? ", scale_parameter" : "", a.beta1 > 0 ? cat(", beta1 ", a.beta1) : ", no beta1",
             ", weight decay ", wd, ")");
}

}  // namespace eng::models
