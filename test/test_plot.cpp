// scripts/report/plot.py end to end: small training and scaling CSV files in a temp folder must give
// PNG files. Skipped, visibly, where /usr/bin/python3 has no matplotlib.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

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
  // Data-parallel rows (scripts/gpu/runners/dist.sh, host-dist-cpu.sh) and all-reduce rows.
  fs::create_directories(dir / "results" / "scale");
  {
    std::ofstream f(dir / "results" / "scale" / "cpu_dist.csv");
    f << "app,workload,model,device,gpu,ranks,threads_per_rank,global_batch,mode,steps,median_ms,"
         "min_ms,max_ms,images_per_s,allreduce_ms,exposed_ms,versions,git_rev,host,timestamp\n"
         "pdnn,W3,keras,cpu,,1,2,128,single,8,170,160,180,752,,,v,r,h,t\n"
         "pdnn,W3,keras,cpu,,2,1,128,dist,8,175,160,180,731,3.1,1.2,v,r,h,t\n"
         "torch-ddp,W3,keras,cpu,,2,1,128,eager,8,300,290,310,426,,,v,r,h,t\n"
         "pdnn,W3,keras,cuda,\"H200, 139 GiB\",1,1,128,graph,290,0.5,0.4,0.6,256000,,,v,r,h,t\n"
         "pdnn,W3,keras,cuda,\"2x H200, 139 GiB\",2,1,256,graph+overlap,290,0.6,0.5,0.7,426000,,,v,r,h,t\n";
  }
  {
    std::ofstream f(dir / "results" / "scale" / "allreduce.csv");
    f << "app,backend,device,gpu,ranks,bytes,iters,time_us,algbw_gbs,busbw_gbs,label,git_rev,host,"
         "timestamp\npdnn,mpi,cpu,,2,1000000,5,180,5.5,5.5,,r,h,t\n"
         "pdnn,mpi,cpu,,2,4800000,5,900,5.3,5.3,,r,h,t\n";
  }
  fs::create_directories(dir / "results" / "segment");
  {  // the segment app's rows; -1: a class without a score
    std::ofstream f(dir / "results" / "segment" / "run.csv");
    f << "app,model,dataset,device,gpu,threads,batch,epoch,train_loss,train_pixel_acc,test_loss,"
         "test_pixel_acc,test_iou_background,test_iou_person,test_dice_background,"
         "test_dice_person,test_mean_iou,test_mean_dice,peak_rss_mb,peak_device_mb,seconds,"
         "images_per_s,git_rev,host,timestamp\n"
         "pdnn,unet_b8_d3,ccp,cpu,,2,8,1,0.7,0.5,0.6,0.77,0.77,-1,0.87,-1,0.77,0.87,118,0,25,6,r,h,t\n"
         "pdnn,unet_b8_d3,ccp,cpu,,2,8,2,0.5,0.8,0.45,0.8,0.8,0.3,0.89,0.46,0.55,0.67,118,0,25,6,r,h,t\n";
  }
  {  // a table no figure is drawn from (gan_score's quality scores)
    std::ofstream f(dir / "results" / "scale" / "quality.csv");
    f << "set,inception_score,fid\npdnn,1.5,30\n";
  }
  const std::string cmd = "/usr/bin/python3 " PDNN_SOURCE_DIR "/scripts/report/plot.py --results " +
                          (dir / "results").string() + " --out " + (dir / "plots").string() +
                          " >" + (dir / "log.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_TRUE(is_png(dir / "plots" / "mnist_run_curves.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "scaling.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "dcgan_gan_iterations_losses.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "dcgan_gan_gan.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "scale_cpu_dist.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "scale_allreduce.png"));
  EXPECT_TRUE(is_png(dir / "plots" / "segment_run_segmentation.png"));
  // No device=cuda rows: the CPU vs GPU figure is skipped, not drawn empty.
  EXPECT_FALSE(fs::exists(dir / "plots" / "mnist_run_cpu_vs_gpu.png"));
  // What is passed over is one line, not a line per file and figure (--verbose names them).
  std::ifstream log(dir / "log.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("plot: 1 CSV file(s) are tables without a figure here"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("skipped"), std::string::npos) << text;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pdnn
