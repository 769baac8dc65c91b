// The fuzz targets' seed corpus and regression inputs (test/fuzz/), run through the targets'
// bodies in the ordinary suite (and so under the sanitizers by make test-sanitize): every input
// a fuzzer ever crashed on stays a test. Seeds named valid_* must also load without an error,
// so they keep leading the fuzzer into the deep checks. PDNN_WRITE_FUZZ_SEEDS=1 rewrites the
// generated seeds (after a format change).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"
#include "testing.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

const fs::path kFuzzDir = fs::path(PDNN_SOURCE_DIR) / "test" / "fuzz";

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string file_text(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The generated seeds: small valid files of each kind, plus a damaged one or two.
void write_seeds() {
  const fs::path idx = kFuzzDir / "corpus" / "idx", ck = kFuzzDir / "corpus" / "checkpoint";
  const std::string tmp = (fs::temp_directory_path() / "pdnn_fuzz_seed").string();
  IdxImages im;
  im.n = 3, im.rows = 4, im.cols = 5;
  for (int i = 0; i < 60; ++i) im.pixels.push_back(static_cast<uint8_t>(i * 5));
  for (const char* ext : {"", ".gz"}) {
    write_idx_images(tmp + ext, im);
    write_bytes(idx / (std::string("valid_images") + (*ext ? "_gz" : "")), file_text(tmp + ext));
    write_idx_labels(tmp + ext, {0, 1, 2, 9});
    write_bytes(idx / (std::string("valid_labels") + (*ext ? "_gz" : "")), file_text(tmp + ext));
    std::remove((tmp + ext).c_str());
  }
  write_idx_images(tmp, im);
  write_bytes(idx / "truncated_images", file_text(tmp).substr(0, 40));
  std::remove(tmp.c_str());

  fuzz::CheckpointModel m;
  Context ctx(1, 1);
  Tensor x(Shape{2, 1, 4, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(i % 7) * 0.1f;
  const Tensor& y = m.model.forward(ctx, x);
  Tensor dy(y.shape());
  dy.fill(0.5f);
  m.model.zero_grad(ctx);
  m.model.backward(ctx, dy);
  m.opt->step(ctx);
  save_checkpoint(tmp, m.model, m.opt.get(), 3, {{"seed", 5}, {"rng_counter", 77}});
  write_bytes(ck / "valid_with_adam", file_text(tmp));
  write_bytes(ck / "truncated", file_text(tmp).substr(0, 100));
  save_checkpoint(tmp, m.model, nullptr, 0);
  write_bytes(ck / "valid_weights_only", file_text(tmp));
  fuzz::CheckpointModel d;
  save_checkpoint(tmp, {{"G", &m.model, m.opt.get()}, {"D", &d.model, d.opt.get()}}, 2,
                  {{"seed", 5}});
  write_bytes(ck / "valid_named_adam", file_text(tmp));
  std::remove(tmp.c_str());
}

struct Target {
  const char* name;
  void (*body)(const uint8_t*, size_t);
  void (*load_valid)(const std::string& path);  // must not throw for valid_* seeds
};

const Target kTargets[] = {
    {"idx", fuzz::fuzz_idx_one,
     [](const std::string& p) {
       if (p.find("images") != std::string::npos)
         read_idx_images(p);
       else
         read_idx_labels(p);
     }},
    {"checkpoint", fuzz::fuzz_checkpoint_one,
     [](const std::string& p) {
       fuzz::CheckpointModel& m = fuzz::checkpoint_model();
       if (p.find("named") != std::string::npos) {
         fuzz::CheckpointModel& d = fuzz::checkpoint_model_d();
         load_checkpoint(p, {{"G", &m.model, m.opt.get()}, {"D", &d.model, d.opt.get()}});
         return;
       }
       load_checkpoint(p, m.model, p.find("adam") != std::string::npos ? m.opt.get() : nullptr);
     }},
#ifdef PDNN_HAVE_OPENCV
    {"image_folder", fuzz::fuzz_image_folder_one,
     [](const std::string& p) {
       const std::vector<uint8_t> b = read_bytes(p);
       std::vector<uint8_t> out(16 * 16 * 3);
       const std::string problem = decode_image_bytes(b, 16, false, out.data());
       PDNN_CHECK(problem.empty(), "%s: %s", p.c_str(), problem.c_str());
     }},
#endif
};

TEST(FuzzCorpus, SeedsAndRegressionInputsRunCleanly) {
  if (std::getenv("PDNN_WRITE_FUZZ_SEEDS")) write_seeds();
  for (const Target& t : kTargets) {
    int inputs = 0, valid = 0;
    for (const char* kind : {"corpus", "regressions"}) {
      const fs::path dir = kFuzzDir / kind / t.name;
      if (!fs::is_directory(dir)) continue;
      for (const auto& e : fs::directory_iterator(dir)) {
        if (!e.is_regular_file() || e.path().filename() == "README.md") continue;
        SCOPED_TRACE(e.path().string());
        const std::vector<uint8_t> b = read_bytes(e.path());
        t.body(b.data(), b.size());  // throws nothing; a crash here is a regression
        ++inputs;
        if (e.path().filename().string().rfind("valid_", 0) == 0) {
          EXPECT_NO_THROW(t.load_valid(e.path().string()));
          ++valid;
        }
      }
    }
    EXPECT_GT(inputs, 0) << t.name << ": no seed corpus in " << (kFuzzDir / "corpus" / t.name);
    EXPECT_GT(valid, 0) << t.name << ": no valid_* seed";
  }
}

}  // namespace
}  // namespace pdnn
