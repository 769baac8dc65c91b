// scripts/plot.py end to end: small training and scaling CSV files in a temp folder must give
// PNG files. Skipped, visibly, where /usr/bin/python3 has no matplotlib.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "testing.h"

namespace pdnn {
namespace {

namespace fs = std::filesystem;

bool is_png(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in.good() && std::string(magic + 1, 3) == "PNG";
}

TEST(Plot, MakesPngFromResultsCsv) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks matplotlib (apt-get install python3-matplotlib)";
  const fs::path dir = fs::temp_directory_path() / ("pdnn_plot_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "results" / "mnist");
  fs::create_directories(dir / "results" / "scaling");
  {
    std::ofstream f(dir / "results" / "mnist" / "run.csv");
    f << "app,model,dataset,device,threads,batch,epoch,train_loss,train_acc,test_loss,test_acc,"
         "seconds,images_per_s,git_rev,host,timestamp\n";
    for (int e = 1; e <= 3; ++e)
      f << "mnist,small,mnist,cpu,2,8," << e << "," << 1.0 / e << ",0.9," << 1.2 / e
        << ",0.89,50,1200,abc,host,2024-01-01T00:00:00Z\n";
  }
  {
    std::ofstream f(dir / "results" / "scaling" / "scaling.csv");
    f << "workload,threads,median_ms,speedup,efficiency,host,git_rev,timestamp\n"
         "pi-omp,1,100,1,1,h,r,t\npi-omp,2,52,1.92,0.96,h,r,t\n";
  }
  fs::create_directories(dir / "results" / "dcgan");
  {
    std::ofstream f(dir / "results" / "dcgan" / "gan_iterations.csv");
    f << "app,model,dataset,device,batch,epoch,iteration,d_loss,g_loss,d_x,d_g_z,git_rev,"
         "timestamp\n";
    for (int i = 1; i <= 6; ++i)
      f << "pdnn,dcgan,fashion-mnist,cpu,64," << (i + 2) / 3 << "," << i << "," << 1.0 / i
        << "," << 2.0 + i << ",0.8,0.2,abc,t\n";
  }
  {
    std::ofstream f(dir / "results" / "dcgan" / "gan.csv");
    f << "app,model,dataset,device,gpu,threads,batch,epoch,train_d_loss,train_g_loss,train_d_x,"
         "train_d_g_z,train_s_per_iter,status,seconds,images_per_s,git_rev,host,timestamp\n"
         "pdnn,dcgan,fashion-mnist,cpu,,2,64,1,0.5,3.0,0.8,0.2,1.5,ok,69,42,abc,h,t\n"
         "pdnn,dcgan,fashion-mnist,cpu,,2,64,2,0.4,3.5,0.8,0.2,1.5,ok,69,42,abc,h,t\n";
  }
  const std::string cmd = "/usr/bin/python3 " PDNN_SOURCE_DIR "/scripts/plot.py --results " +
                          (dir / "results").string() + " --out " + (dir / "plots").string() +
                          " >" + (dir / "log.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_TRUE(is_png(dir / "plots" / "mnist_run_curves.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "scaling.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "dcgan_gan_iterations_losses.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "dcgan_gan_gan.png"));
  // No device=cuda rows: the CPU vs GPU figure is skipped, not drawn empty.
  EXPECT_FALSE(fs::exists(dir / "plots" / "mnist_run_cpu_vs_gpu.png"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pdnn
