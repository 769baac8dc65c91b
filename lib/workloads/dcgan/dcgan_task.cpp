// DcganTask (dcgan_task.h).
#include "workloads/dcgan/dcgan_task.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.h"
#include "core/init.h"
#include "data/idx.h"
#include "dist/fingerprint.h"
#include "run/csv.h"
#include "run/output_files.h"
#include "run/run_info.h"
#ifdef PDNN_HAVE_OPENCV
#include "data/image_grid.h"
#endif

namespace pdnn {

namespace {
const std::vector<std::string> kIterationColumns = {
    "app", "model", "dataset", "device", "batch", "epoch", "iteration",
    "d_loss", "g_loss", "d_x", "d_g_z", "git_rev", "timestamp"};

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
}  // namespace

DcganTask::DcganTask(Context& ctx, Model& g, Model& d, Optimizer& opt_g,
                     Optimizer& opt_d, const Dataset& data, DcganTaskOptions opt)
    : ctx_(ctx), g_(g), d_(d), opt_g_(opt_g), opt_d_(opt_d), data_(data), opt_(std::move(opt)),
      trainer_(g, d, opt_g, opt_d, opt_.nz,
               opt_.images_per_epoch > 0 ? (opt_.images_per_epoch + opt_.batch - 1) / opt_.batch
                                         : (data.size() + opt_.batch - 1) / opt_.batch,
               opt_.cuda_graph, opt_.overlap_batch_copy),
      x_(data.sample_shape().numel() > 0 ? Shape{opt_.batch, data.sample_shape()[0],
                                                 data.sample_shape()[1], data.sample_shape()[2]}
                                         : Shape{},
         DType::F32, ctx.staging_allocator()) {
  PDNN_CHECK(opt_.batch >= 1, "dcgan: batch %lld must be >= 1",
             static_cast<long long>(opt_.batch));
  PDNN_CHECK(opt_.images_per_epoch >= 0 && opt_.images_per_epoch <= data.size(),
             "dcgan: %lld images per epoch, the training set has %lld",
             static_cast<long long>(opt_.images_per_epoch), static_cast<long long>(data.size()));
  PDNN_CHECK(opt_.samples >= 0 && (opt_.samples == 0 || !opt_.samples_out.empty()),
             "dcgan: %lld samples need a file to go to", static_cast<long long>(opt_.samples));
  PDNN_CHECK(opt_.samples_epochs.empty() || opt_.samples > 0,
             "dcgan: sample epochs without a number of samples");
  PDNN_CHECK(opt_.samples_epochs.size() <= 1 ||
                 opt_.samples_out.find("{epoch}") != std::string::npos,
             "dcgan: samples after %zu epochs need \"{epoch}\" in the file name (%s)",
             opt_.samples_epochs.size(), opt_.samples_out.c_str());
#ifndef PDNN_HAVE_OPENCV
  PDNN_CHECK(opt_.samples_dir.empty(),
             "dcgan: this pdnn was built without OpenCV: no sample grids (PNG) can be written");
#endif
  trainer_.set_defer_g(opt_.defer_g);
  // Checked here, before any output is touched; written by rank 0 alone (data-parallel).
  if (!opt_.iterations_csv.empty())
    iterations_ = std::make_unique<CsvWriter>(opt_.iterations_csv, kIterationColumns);
}

DcganTask::~DcganTask() = default;

int64_t DcganTask::begin_epoch(Context& ctx, int epoch, uint64_t data_seed) {
  if (!loader_ || !have_seed_ || data_seed != data_seed_) {
    LoaderOptions lo;
    lo.batch = opt_.batch;
    lo.shuffle = true;
    lo.seed = data_seed;
    lo.images_per_epoch = opt_.images_per_epoch;
    if (comm_) {
      lo.shard = comm_->rank();
      lo.shards = comm_->size();
    }
    loader_ = std::make_unique<DatasetLoader>(data_, lo);
    data_seed_ = data_seed;
    have_seed_ = true;
  }
  // After a resume: the checkpoint's epoch may have been saved by a run killed before its grid.
  if (resumed_epoch_ >= 1 && !opt_.samples_dir.empty() && !file_exists(grid_path(resumed_epoch_)))
    write_grid(ctx, resumed_epoch_);
  if (resumed_epoch_ >= 1 && samples_after(resumed_epoch_) &&
      !file_exists(samples_path(resumed_epoch_)))
    write_samples(ctx, samples_path(resumed_epoch_));
  resumed_epoch_ = -1;
  epoch_ = epoch;
  loader_->start_epoch(epoch);
  g_.train(true);
  d_.train(true);
  trainer_.reset_metrics(ctx);
  t_epoch_ = std::chrono::steady_clock::now();
  return loader_->num_batches();
}

int64_t DcganTask::train_batch(Context& ctx, int64_t b) {
  const int64_t nb = loader_->load(b, x_, labels_);
  if (!comm_) {
    trainer_.step(ctx, x_);
    return nb;
  }
  // This rank's rows of the global batch: the noise rows one process would draw for them.
  const int64_t rows = loader_->batch_rows(b);
  ctx.rng().set_row_shard({shard_rows(rows, comm_->rank(), comm_->size()).first, nb, rows});
  try {
    trainer_.step(ctx, x_, rows);
  } catch (...) {
    ctx.rng().set_row_shard({});
    throw;
  }
  ctx.rng().set_row_shard({});
  return rows;
}

GanMetrics DcganTask::global_metrics(Context& ctx) {
  GanMetrics m = trainer_.metrics(ctx);
  if (!comm_) return m;
  // The loss and mean-output slots hold each rank's share of the global means: they sum.
  double v[4] = {m.d_loss, m.g_loss, m.d_x, m.d_g_z};
  comm_->sum(v, 4, "the training metrics");
  m.d_loss = v[0];
  m.g_loss = v[1];
  m.d_x = v[2];
  m.d_g_z = v[3];
  // The farthest shard mean of any rank: each rank fills its own pair, the sum gathers them.
  const int n = comm_->size(), r = comm_->rank();
  std::vector<double> far(static_cast<size_t>(2 * n), 0.0);
  trainer_.shard_far(ctx, &far[static_cast<size_t>(2 * r)], &far[static_cast<size_t>(2 * r + 1)]);
  comm_->sum(far.data(), 2 * n, "the shards' distances from 0 and 1");
  m.d_x_far = m.d_g_z_far = 0;
  for (int k = 0; k < n; ++k) {
    m.d_x_far = std::max(m.d_x_far, far[static_cast<size_t>(2 * k)]);
    m.d_g_z_far = std::max(m.d_g_z_far, far[static_cast<size_t>(2 * k + 1)]);
  }
  return m;
}

std::vector<double> DcganTask::train_metrics(Context& ctx) {
  const GanMetrics m = global_metrics(ctx);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_epoch_).count();
  return {m.mean(m.d_loss), m.mean(m.g_loss), m.mean(m.d_x), m.mean(m.d_g_z),
          m.steps > 0 ? secs / static_cast<double>(m.steps) : 0.0};
}

