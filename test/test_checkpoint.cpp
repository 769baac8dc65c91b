// Checkpoints: bit-exact round trip of parameters, buffers and optimizer state; training resumed
// from a checkpoint equals uninterrupted training; damaged or mismatched files throw a clear
// error and leave the model untouched; AtomicFile leaves no temporary behind.
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "core/atomic_file.h"
#include "model/checkpoint.h"
#include "model/sequential.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/flatten.h"
#include "layers/maxpool2d.h"
#include "optim/adam.h"
#include "optim/sgd.h"
#include "testing.h"
#include "workloads/classifier/classifier_trainer.h"
#include "toy_layers.h"

namespace pdnn {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "pdnn_ckpt_" + std::to_string(::getpid()) + "_" + name;
}

bool file_exists(const std::string& p) { return std::ifstream(p).good(); }

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_all(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

Sequential make_model(uint64_t seed, int64_t hidden = 6) {
  Rng rng(seed);
  Sequential m;
  m.emplace<toy::Linear>(4, hidden);
  m.emplace<toy::Tanh>();
  m.emplace<toy::Linear>(hidden, 2);
  m.reset_parameters(rng);
  return m;
}

// One step on the loss 0.5*|y - t|^2 with a batch drawn from the step index.
void train_step(Context& ctx, Sequential& m, Optimizer& opt, int step) {
  Rng rng(1000 + step);
  const Tensor x = testing::random_tensor(Shape{5, 4}, rng);
  const Tensor t = testing::random_tensor(Shape{5, 2}, rng);
  const Tensor& y = m.forward(ctx, x);
  Tensor dy(y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) dy[i] = y[i] - t[i];
  m.zero_grad(ctx);
  m.backward(ctx, dy);
  opt.step(ctx);
}

std::vector<Tensor> snapshot(Sequential& m, Optimizer* opt) {
  std::vector<Tensor> s;
  for (const Param& p : m.params()) s.push_back(p.value->clone());
  for (const Param& p : m.buffers()) s.push_back(p.value->clone());
  if (opt)
    for (const auto& st : opt->state()) s.push_back(st.second->clone());
  return s;
}

void expect_bit_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape()) << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].numel() * sizeof(float)), 0)
        << "tensor " << i << " differs";
  }
}

// Expects load to throw an Error whose message names the file and contains `problem`, and
// the model's parameters, buffers and optimizer state to be as before.
void expect_load_fails(const std::string& path, Sequential& m, Optimizer* opt,
                       const std::string& problem) {
  const std::vector<Tensor> before = snapshot(m, opt);
  const int64_t steps = opt ? opt->steps() : 0;
  try {
    load_checkpoint(path, m, opt);
    ADD_FAILURE() << "loading " << path << " should fail with '" << problem << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(problem), std::string::npos) << msg;
  }
  expect_bit_equal(snapshot(m, opt), before);
  if (opt) EXPECT_EQ(opt->steps(), steps);
}

}  // namespace

TEST(Checkpoint, RoundTripIsBitExact) {
  Context ctx(1, 3);
  Sequential a = make_model(1);
  toy::Momentum opt_a(a.parameters(), 0.05f, 0.9f);
  for (int s = 0; s < 3; ++s) train_step(ctx, a, opt_a, s);
  const std::string path = temp_path("roundtrip.ckpt");
  save_checkpoint(path, a, &opt_a, 7, {{"rng_counter", 123456789012345}});
  EXPECT_FALSE(file_exists(path + ".tmp." + std::to_string(::getpid())));

  Sequential b = make_model(2);  // different weights
  toy::Momentum opt_b(b.parameters(), 0.05f, 0.9f);
  const CheckpointInfo info = load_checkpoint(path, b, &opt_b);
  EXPECT_EQ(info.epoch, 7);
  EXPECT_EQ(info.optimizer, "toy_momentum");
  EXPECT_EQ(info.values.at("rng_counter"), 123456789012345);
  EXPECT_EQ(opt_b.steps(), 3);
  expect_bit_equal(snapshot(b, &opt_b), snapshot(a, &opt_a));
  EXPECT_EQ(b.buffers()[0].value->operator[](0), 15.f);  // 3 steps x 5 samples

  // Weights only: optimizer state in the file is skipped.
  Sequential c = make_model(3);
  load_checkpoint(path, c, nullptr);
  expect_bit_equal(snapshot(c, nullptr), snapshot(a, nullptr));
  std::remove(path.c_str());
}

