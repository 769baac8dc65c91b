// The measuring side of issue 35's study (scripts/gpu/runners/unet-memory.sh), on the CPU:
// the PyTorch twin's variants (scripts/twins/torch_memory_bench.py) change where the saved
// tensors live and what runs again, never the numbers, and its forked runs write their rows
// and stop a variant after a failure; scripts/report/memory_table.py makes the study's table
// from hand-made rows. Skipped, visibly, without torch (or matplotlib, for the plot).
#include <sstream>
#include <string>

#include "testing.h"

namespace pdnn {
namespace {

using testing::run_command;

const std::string kPython = "/usr/bin/python3";
const std::string kBench = kPython + " " PDNN_SOURCE_DIR "/scripts/twins/torch_memory_bench.py";

bool has_torch() { return run_command(kPython + " -c 'import torch, numpy'").status == 0; }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class MemoryStudyTwin : public testing::TempDirTest {};

// One forward and backward of each variant from the same initial weights and batch (the
// U-Net at 32 px, base 4, depth 2, batch 2; W4 at 16 px, batch 2, its dropout included): the
// loss and every gradient are plain's to the bit (checkpoint's recomputation and
// save_on_cpu's copies move values, they do not round them). That the variants do what they
// say: checkpoint runs the first convolution twice (forward, and again in backward), and
// save_on_cpu's pack hook takes the saved tensors (on the CPU, pin_memory=False, as the twin
// runs there).
TEST_F(MemoryStudyTwin, VariantsGiveThePlainLossAndGradients) {
  if (!has_torch()) GTEST_SKIP() << "no torch for " << kPython << " (scripts/tools/install_deps.sh torch)";
  spit("variants.py",
       "import sys, torch\n"
       "sys.path.insert(0, '" PDNN_SOURCE_DIR "/scripts/twins')\n"
       "import torch_memory_bench as mb\n"
       "torch.set_num_threads(1)\n"
       "packs = [0]\n"
       "class Counted(torch.autograd.graph.save_on_cpu):\n"
       "    def __init__(self, pin_memory=False):\n"
       "        super().__init__(pin_memory)\n"
       "        pack = self.pack_hook\n"
       "        def counted(t):\n"
       "            packs[0] += 1\n"
       "            return pack(t)\n"
       "        self.pack_hook = counted\n"
       "torch.autograd.graph.save_on_cpu = Counted\n"
       "cpu = torch.device('cpu')\n"
       "for model, side in (('unet', 32), ('w4', 16)):\n"
       "    g = torch.Generator().manual_seed(3)\n"
       "    x = torch.randn(2, 3, side, side, generator=g)\n"
       "    y = torch.randint(0, 2, (2, side, side) if model == 'unet' else (2,), generator=g)\n"
       "    first = None\n"
       "    for v in mb.VARIANTS:\n"
       "        torch.manual_seed(1)\n"
       "        net, forward, opt, k = mb.build(torch, model, side, cpu, base=4, depth=2)\n"
       "        conv = net.layer('enc1.conv1') if model == 'unet' else net[0][0][0]\n"
       "        runs = [0]\n"
       "        conv.register_forward_hook(lambda m, i, o: runs.__setitem__(0, runs[0] + 1))\n"
       "        packs[0] = 0\n"
       "        loss = mb.variant_loss(torch, forward, v, x, y, pin_memory=False)\n"
       "        loss.backward()\n"
       "        grads = [p.grad.clone() for p in net.parameters()]\n"
       "        first = first or (loss.item(), grads)\n"
       "        diff = max(float((a - b).abs().max()) for a, b in zip(grads, first[1]))\n"
       "        print(model, v, int(loss.item() == first[0]), repr(diff), runs[0], packs[0],\n"
       "              len(grads), int(all(float(t.abs().sum()) > 0 for t in grads)))\n");
  const testing::CommandResult r = run_command(kPython + " " + path("variants.py"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::istringstream in(r.output);
  int lines = 0;
  for (std::string model, variant; in >> model >> variant; ++lines) {
    int same_loss = 0, runs = 0, packs = 0, tensors = 0, nonzero = 0;
    double diff = -1;
    in >> same_loss >> diff >> runs >> packs >> tensors >> nonzero;
    const std::string what = model + " " + variant + "\n" + r.output;
    EXPECT_EQ(same_loss, 1) << what;
    EXPECT_EQ(diff, 0.0) << what;
    EXPECT_EQ(runs, variant.rfind("checkpoint", 0) == 0 ? 2 : 1) << what;
    const bool swaps = variant.size() >= 11 && variant.compare(variant.size() - 11, 11, "save_on_cpu") == 0;
    if (swaps)
      EXPECT_GT(packs, 0) << what;
    else
      EXPECT_EQ(packs, 0) << what;
    EXPECT_EQ(tensors, model == "unet" ? 26 : 18) << what;  // every weight and bias
    EXPECT_EQ(nonzero, 1) << what;  // every gradient reached
  }
  EXPECT_EQ(lines, 8) << r.output;
}

// The command: each (variant, side) in a forked process, a row each with the U-Net's columns;
// a variant past --timeout at a side is not run at the larger ones (--budget ends runs the
// same way); bad sides are refused before any run.
TEST_F(MemoryStudyTwin, CommandWritesARowPerVariantAndSide) {
  if (!has_torch()) GTEST_SKIP() << "no torch for " << kPython << " (scripts/tools/install_deps.sh torch)";
  const std::string common = kBench + " --model unet --device cpu --base 4 --depth 2 --steps 1 ";
  testing::CommandResult r = run_command(common + "--sides 16 --out " + path("ok.csv"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto rows = testing::read_csv(path("ok.csv"));
  ASSERT_EQ(rows.size(), 5u) << r.output;
  EXPECT_EQ(rows[0].back(), "predicted_ms");
  const char* variants[] = {"plain", "save_on_cpu", "checkpoint", "checkpoint+save_on_cpu"};
  for (size_t i = 1; i < rows.size(); ++i) {
    ASSERT_GE(rows[i].size(), 14u) << r.output;  // (read_csv drops the empty predicted_ms)
    EXPECT_EQ(rows[i][0] + " " + rows[i][1] + " " + rows[i][2] + " " + rows[i][3] + " " +
                  rows[i][4] + " " + rows[i][5] + " " + rows[i][13],
              std::string("unet_b4_d2 pytorch ") + variants[i - 1] + " 16 1 fp32 ok")
        << r.output;
    EXPECT_GT(std::stod(rows[i][9]), 0.0);  // median_ms
  }
  // Past a millisecond the run is killed: its larger side is skipped.
  r = run_command(common + "--sides 16,32 --variants plain --timeout 0.001 --out " + path("t.csv"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto t = testing::read_csv(path("t.csv"));
  ASSERT_EQ(t.size(), 3u) << r.output;
  EXPECT_EQ(t[1][2] + " " + t[1][3] + " " + t[1][13], "plain 16 timeout");
  EXPECT_EQ(t[2][2] + " " + t[2][3] + " " + t[2][13], "plain 32 skipped: timeout at 16");
  // Killed from outside (SIGKILL, as the kernel's out-of-memory killer sends it; the script's
  // test hook sends it to itself at the given side): the row says "killed", the output names
  // the signal and the child's peak host memory, and the larger side is skipped.
  r = run_command("PDNN_TWIN_TEST_SIGKILL_SIDE=32 " + common +
                  "--sides 16,32,64 --variants plain --out " + path("k.csv"));
  ASSERT_EQ(r.status, 0) << r.output;
  const auto k = testing::read_csv(path("k.csv"));
  ASSERT_EQ(k.size(), 4u) << r.output;
  EXPECT_EQ(k[1][2] + " " + k[1][3] + " " + k[1][13], "plain 16 ok");
  EXPECT_EQ(k[2][2] + " " + k[2][3] + " " + k[2][13], "plain 32 killed");
  EXPECT_EQ(k[3][2] + " " + k[3][3] + " " + k[3][13], "plain 64 skipped: killed at 32");
  EXPECT_TRUE(contains(r.output, "plain                    32: failed: killed by SIGKILL after "))
      << r.output;
  EXPECT_TRUE(contains(r.output, ", its peak host memory ")) << r.output;
  EXPECT_TRUE(contains(r.output, " GiB (the host has ")) << r.output;
  EXPECT_TRUE(contains(r.output, "out-of-memory killer, most likely")) << r.output;
  r = run_command(common + "--sides 18 --out " + path("bad.csv"));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.output, "torch_memory_bench.py: --sides 18: must be a multiple of 4, at least 4\n");
  EXPECT_FALSE(testing::exists(path("bad.csv")));
}

// The study's table from two hand-made CSVs (a pdnn visit's, then a PyTorch visit's): a table
// per batch; each side's two caps as two columns by rank; the largest side per configuration;
// pdnn's capped steps against uncapped and every PyTorch variant; the plan's step and peak
// against the measured ones, the CUDA context taken off the planned peak (an uncapped run
// prints none: another run's); the same as CSV rows; the plot against the side.
class MemoryTable : public testing::TempDirTest {};

TEST_F(MemoryTable, UNetStudyTableFromTwoVisits) {
  const std::string header =
      "app,framework,variant,side,batch,precision,gpu_memory_limit_gib,peak_gib,"
      "peak_reserved_gib,median_ms,min_ms,max_ms,steps,status,planned_gib,context_gib,plan,gpu,"
      "versions,git_rev,host,timestamp,predicted_ms\n";
  const std::string tail = ",H200,,r,h,t";
  spit("pdnn.csv",
       header +
           "unet_b64_d4,pdnn,plain,1024,1,fp32,,5.000,,122.0,121,123,1,ok graph,5.600,," + tail + ",120.0\n"
           "unet_b64_d4,pdnn,capped,1024,1,fp32,2.500,2.400,,140.0,139,141,1,ok graph,2.950,0.500,"
           "\"3 layer(s) offloaded, 1 recomputed\"" + tail + ",130.0\n"
           "unet_b64_d4,pdnn,capped,1024,1,fp32,3.000,2.900,,125.0,124,126,1,ok graph,3.400,0.500,"
           "\"2 layer(s) offloaded, 0 recomputed\"" + tail + ",125.0\n"
           "unet_b64_d4,pdnn,plain,2048,1,fp32,,,,,,,0,oom,21.000,," + tail + ",480.0\n"
           "unet_b64_d4,pdnn,capped,2048,1,fp32,8.500,8.000,,600.0,599,601,1,ok graph,8.600,0.500,"
           "\"9 layer(s) offloaded, 2 recomputed\"" + tail + ",550.0\n"
           "unet_b64_d4,pdnn,capped,2048,1,fp32,10.000,,,,,,0,no-fit 10.2GiB,10.700,," + tail + ",560.0\n"
           "unet_b64_d4,pdnn,plain,512,4,fp32,,5.100,,130.0,129,131,1,ok graph,5.650,," + tail + ",128.0\n");
  spit("torch.csv",
       header +
           "unet_b64_d4,pytorch,plain,1024,1,fp32,,5.500,5.600,150.0,149,151,3,ok,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,save_on_cpu,1024,1,fp32,,1.200,1.300,400.0,399,401,3,ok,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,checkpoint,1024,1,fp32,,3.000,3.100,180.0,179,181,3,ok,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,checkpoint+save_on_cpu,1024,1,fp32,,0.900,1.000,450.0,449,451,3,ok,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,plain,2048,1,fp32,,20.000,21.000,,,,0,oom,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,save_on_cpu,2048,1,fp32,,4.000,4.100,1600.0,1599,1601,3,ok,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,checkpoint,2048,1,fp32,,11.000,11.100,700.0,699,701,3,ok,,,,H200,,r,h,t,\n"
           "unet_b64_d4,pytorch,checkpoint+save_on_cpu,2048,1,fp32,,,,,,,0,timeout,,,,,,r,h,t,\n");
  const std::string table = kPython + " " PDNN_SOURCE_DIR "/scripts/report/memory_table.py ";
  testing::CommandResult r =
      run_command(table + path("pdnn.csv") + " " + path("torch.csv") + " --out " + path("t.md"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string md = slurp("t.md");
  for (const char* line : {
           "## unet_b64_d4, batch 1, fp32\n\n| side | pdnn uncapped | pdnn under the side's cap 1 | "
           "pdnn under the side's cap 2 | PyTorch plain | PyTorch save_on_cpu | PyTorch checkpoint | "
           "PyTorch checkpoint+save_on_cpu |\n",
           "| 1024 | 5.00 GiB, 122 ms | under 2.5G: 2.40 GiB, 140 ms (3 layer(s) offloaded, 1 "
           "recomputed) | under 3G: 2.90 GiB, 125 ms (2 layer(s) offloaded, 0 recomputed) | 5.50 "
           "GiB, 150 ms | 1.20 GiB, 400 ms | 3.00 GiB, 180 ms | 0.90 GiB, 450 ms |\n",
           "| 2048 | oom | under 8.5G: 8.00 GiB, 600 ms (9 layer(s) offloaded, 2 recomputed) | "
           "no-fit 10.2GiB | oom | 4.00 GiB, 1600 ms | 11.00 GiB, 700 ms | timeout |\n",
           "- pdnn uncapped: 1024\n- pdnn under the side's cap 1: 2048 (under 8.5G)\n"
           "- pdnn under the side's cap 2: 1024 (under 3G)\n- PyTorch plain: 1024\n"
           "- PyTorch save_on_cpu: 2048\n- PyTorch checkpoint: 2048\n"
           "- PyTorch checkpoint+save_on_cpu: 1024\n",
           "- 1024 under 2.5G: 140 ms: 1.15x uncapped, 0.93x PyTorch plain, 0.35x PyTorch "
           "save_on_cpu, 0.78x PyTorch checkpoint, 0.31x PyTorch checkpoint+save_on_cpu\n",
           "- 2048 under 8.5G: 600 ms: 0.38x PyTorch save_on_cpu, 0.86x PyTorch checkpoint\n",
           "- 1024 uncapped: step 122 ms, predicted 120 (1.017); peak 5.00 GiB, planned 5.10 "
           "(0.980) (context of another run)\n",
           "- 1024 under 2.5G: step 140 ms, predicted 130 (1.077); peak 2.40 GiB, planned 2.45 "
           "(0.980)\n",
           "## unet_b64_d4, batch 4, fp32\n\n| side | pdnn uncapped | PyTorch plain | PyTorch "
           "save_on_cpu | PyTorch checkpoint |\n|---|---|---|---|---|\n| 512 | 5.10 GiB, 130 ms | - "
           "| - | - |\n",
           "- 512 uncapped: step 130 ms, predicted 128 (1.016); peak 5.10 GiB, planned 5.65 (0.903) "
           "(no context known)\n"})
    EXPECT_TRUE(contains(md, line)) << line << "\n---\n" << md;
  EXPECT_FALSE(contains(md, "2048 uncapped")) << md;  // the plan of a run that did not train
  const std::string rows = slurp("t.csv");
  for (const char* line : {
           "app,batch,precision,configuration,framework,variant,side,cap_gib,status,step_ms,"
           "peak_gib,peak_reserved_gib,predicted_ms,step_over_predicted,planned_gib,context_gib,"
           "peak_over_planned,plan,largest_side\n",
           "unet_b64_d4,1,fp32,pdnn under the side's cap 1,pdnn,capped,1024,2.500,ok graph,140.000,"
           "2.400,,130.0,1.0769,2.950,0.500,0.9796,\"3 layer(s) offloaded, 1 recomputed\",2048\n",
           "unet_b64_d4,1,fp32,pdnn uncapped,pdnn,plain,2048,,oom,,,,480.0,,21.000,0.500,,,1024\n",
           "unet_b64_d4,1,fp32,PyTorch checkpoint,pytorch,checkpoint,2048,,ok,700.000,11.000,11.100,,"
           ",,,,,2048\n"})
    EXPECT_TRUE(contains(rows, line)) << line << "\n---\n" << rows;
  // The table's CSV never overwrites an input.
  r = run_command(table + path("pdnn.csv") + " --out " + path("pdnn.md"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.output, "its CSV " + path("pdnn.csv") + " is an input")) << r.output;
  if (run_command(kPython + " -c 'import matplotlib'").status != 0)
    GTEST_SKIP() << kPython << " lacks matplotlib (apt-get install python3-matplotlib): no plot";
  r = run_command(kPython + " " PDNN_SOURCE_DIR "/scripts/report/plot_memory.py " + path("pdnn.csv") +
                  " " + path("torch.csv") + " --vs-side --out " + path("t.png"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(slurp("t.png").substr(1, 3), "PNG");
}

// W4's pdnn step (memory_table.py): a row of two blocks written before the app left out the
// block that times the algorithms (before 2026-11-27T20:00Z) holds that block, and its faster
// block is the steady one; a later row's two blocks are both steady: their median, not the
// faster (which would favour pdnn); a row of more blocks: the median.
TEST_F(MemoryTable, W4StepIsTheSteadyBlocksMedian) {
  spit("w4.csv",
       "app,framework,variant,side,batch,precision,gpu_memory_limit_gib,peak_gib,"
       "peak_reserved_gib,median_ms,min_ms,max_ms,steps,status,planned_gib,context_gib,plan,gpu,"
       "versions,git_rev,host,timestamp\n"
       "caltech9,pdnn,plain,224,64,fp32,,3.600,3.600,50.0,30.0,70.0,2,ok graph,4.200,0.600,,H200,,"
       "r,h,2026-11-27T01:00:00Z\n"
       "caltech9,pdnn,plain,448,64,fp32,,14.300,14.300,100.0,98.0,102.0,2,ok graph,14.900,0.600,,"
       "H200,,r,h,2026-11-29T13:58:19Z\n"
       "caltech9,pdnn,plain,672,64,fp32,,32.100,32.100,220.0,218.0,221.0,3,ok graph,32.700,0.600,,"
       "H200,,r,h,2026-11-27T01:00:00Z\n");
  const testing::CommandResult r =
      run_command(kPython + " " PDNN_SOURCE_DIR "/scripts/report/memory_table.py " + path("w4.csv") +
                  " --out " + path("w4t.md"));
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string md = slurp("w4t.md");
  for (const char* line : {"| 224 | 3.60 GiB, 30 ms |", "| 448 | 14.30 GiB, 100 ms |",
                           "| 672 | 32.10 GiB, 220 ms |"})
    EXPECT_TRUE(contains(md, line)) << line << "\n---\n" << md;
}

// nvidia-smi's samples of the whole GPU (scripts/report/smi_peaks.py): each stretch above the
// idle level is one process, named by the runner's phase it began in, with its largest sample;
// a sample or mark it cannot read is an error naming the file and line.
TEST_F(MemoryTable, SmiPeaksFindsEachProcessAndItsLargestSample) {
  // 2026/11/28 21:29:45 UTC is 1795901385
  spit("smi.csv",
       "2026/11/28 21:29:45.000, 0\n2026/11/28 21:29:45.100, 600\n"
       "2026/11/28 21:29:45.200, 6257\n2026/11/28 21:29:45.300, 0\n"
       "2026/11/28 21:29:46.000, 3389\n2026/11/28 21:29:46.100, 3000\n");
  spit("marks.txt", "1795901385.0 pdnn 6.1G\n1795901385.9 pdnn 3.3G\n");
  const std::string cmd = kPython + " " PDNN_SOURCE_DIR "/scripts/report/smi_peaks.py ";
  testing::CommandResult r = run_command(cmd + path("smi.csv") + " " + path("marks.txt"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "pdnn 6.1G                     0.1      0.2      6257    6.110"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "pdnn 3.3G                     1.0      1.1      3389    3.310"))
      << r.output;
  spit("bad.csv", "2026/11/28 21:29:45.000, lots\n");
  r = run_command(cmd + path("bad.csv") + " " + path("marks.txt"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, path("bad.csv") + ":1: not a 'timestamp, MiB' sample")) << r.output;
}

}  // namespace
}  // namespace pdnn