std::string DcganTask::step_mode() const {
  if (g_.device() == Device::CPU) return "";
  return trainer_.graph_replays() > 0 ? "graph" : "eager";
}

void DcganTask::check_g_current(const char* what) const {
  PDNN_CHECK(!trainer_.g_update_pending(),
             "dcgan task: %s while G's deferred update is pending (evaluate() applies it)", what);
}

std::vector<double> DcganTask::evaluate(Context& ctx) {
  trainer_.flush(ctx);  // every rank, before anything of the epoch's end reads G
  if (comm_) {
    // BatchNorm's running statistics follow each rank's rows: averaged over the ranks, so the
    // grid, the weight check and the checkpoint see one set.
    for (Model* m : {&g_, &d_})
      for (const Param& p : m->buffers()) {
        Tensor h = p.value->device() == Device::CPU ? *p.value : p.value->to(Device::CPU, ctx);
        comm_->sum(h.data(), h.numel(), "the buffer average");
        for (int64_t i = 0; i < h.numel(); ++i) h.data()[i] /= static_cast<float>(comm_->size());
        if (p.value->device() != Device::CPU) copy_into(*p.value, h, ctx);
      }
  }
  if (!iterations_) return {};
  std::vector<GanIteration> its = trainer_.history(ctx);
  if (comm_) {
    // Each rank's rows hold its shares of the global means: summed, they are the batch's.
    std::vector<double> v;
    for (const GanIteration& it : its) v.insert(v.end(), {it.d_loss, it.g_loss, it.d_x, it.d_g_z});
    comm_->sum(v.data(), static_cast<int64_t>(v.size()), "the iteration rows");
    for (size_t i = 0; i < its.size(); ++i)
      its[i] = {v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]};
  }
  if (!root()) return {};
  const RunInfo info = run_info(ctx);
  const int64_t per_epoch = loader_->num_batches();
  const std::string now = iso8601_utc_now();
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < its.size(); ++i) {
    const GanIteration& it = its[i];
    rows.push_back({"pdnn", opt_.model, opt_.dataset, device_name(ctx.device()),
                    std::to_string(opt_.batch), std::to_string(epoch_ + 1),
                    std::to_string(epoch_ * per_epoch + static_cast<int64_t>(i) + 1),
                    fmt(it.d_loss, 6), fmt(it.g_loss, 6), fmt(it.d_x, 6), fmt(it.d_g_z, 6),
                    info.git_rev, now});
  }
  // One rewrite of the file per epoch: a row at a time, the 300 epochs of the study rewrote
  // (and synced) a growing file 12,300 times.
  iterations_->add_rows(rows);
  return {};
}

