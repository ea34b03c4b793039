// The ViT as a training task (task.h), on HDF5 data through the threaded
// loader (io/loader.h):
//   dataset images:  one file of labelled images (io/image_dataset.h), the
//                    classifier head, cross-entropy; validation: loss and
//                    top-1 accuracy;
//   dataset weather: a directory of yearly field files
//                    (io/weather_dataset.h), the dense head, MSE on the
//                    normalised fields; validation: loss, lat-weighted RMSE
//                    and ACC per channel beside the persistence forecast's
//                    (models/vit/forecast_metrics.h).
// Batches are shuffled per epoch and dealt rank-major (io/sampler.h), so the
// data position is a function of the step, which state.json records as
// epoch and step of the epoch.
#pragma once
#include <memory>

#include "comm/communicator.h"
#include "models/train/task.h"
#include "models/train/train_config.h"
#include "models/train/train_dist.h"

namespace eng::models {

// Checks the ViT-only options every rank makes alike (before any file is read).
void check_vit_options(const TrainConfig& c);
// --pp: blocks per stage, from --pp_layers or as even as they go (a ViT's
// blocks cost alike; its patch embedding and head are small beside one).
std::vector<int64_t> vit_stage_layers(const TrainConfig& c);

// With mg.split() the model is split over tp and cp (models/vit/vit_tp.h);
// its checkpoints are gathered to the one-process layout, so they load at
// any tp or cp.
std::unique_ptr<TrainTask> make_vit_task(const TrainConfig& c, const BatchPlan& plan, Device dev,
                                         const ModelGrid& mg = {});

}  // namespace eng::models