TEST(Checkpoint, ResumedTrainingEqualsUninterrupted) {
  Context ctx(1, 3);
  Sequential a = make_model(1);
  toy::Momentum opt_a(a.parameters(), 0.05f, 0.9f);
  const std::string path = temp_path("resume.ckpt");
  for (int s = 0; s < 6; ++s) {
    if (s == 3) save_checkpoint(path, a, &opt_a, 3);
    train_step(ctx, a, opt_a, s);
  }
  Sequential b = make_model(9);
  toy::Momentum opt_b(b.parameters(), 0.05f, 0.9f);
  const CheckpointInfo info = load_checkpoint(path, b, &opt_b);
  for (int s = static_cast<int>(info.epoch); s < 6; ++s) train_step(ctx, b, opt_b, s);
  expect_bit_equal(snapshot(b, &opt_b), snapshot(a, &opt_a));
  std::remove(path.c_str());
}

TEST(Checkpoint, DamagedOrMismatchedFilesThrowAndLeaveTheModelUnchanged) {
  Context ctx(1, 3);
  Sequential a = make_model(1);
  toy::Momentum opt_a(a.parameters(), 0.05f, 0.9f);
  train_step(ctx, a, opt_a, 0);
  const std::string good = temp_path("good.ckpt");
  save_checkpoint(good, a, &opt_a, 1);
  const std::string bytes = read_all(good);
  ASSERT_GT(bytes.size(), 100u);

  Sequential m = make_model(5);
  toy::Momentum opt(m.parameters(), 0.05f, 0.9f);
  train_step(ctx, m, opt, 1);
  const std::string bad = temp_path("bad.ckpt");

  for (size_t cut : {size_t{4}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
    write_all(bad, bytes.substr(0, cut));
    expect_load_fails(bad, m, &opt, "truncated");
  }
  std::string s = bytes;
  s[0] = 'X';
  write_all(bad, s);
  expect_load_fails(bad, m, &opt, "not a pdnn checkpoint");

  s = bytes;
  s[8] = 3;  // version field follows the 8-byte magic (1 and 2 are known)
  write_all(bad, s);
  expect_load_fails(bad, m, &opt, "format version 3");

  s = bytes;
  s[s.size() - 20] ^= 0x40;  // flip a bit in the last tensor's data
  write_all(bad, s);
  expect_load_fails(bad, m, &opt, "checksum");

  write_all(bad, bytes + "junk");
  expect_load_fails(bad, m, &opt, "after the end");

  expect_load_fails(temp_path("does_not_exist.ckpt"), m, &opt, "cannot open");

  // A model of another width: names agree, shapes do not.
  Sequential wide = make_model(1, 7);
  toy::Momentum opt_wide(wide.parameters(), 0.05f, 0.9f);
  expect_load_fails(good, wide, &opt_wide, "tensor 'param:0.weight' has shape (6,4) in the file,"
                                           " (7,4) in the model");
  // A model with an extra layer: the file lacks its tensors.
  Sequential deeper = make_model(1);
  deeper.emplace<toy::Linear>(2, 2);
  expect_load_fails(good, deeper, nullptr, "has no tensor 'param:3.weight'");
  // A file with a layer the model lacks.
  const std::string deep_file = temp_path("deeper.ckpt");
  save_checkpoint(deep_file, deeper, nullptr);
  expect_load_fails(deep_file, m, nullptr, "has tensor 'param:3.weight' that the model lacks");
  // Optimizer requested but none saved.
  expect_load_fails(deep_file, deeper, &opt, "holds no optimizer state");

  std::remove(good.c_str());
  std::remove(bad.c_str());
  std::remove(deep_file.c_str());
}

// A checkpoint written field by field, for files no save_checkpoint would write.
struct Crafted {
  std::string b = "PDNNCKPT";
  void u32(uint32_t v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void i64(int64_t v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    b += s;
  }
  // The trailer: content length and CRC-32, so the file passes the checksum.
  std::string finish() const {
    std::string out = b;
    const uint64_t n = b.size();
    const uint32_t c = static_cast<uint32_t>(
        crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(b.data()),
              static_cast<uInt>(b.size())));
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out.append(reinterpret_cast<const char*>(&c), sizeof c);
    return out;
  }
};

// Every size read from the file is range-checked with overflow-checked arithmetic before it is
// used, and every field is checked for values no save writes; the errors name the file and
// the field.
TEST(Checkpoint, CraftedSizesAndFieldsAreRangeChecked) {
  Sequential m = make_model(1);
  const std::string bad = temp_path("crafted.ckpt");
  auto with_values = [](const std::vector<std::pair<std::string, int64_t>>& values) {
    Crafted c;
    c.u32(kCheckpointVersion);
    c.u32(static_cast<uint32_t>(values.size()));
    for (const auto& [k, v] : values) {
      c.str(k);
      c.i64(v);
    }
    return c;
  };
  // Dimensions 1 x 1 x 2^62 x 2^62: the element count wraps to 0 in 64 bits.
  Crafted c = with_values({{"epoch", 1}});
  c.str("");
  c.u32(1);
  c.str("param:0.weight");
  c.u32(4);
  for (int64_t d : {int64_t{1}, int64_t{1}, int64_t{1} << 62, int64_t{1} << 62}) c.i64(d);
  write_all(bad, c.finish());
  expect_load_fails(bad, m, nullptr,
                    "tensor 'param:0.weight' dimension 3 of 4 is 4611686018427387904: the tensor "
                    "would need more bytes than");
  c = with_values({{"epoch", 1}});
  c.str("");
  c.u32(1);
  c.str("param:0.weight");
  c.u32(2);
  c.i64(1);
  c.i64(-4);
  write_all(bad, c.finish());
  expect_load_fails(bad, m, nullptr, "tensor 'param:0.weight' dimension 2 of 2 is -4 (negative)");

  c = with_values({{"epoch", -5}});
  write_all(bad, c.finish());
  expect_load_fails(bad, m, nullptr, "field epoch = -5 is negative");
  c = with_values({{"epoch", 1}, {"optim.steps", -1}});
  write_all(bad, c.finish());
  expect_load_fails(bad, m, nullptr, "field optim.steps = -1 is negative");
  c = with_values({{"epoch", 1}, {"seed", 3}, {"seed", 4}});
  write_all(bad, c.finish());
  expect_load_fails(bad, m, nullptr, "value 'seed' appears twice");
  c = with_values({{"epoch", 1}, {"epoch", 2}});
  write_all(bad, c.finish());
  expect_load_fails(bad, m, nullptr, "value 'epoch' appears twice");
  std::remove(bad.c_str());
}

TEST(Checkpoint, FifosAndDevicesAreRefusedWithoutBlocking) {
  Sequential m = make_model(1);
  const std::string fifo = temp_path("fifo.ckpt");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_load_fails(fifo, m, nullptr, "not a regular file");
  // Saving over it would replace the FIFO with a file: refused too.
  try {
    save_checkpoint(fifo, m);
    ADD_FAILURE() << "saving over a FIFO should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::remove(fifo.c_str());
  expect_load_fails("/dev/zero", m, nullptr, "not a regular file");
}

TEST(Checkpoint, SaveReplacesAtomicallyAndRejectsReservedNames) {
  Sequential m = make_model(1);
  const std::string path = temp_path("replace.ckpt");
  write_all(path, "old contents");
  save_checkpoint(path, m, nullptr, 2);
  EXPECT_EQ(load_checkpoint(path, m).epoch, 2);
  EXPECT_THROW(save_checkpoint(path, m, nullptr, 0, {{"epoch", 1}}), Error);
  EXPECT_EQ(load_checkpoint(path, m).epoch, 2);  // the failed save left the old file
  // Unwritable destination: an error naming it, no temporary left.
  const std::string nodir = temp_path("no_such_dir") + "/x.ckpt";
  try {
    save_checkpoint(nodir, m);
    ADD_FAILURE() << "saving into a missing directory should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(nodir), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

TEST(AtomicFile, CommitRenamesAndAbandonRemovesTheTemporary) {
  const std::string path = temp_path("atomic.txt");
  {
    AtomicFile f(path);
    f.stream() << "a,b\n1,2\n";
    EXPECT_TRUE(file_exists(f.temp_path()));
    EXPECT_FALSE(file_exists(path));
    f.commit();
    EXPECT_FALSE(file_exists(f.temp_path()));
  }
  EXPECT_EQ(read_all(path), "a,b\n1,2\n");
  std::string tmp;
  {
    AtomicFile f(path);
    tmp = f.temp_path();
    f.stream() << "half";
  }  // not committed, e.g. an exception while writing
  EXPECT_FALSE(file_exists(tmp));
  EXPECT_EQ(read_all(path), "a,b\n1,2\n");
  std::remove(path.c_str());
}

// The same with the real layers and Adam (state exp_avg, exp_avg_sq and the bias-correction
// step count): a run saved after 3 steps and resumed in a fresh model and optimizer ends
// bit-identical to the uninterrupted run.
TEST(Checkpoint, ConvNetWithAdamResumesBitIdentically) {
  auto build = [](Sequential& m, Rng& rng) {
    m.emplace<Conv2d>(1, 4, 3, 1, 1);
    m.emplace<ReLU>();
    m.emplace<MaxPool2d>(2);
    m.emplace<Flatten>();
    m.emplace<Dense>(4 * 4 * 4, 3);
    m.reset_parameters(rng);
  };
  auto step = [](Context& ctx, Sequential& m, Optimizer& opt, int s) {
    Rng rng(500 + s);
    const Tensor x = testing::random_tensor(Shape{6, 1, 8, 8}, rng);
    std::vector<int32_t> labels(6);
    for (auto& l : labels) l = static_cast<int32_t>(rng.next() % 3);
    ClassifierTrainer(m, opt).step(ctx, x, testing::labels_tensor(labels));
  };
  Context ctx(1, 3);
  Rng init_a(1), init_b(2);
  Sequential a, b;
  build(a, init_a);
  build(b, init_b);
  Adam opt_a(a.parameters(), 1e-2), opt_b(b.parameters(), 1e-2);
  const std::string path = temp_path("adam.ckpt");
  for (int s = 0; s < 6; ++s) {
    if (s == 3) save_checkpoint(path, a, &opt_a, s);
    step(ctx, a, opt_a, s);
  }
  const CheckpointInfo info = load_checkpoint(path, b, &opt_b);
  EXPECT_EQ(info.optimizer, "adam");
  EXPECT_EQ(opt_b.steps(), 3);
  for (int s = static_cast<int>(info.epoch); s < 6; ++s) step(ctx, b, opt_b, s);
  expect_bit_equal(snapshot(b, &opt_b), snapshot(a, &opt_a));
  // An optimizer of another kind is refused by name.
  Sgd sgd(b.parameters(), 0.1f, 0.9f);
  expect_load_fails(path, b, &sgd, "holds adam optimizer state, the optimizer given is sgd");
  std::remove(path.c_str());
}

// Several named models in one file (format version 2: a GAN's generator and discriminator with
// their optimizers): bit-exact round trip, training resumed from it equals uninterrupted
// training, a model loaded alone, and files of the other kind refused with what they hold.
TEST(Checkpoint, NamedModelsRoundTripResumeAndRefuseTheOtherKind) {
  Context ctx(1, 3);
  Sequential g = make_model(1), d = make_model(2, 5);
  toy::Momentum opt_g(g.parameters(), 0.05f, 0.9f);
  Adam opt_d(d.parameters(), 1e-2, 0.5);
  const std::string path = temp_path("named.ckpt");
  for (int s = 0; s < 6; ++s) {
    if (s == 3)
      save_checkpoint(path, {{"G", &g, &opt_g}, {"D", &d, &opt_d}}, 3, {{"seed", 9}});
    train_step(ctx, g, opt_g, s);
    train_step(ctx, d, opt_d, s);
    train_step(ctx, d, opt_d, s + 100);  // D takes two steps per iteration: counts differ
  }
  const std::string bytes = read_all(path);
  ASSERT_EQ(bytes[8], 2);  // version 2

  Sequential g2 = make_model(7), d2 = make_model(8, 5);
  toy::Momentum opt_g2(g2.parameters(), 0.05f, 0.9f);
  Adam opt_d2(d2.parameters(), 1e-2, 0.5);
  const CheckpointInfo info =
      load_checkpoint(path, {{"G", &g2, &opt_g2}, {"D", &d2, &opt_d2}});
  EXPECT_EQ(info.epoch, 3);
  EXPECT_EQ(info.values.at("seed"), 9);
  EXPECT_EQ(info.values.size(), 1u);  // the step counts are not the caller's values
  EXPECT_EQ(opt_g2.steps(), 3);
  EXPECT_EQ(opt_d2.steps(), 6);
  for (int s = 3; s < 6; ++s) {
    train_step(ctx, g2, opt_g2, s);
    train_step(ctx, d2, opt_d2, s);
    train_step(ctx, d2, opt_d2, s + 100);
  }
  expect_bit_equal(snapshot(g2, &opt_g2), snapshot(g, &opt_g));
  expect_bit_equal(snapshot(d2, &opt_d2), snapshot(d, &opt_d));

  // The generator alone, weights only (what a sampler needs).
  Sequential g3 = make_model(11);
  load_checkpoint(path, {{"G", &g3, nullptr}});
  Sequential g_at3 = make_model(12);
  load_checkpoint(path, {{"G", &g_at3, nullptr}, {"D", &d2, nullptr}});
  expect_bit_equal(snapshot(g3, nullptr), snapshot(g_at3, nullptr));

  // The other kind of file, a missing model, a model under the wrong name, a wrong optimizer.
  expect_load_fails(path, g3, nullptr, "holds the models G, D (format version 2");
  const std::string single = temp_path("single.ckpt");
  save_checkpoint(single, g, &opt_g, 1);
  EXPECT_EQ(read_all(single)[8], 1);  // one unnamed model: version 1, as before
  auto fails = [&](const std::string& file, const std::vector<CheckpointModel>& ms,
                   const std::string& problem) {
    try {
      load_checkpoint(file, ms);
      ADD_FAILURE() << "should fail with " << problem;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(problem), std::string::npos) << e.what();
    }
  };
  fails(single, {{"G", &g3, nullptr}, {"D", &d2, nullptr}},
        "holds a single model (format version 1, e.g. an mnist checkpoint); this run needs the "
        "models G, D");
  fails(path, {{"G", &g3, nullptr}, {"E", &d2, nullptr}}, "has no model 'E' (it holds G, D)");
  fails(path, {{"D", &g3, nullptr}}, "tensor 'D.param:0.weight' has shape (5,4) in the file, "
                                     "(6,4) in the model");
  Sgd sgd(d2.parameters(), 0.1f, 0.9f);
  fails(path, {{"G", &g3, nullptr}, {"D", &d2, &sgd}},
        "holds adam optimizer state for model D, the optimizer given is sgd");
  toy::Momentum opt_g3(g3.parameters(), 0.05f, 0.9f);
  fails(path, {{"G", &g3, &opt_g3}, {"G", &g3, nullptr}}, "model name 'G' given twice");
  EXPECT_THROW(save_checkpoint(path, {{"G", &g, &opt_g}, {"", &d, nullptr}}), Error);
  EXPECT_THROW(save_checkpoint(path, {{"G", &g, &opt_g}}, 0, {{"G.optim.steps", 1}}), Error);
  EXPECT_THROW(save_checkpoint(path, {{"G/x", &g, nullptr}}), Error);
  // Truncated anywhere: refused.
  for (size_t cut : {size_t{20}, bytes.size() / 3, bytes.size() - 2}) {
    write_all(path, bytes.substr(0, cut));
    fails(path, {{"G", &g3, nullptr}, {"D", &d2, nullptr}}, "truncated");
  }
  std::remove(path.c_str());
  std::remove(single.c_str());
}

}  // namespace pdnn