std::string DcganTask::epoch_status(Context& ctx) {
  const GanMetrics m = global_metrics(ctx);
  if (m.steps == 0 || m.d_x_far >= opt_.stuck_eps || m.d_g_z_far >= opt_.stuck_eps) return "";
  const int dx = m.mean(m.d_x) > 0.5 ? 1 : 0, dgz = m.mean(m.d_g_z) > 0.5 ? 1 : 0;
  return strprintf(
      "stuck: every batch mean of D(x) was within %g of %d and of D(G(z)) within %g of %d all "
      "epoch (%s; G learns nothing from a certain D: try another seed)",
      opt_.stuck_eps, dx, opt_.stuck_eps, dgz,
      dx == 1 && dgz == 0 ? "the discriminator won" : "the discriminator is saturated");
}

bool DcganTask::state_finite(Context& ctx) {
  trainer_.flush(ctx);
  return all_finite(ctx, g_, &opt_g_) && all_finite(ctx, d_, &opt_d_);
}

void DcganTask::save_checkpoint(const std::string& path, int64_t epoch,
                                const std::map<std::string, int64_t>& values) {
  check_g_current("a checkpoint");
  pdnn::save_checkpoint(path, {{"G", &g_, &opt_g_}, {"D", &d_, &opt_d_}}, epoch, values, &ctx_);
}

CheckpointInfo DcganTask::load_checkpoint(const std::string& path) {
  check_g_current("loading a checkpoint");
  const CheckpointInfo ck =
      pdnn::load_checkpoint(path, {{"G", &g_, &opt_g_}, {"D", &d_, &opt_d_}}, &ctx_);
  resumed_epoch_ = static_cast<int>(ck.epoch);
  // Iteration rows of epochs past the checkpoint (a run killed after writing them, before its
  // checkpoint) are redone: drop them, from the end, as the loop does with its own rows.
  if (iterations_ && root()) {
    const auto rows = iterations_->rows();
    size_t keep = rows.size();
    const std::string batch = std::to_string(opt_.batch);
    while (keep > 0) {
      const auto& f = rows[keep - 1];
      const bool ours = f.size() == kIterationColumns.size() && f[0] == "pdnn" &&
                        f[1] == opt_.model && f[2] == opt_.dataset && f[4] == batch &&
                        std::atoll(f[5].c_str()) > ck.epoch;
      if (!ours) break;
      --keep;
    }
    iterations_->drop_rows([keep](size_t i, const std::vector<std::string>&) { return i >= keep; });
  }
  return ck;
}

void DcganTask::save_weights(const std::string& path) {
  check_g_current("saving the weights");
  pdnn::save_checkpoint(path, {{"G", &g_, nullptr}, {"D", &d_, nullptr}}, 0, {}, &ctx_);
}

void DcganTask::distribute(Context& ctx, Communicator& comm) {
  PDNN_CHECK(!loader_ && !comm_, "dcgan task: distribute() after training began");
  const int n = comm.size();
  LoaderOptions plain;
  plain.batch = opt_.batch;
  plain.shuffle = false;
  plain.images_per_epoch = opt_.images_per_epoch;
  const EpochPlan plan(data_, plain, 0);
  const int64_t last = plan.batch_rows(plan.num_batches() - 1);
  // Every rank needs at least one image of every batch; every rank sees the same sizes, so
  // all fail here together.
  if (opt_.batch < n || last < n) Communicator::set_collective_error();
  PDNN_CHECK(opt_.batch >= n && last >= n,
             "--distributed: batch %lld over %d ranks (the last batch of an epoch: %lld of %lld "
             "images): every rank needs at least one image of each batch",
             static_cast<long long>(opt_.batch), n, static_cast<long long>(last),
             static_cast<long long>(plan.images()));
  comm_ = &comm;
  if (g_.device() != Device::CPU) comm.open_device();
  trainer_.distribute(comm, ctx);
}

std::vector<std::pair<std::string, std::string>> DcganTask::fingerprint(Context& ctx) {
  const Shape s = data_.sample_shape();
  return {{"the training data", dataset_hash(data_)},
          {"the models", g_.summary(Shape{opt_.batch, opt_.nz, 1, 1}) +
                             d_.summary(Shape{opt_.batch, s[0], s[1], s[2]})},
          {"the initial weights", hash_hex(state_hash(ctx))}};
}

uint64_t DcganTask::state_hash(Context& ctx) {
  trainer_.flush(ctx);
  return state_hash_of(ctx, d_, &opt_d_, state_hash_of(ctx, g_, &opt_g_));
}

std::string DcganTask::distributed_summary() const {
  const GradSync* g = trainer_.grad_sync_g();
  const GradSync* d = trainer_.grad_sync_d();
  if (!g || !d) return "";
  return "gradients: G " +
         (trainer_.defers_g() ? g->describe("the next step's real-batch pass of D (G's update "
                                            "deferred)")
                              : g->describe()) +
         "; D " + d->describe();
}

std::string DcganTask::grid_path(int epoch) const {
  return opt_.samples_dir + "/" + strprintf("epoch_%03d.png", epoch);
}

std::string DcganTask::samples_path(int epoch) const {
  std::string p = opt_.samples_out;
  const size_t at = p.find("{epoch}");
  if (at != std::string::npos) p.replace(at, 7, strprintf("%03d", epoch));
  return p;
}

bool DcganTask::samples_after(int epoch) const {
  return std::find(opt_.samples_epochs.begin(), opt_.samples_epochs.end(), epoch) !=
         opt_.samples_epochs.end();
}

void DcganTask::end_epoch(Context& ctx, int epoch) {
  if (!opt_.samples_dir.empty()) write_grid(ctx, epoch + 1);
  if (samples_after(epoch + 1)) write_samples(ctx, samples_path(epoch + 1));
}

void DcganTask::write_grid(Context& ctx, int epoch) {
#ifdef PDNN_HAVE_OPENCV
  Rng noise(Rng::at(data_seed_, kGridNoiseIndex));
  const Tensor grid = generate(ctx, noise, opt_.grid_samples);
  const std::string path = grid_path(epoch);
  create_parent_folders(path);
  write_image_grid_png(path, grid, 8, 2);
#else
  (void)ctx;
  (void)epoch;
#endif
}

Tensor DcganTask::generate(Context& ctx, Rng& noise, int64_t n) {
  PDNN_CHECK(n >= 1, "dcgan: generate %lld images", static_cast<long long>(n));
  check_g_current("generating samples");
  const Shape img = g_.output_shape(Shape{1, opt_.nz, 1, 1});
  Tensor out(Shape{n, img.c(), img.h(), img.w()});
  const int64_t chunk = opt_.batch;
  const int64_t per = img.numel();
  g_.train(false);
  Tensor z;
  for (int64_t b0 = 0; b0 < n; b0 += chunk) {
    const int64_t nb = std::min(chunk, n - b0);
    z = Tensor(Shape{nb, opt_.nz, 1, 1});
    init::normal(z, 0.f, 1.f, noise);  // the draws of ops::normal_fill, on the host
    const Tensor* zin = &z;
    if (g_.device() != Device::CPU) {
      // One grow-only device buffer: no memory changes hands, so the training step's CUDA
      // graph stays valid across the per-epoch grids.
      z_dev_.resize(z.shape(), DType::F32, g_.device(), ctx);
      copy_into(z_dev_, z, ctx);
      zin = &z_dev_;
    }
    const Tensor& y = g_.forward(ctx, *zin);
    const Tensor h = y.device() == Device::CPU ? y : y.to(Device::CPU, ctx);
    std::copy(h.data(), h.data() + nb * per, out.data() + b0 * per);
  }
  g_.train(true);
  return out;
}

void DcganTask::finish(Context& ctx) {
  if (opt_.samples > 0 && opt_.samples_epochs.empty()) write_samples(ctx, opt_.samples_out);
}

void DcganTask::write_samples(Context& ctx, const std::string& path) {
#ifdef PDNN_HAVE_OPENCV
  // The same noise for every file of a run (and in its PyTorch twin).
  Rng noise(Rng::at(data_seed_, kSampleNoiseIndex));
  const Shape img = g_.output_shape(Shape{1, opt_.nz, 1, 1});
  IdxImages idx;
  idx.n = opt_.samples;
  idx.channels = opt_.colour_samples ? img.c() : 1;
  idx.rows = img.h();
  idx.cols = img.w();
  idx.pixels.reserve(static_cast<size_t>(idx.n * idx.channels * idx.rows * idx.cols));
  // In chunks, so 10,000 float images never sit in memory at once.
  for (int64_t b0 = 0; b0 < opt_.samples; b0 += 1000) {
    const Tensor x = generate(ctx, noise, std::min<int64_t>(1000, opt_.samples - b0));
    const std::vector<uint8_t> bytes = opt_.colour_samples ? to_bytes(x) : to_grey_bytes(x);
    idx.pixels.insert(idx.pixels.end(), bytes.begin(), bytes.end());
  }
  create_parent_folders(path);
  write_idx_images(path, idx);
  std::printf("%lld samples (G in evaluation mode, %s %lldx%lld IDX) written to %s\n",
              static_cast<long long>(opt_.samples), opt_.colour_samples ? "colour" : "grey",
              static_cast<long long>(idx.rows), static_cast<long long>(idx.cols), path.c_str());
#else
  (void)ctx;
  PDNN_FAIL("dcgan: this pdnn was built without OpenCV: no sample file %s", path.c_str());
#endif
}

}  // namespace pdnn
