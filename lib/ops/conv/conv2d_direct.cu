// Direct 3x3 stride-1 convolution on the GPU, with halo tiles in shared memory (conv2d_gpu.h):
// the GPU twin of conv2d_direct.cpp, for every channel count. Every W4 convolution is of this
// kind. The implicit-GEMM kernels (conv2d_implicit_gemm.cu) gather one input element per
// (tap, pixel) pair, nine copies of each input element, each with its own address arithmetic:
// measured on the H200 (ncu), 60-80% of their instructions were copies and index arithmetic.
// Here a block copies a tile of the input with its one-pixel halo once per chunk of channels,
// and all nine taps read it from shared memory.
//
// Forward (and backward-data, which is the forward of dy with the kernels rotated by 180
// degrees, the channel roles swapped and padding 2 - p):
//   block = BM output channels x a TH x TW patch of output pixels of one image; the reduction
//   walks the input channels CK at a time. A stage holds the input patch with its halo,
//   xs[CK][TH+2][TW+2], and the weights of those channels, ws[9][CK][BM] (from a copy of the
//   weights re-laid out as [input channel][tap][output channel] by prep_weights_k, once per
//   call: 147 K floats at most in W4). STAGES stages in flight (cp.async, as in the
//   implicit-GEMM kernels).
//   - fp32 (FMA): thread (ty, tx) computes 8 output channels (ty*4 + {0..3}, BM/2 + ty*4 +
//     {0..3}) x 8 consecutive pixels of one row of the patch. Per input channel and kernel row
//     r: 10 input values from shared memory (the 8 pixels and their 2 neighbours), then for
//     each kernel column q two float4 of weights and 64 FMAs: 16 loads for 192 FMAs.
//   - TF32 (mma.sync m16n8k8): BF16's kernel below, byte for byte, with 8 float32 channels a
//     stage where BF16 has 16 bf16: a pixel's channels of a stage are 32 bytes either way, and
//     an ldmatrix row of 16 bytes holds 4 TF32 elements, which land in m16n8k8's fragment
//     order (kit/mma.h), so the tiles, the swizzles and every ldmatrix address are BF16's; only
//     the staging (kit::HaloPairsF32: a channel's pixel pair as one 8-byte load, rounded to TF32
//     as it is stored to shared memory), the weights' layout ([c / 8][tap][Mp][8], rounded when re-laid out), the
//     mma and the epilogue's pair store (8 bytes) differ. No conversion sits in the inner loop.
//     Until issue 32 TF32 ran on the fp32 tiles' layout, a fragment element by element from
//     channel-major shared memory (24 4-byte shared loads a tap a warp on Fwd64 where ldmatrix
//     issues 6 16-byte ones), each stage's tile rounded in place after a barrier: W4's conv2
//     forward took 1.213 ms on an H200 against BF16's 0.329 (eager profile, bf16-w4-h200).
// Backward-weights: dw[m][c][tap] += sum over images and pixels of g[m][pixel] x[c][pixel +
//   tap], g = act'(y) dy (y copied beside dy and applied in shared memory, as in the implicit
//   kernel). Block = BM output channels x BC input channels (x 9 taps); the reduction walks
//   TH x TW patches of output pixels, split over blockIdx.z (each split writes its partial sums,
//   added in split order afterwards: deterministic); the splits fill whole waves of the blocks
//   resident on the multiprocessors, at most four blocks each (bww_plan). A stage holds gs[BM][TH*TW] and the input
//   patch with its halo xs[BC][TH+2][TW+2] (BF16: pixel-major, below).
//   - fp32: thread computes 8 output channels x 1 input channel x 9 taps (72 sums); per row of
//     the patch and 4 pixels: 8 float4 of g (the same for the whole warp: broadcast) and 3 x 6
//     input values, for 288 FMAs.
//   - TF32: warp (wm, wn) computes 32 output channels x 8 input channels x 9 taps (MI = 2, NI =
//     9 mma tiles, one per tap); an 8-deep step is 8 pixels of a row of the patch.
// BF16 (mma.sync m16n8k16, bf16 tensors, fp32 sums; the same block tiles and warp tiles as
// TF32, a k step of 16 instead of 8). The fragments come from shared memory by ldmatrix (one
// instruction per 16x16 A fragment or two 8-wide B fragments), so the operands sit there with
// their k elements contiguous (channel-minor for the forward, pixel-minor for the weight
// gradient), in rows of 16 bf16 swizzled or padded so that ldmatrix's 8 rows a phase fall on 8
// different 16-byte bank groups. cp.async moves 4 bytes at the least and NCHW puts a pixel's
// channels a plane apart, so the input tiles are staged through registers (the next step's
// loads in flight while the block computes the current one, as conv2d_implicit_staged.cu):
// two consecutive pixels of a row as one 4-byte load where the width is even (the halo tile
// then starts at an even column: one more column when the padding is odd), two 2-byte loads
// otherwise.
//   - forward: a stage is 16 input channels, xs[pixel of the halo][16 channels] and
//     ws[tap][m][16 channels] (weights re-laid out once per call in bf16 as
//     [channel / 16][tap][Mp][channel % 16], copied by cp.async 16 bytes at a time). A thread
//     loads two channels x two pixels (two 4-byte loads) and stores two channel pairs (byte
//     permutes). Per tap a warp issues MI ldmatrix.x4 (A) and NI/2 ldmatrix.x4 (B: the halo
//     row's 8 pixels at the tap's offset) for MI*NI mma: on Fwd64 (warp 32 x 64) 6 ldmatrix
//     (3 KB) per 16 mma (32 K multiply-adds), 0.09 bytes of shared memory a multiply-add, so
//     the 128 bytes a clock an SM reads from shared memory carry about 1400 multiply-adds a
//     clock, near mma.sync's bf16 rate on the H100: the floor of a pass is its FLOPs at
//     mma.sync's rate or its bytes (x, y once; 2 bytes an element) at the copy rate.
//     Epilogue: where y's width is even (and no phases), a lane's two accumulators of a row
//     (pixels 2t, 2t + 1) are one bf16x2 store, the activations compile-time, and warps whose
//     tile lies inside y check no bounds (fwd_mma_put_pairs). Instruction counts of sm_90 SASS
//     (issue 32; W4 conv2, Fwd32, 2 stages of 16 channels): the element-wise epilogue was 4259
//     instructions a warp of the 6650 ncu counted (64 % of the kernel: 66 an output, 14.8 a
//     mma), the pair stores about 350 (ReLU; about 540 with backward-data's act'(msrc)).
//     Staging (kit::HaloPairsBf16, which backward-weights shares): thread t copies channel
//     pairs t % 4 (+ 4) at pixel pairs t / 4 + j THREADS / 4, so that a unit's pixel follows
//     the previous one's by a compile-time step and its shared address is the thread's plus a
//     constant: a unit's loads cost ~20 instructions (they
//     cost ~41 when each unit's place was re-derived from tid by two divisions, with 64-bit
//     sums and the pairs branch inside) and its stores 4 (~16). A Fwd32 stage a warp (SASS):
//     144 HMMA, 45 ldmatrix, ~236 staging loads (was ~490), ~84 permutes and shared stores
//     (~190), ~140 weight cp.async, ~60 barrier and loop: ~4.9 instructions a mma (~7.5);
//     W4 conv2's forward ~2000 a warp against 6650 (the floor's 288 HMMA + 90 ldmatrix).
//   - backward-weights: a 16-deep step is 16 pixels, one row of the 8 x 16 patch. A stage holds
//     gs[m][128 pixels] (act'(y) dy, rounded to bf16 as it is stored: the operand every path
//     rounds) and the input patch with its halo once, pixel-major, xs[halo pixel][32 channels]
//     (80 bytes a pixel: 8 consecutive pixels on 8 bank groups): tap (r, q)'s 16 pixels of a
//     row are 16 rows of 16 bytes (a warp's 8 channels) at any column shift q, which
//     ldmatrix.trans reads as the k x n B fragment (three column-shifted copies, each element
//     stored by three predicated 2-byte stores, until issue 32). Each half of a stage (4 rows of
//     the patch) reads its 6 halo rows once (ldmatrix.x4.trans: shifts 0 and 1; .x2.trans: shift
//     2), each for the 3 rows of the patch that use it: per row of the patch 2 ldmatrix.x4 (A)
//     and 3 (B) for 18 mma. Staging: g's units (row, 8 pixels) where dy's and y's rows are
//     whole 16-byte aligned octets (ow % 8 == 0: every W4 layer), else (row, pixel pair), keep
//     the thread's pixels for the whole stage, rows THREADS / 16 (/ 64) apart (a 32-bit step a
//     unit); x's are the forward's (kit::HaloPairsBf16, two channel groups a half).
//     Instruction counts of sm_90 SASS (issue 32; the stage loop a warp along the path taken:
//     4-byte x pairs, one activation, no bias row): Bww32 with the activation mask (W4 conv2)
//     ~3240 (static 3835) -> 942 with g octets (1126 with pairs): 144 HMMA, 40 ldmatrix, 40
//     LDG (8 of them 16-byte), 36 STS + 32 PRMT, ~140 act' instructions, the rest the x
//     loads' predicates and 64-bit addresses; Bww64 with the mask (static 2863) -> 863.
//     Shared memory a block: Bww32 80 -> 48 KB (three blocks an SM: 168 registers a thread,
//     165 used), Bww64 97 -> 65 KB (still two: 128 registers at 256 threads, ~100 bytes
//     spilled).
// 4x4 stride-2 padding-1 convolutions in BF16 (W5: every layer of D but the last, and every
// ConvTranspose2d of G but the first, whose passes are these with forward and backward-data
// swapped) run the same kernels with a 2x2 kernel (KS = 2: KK = 4 taps, halo of one pixel):
//   - forward: x's space-to-depth phases xs (n, 4c, h/2 + 1, w/2 + 1 rounded up to even),
//     xs[4c + 2pr + pq][u][v] = x[c][2u + pr - 1][2v + pq - 1], are made by one pass
//     (space_to_depth_k), then the forward kernel runs the unpadded 2x2 convolution of xs with
//     w'[k][4c + 2pr + pq][a][b] = w[k][c][2a + pr][2b + pq] (laid out by prep_weights_mma_k):
//     block = BM output channels x TH x TW output pixels of one image, the reduction 16 phase
//     channels x 4 taps a stage; a warp's tile and a thread's accumulators as in 3x3 (Fwd64:
//     32 x 64 outputs a warp, 64 fp32 sums a thread), 4 instead of 9 taps a stage.
//   - backward-data: by output phase (pr, pq) (the CPU's conv2d_k4s2.h): dx[c][2u + pr][2v + pq]
//     is the 2x2 stride-1 convolution of dy from row u - 1 + pr, column v - 1 + pq, with
//     tap (a, b) = w[k][c][3 - 2a - pr][3 - 2b - pq]: the forward kernel with blockIdx.z = the
//     phase (its weights, its halo offset), each block's outputs written to its phase's pixels
//     of dx (dx_act there too); no zero taps, no col2im, no phase tensor.
//   - backward-weights: the 2x2 kernel's gradient over xs (made again, one pass), block = BM
//     output channels x 32 phase channels x 4 taps, the patch pixel-major as in 3x3; per
//     16-pixel row a warp issues 2 ldmatrix.x4 (A) + 1 ldmatrix.x4.trans (B: the next halo
//     row at shifts 0 and 1) for 8 mma; the split partial sums are written in w's layout
//     (w_index), so the fixed-order split sum adds them straight into dw.
//   Floors on the H100 (990 TFLOP/s dense bf16, ~3 TB/s), W5 at batch 64 (bf16 x, y, w; the
//   weight gradient fp32 read and written): layers 64 -> 128 at 32x32, 128 -> 256 at 16x16 and
//   256 -> 512 at 8x8: 4.29 GFLOP every pass (4.3 us) against 3-20 MB (1-7 us); 3 -> 64 at
//   64x64: 0.40 GFLOP against 10 MB (3.3 us). The phases cost one more pass over x (write xs,
//   read it again: ~4.5 us of traffic on 64 -> 128's 8.4 MB x; the kernel takes 13 us, ncu on
//   an H200: space_to_depth_k's comment). Known waste: a 3-channel input is 12 phase
//   channels of a 16-deep step.
// One image a block, the 2x2 kernels read a channel-minor copy of their input (direct_fwd_cm):
//   xc (n, C / 16, H, W, 16), made once per call by to_cm16_k: for the forward straight from x
//   as its space-to-depth phases (instead of space_to_depth_k's NCHW xs, the same one pass), for
//   backward-data from dy (one more pass: dy read, xc written, 2 bytes an element each). A
//   pixel's 16 channels of a step are then 32 contiguous bytes, so the stage's halo tile
//   arrives by 16-byte cp.async (kit::HaloCm16) like the weights, in CM_STAGES (3-4) stages:
//   a step waits on the oldest stage and one barrier, where the register-staged steps
//   (fwd_mma_steps) waited on a round trip each step. Backward-data's phase outputs leave by
//   the pair epilogue (fwd_mma_put_pairs, kPhase). Measured on an H200 (ncu's clocks, results/
//   bench/w5-cm16-h200): D.conv2's forward (Fwd128, 128 blocks of 16 steps) 37.1 -> 25.1 us,
//   ~430 -> 261 instructions a warp a step; predicted ~15-18 us from the steps' mma issue, missed:
//   one block of 8 warps an SM issues 1.1-1.3 instructions a cycle, 6.8 cycles between a
//   warp's instructions (stalls a warp an instruction: fixed-latency waits 1.96, shared-memory
//   waits 1.0, the tensor pipe 0.83, global 0.42, the barrier 0.31), and a 16-warp tile of 32 x
//   32 (tried, reverted) kept the same 1.2 instructions a cycle at 12.4 cycles a warp.
//   Backward-data (phases): D.conv2's 78.7 -> 35.1 us, D.conv1's (3 channels out) 76.3 -> 30.0,
//   most of it the pair epilogue (the general put had taken ~70 instructions an output and
//   stalled on instruction fetch). The copy of dy costs 4.4-9.4 us a pass.
// Several images a block (DirectImages; Auto where four or more fit the patch: W5's 4x4
// outputs, every pass of its smallest layer; forced, 8x8 too). One image a block filled a half and an
// eighth of the 8 x 16 patch there, and worse: on the H200 a 16-channel step took 2.2-3.5 us
// a block whatever its fill (W5 at n = 64: 128->256 forward 72 us for 32 steps at half fill,
// 64->128 62 us for 16 steps at full fill, 256->512 165 us for 64 steps at an eighth), so a
// block's time is its steps' latency (two global round trips and a barrier a step), not its
// multiply-adds, and filling the patch alone would leave the time as it is. So:
//   - a block's patch holds the outputs of imgs = patch / (oh ow) images (pixel p: image
//     p / (oh ow), its pixel p % (oh ow)), and the halo tile their halos side by side
//     (kit::HaloImagesBf16: image i's halo row r at tile pixel i is + r rs; each halo its own
//     image's pixels and zeros, never a neighbour's). ldmatrix takes a row address a lane, so
//     a B fragment's 8 pixels need not be 8 consecutive pixels of a halo row: each lane keeps
//     its pixel's place (NI / 2 registers forward, TH backward-weights), the tap adds a column
//     (compile-time) or the row stride (a register). The strides are chosen on the host
//     (imgs_layout) so that consecutive output pixels land on consecutive tile pixels modulo 8
//     (an ldmatrix phase on 8 bank groups) where that fits the tile (CAP pixels: 512 forward,
//     448 / 368 backward-weights), else packed (4x4 outputs in backward-weights: rows 6 apart,
//     2-way conflicts on the B reads).
//   - forward and backward-data (forward-kind, direct_fwd_imgs): the 16-channel steps split
//     over blockIdx.z (with the phase), as many splits as keep the grid within one wave of the
//     resident blocks, 4 steps a split at least; each split writes its raw fp32 sums
//     [split][phase][image][k][oh ow], and fwd_imgs_finish_k adds them in split order and
//     applies bias, activation, act'(msrc), the phases' places and the one rounding:
//     deterministic. W5 (n = 64, H200's 132 SMs): 256 -> 512 forward 8 groups of 8 images x 4
//     (M128) = 32 blocks -> 8 splits of 8 steps (256 blocks); its backward-data (phases of 4x4,
//     256 channels out) 8 x 2 x 4 phases -> 4 splits of 8 steps; 128 -> 256 forward (8x8: 2
//     images) 32 x 2 -> 4 splits of 8 steps; its backward-data 32 x 1 x 4 -> 2 splits of 8.
//     The sums cost 2 x 4 bytes an output a split (8-16 MB a pass: ~4-8 us at the copy rate).
//   - backward-weights: a stage is one patch of imgs images (8 of 4x4, 2 of 8x8), so the
//     reduction walks n / imgs stages instead of n (8 instead of 64 at 256 -> 512; at
//     128 -> 256 8 a block either way, but 4 splits of 256 blocks, one wave, instead of 8 of
//     512), the split over blockIdx.z unchanged (bww_plan); per 16-pixel step a warp reads
//     both tap rows' B (2 ldmatrix.x4.trans) for 8 mma, as no halo row is shared between steps.
//   Predicted (H200, from the per-step latency above: ~2.5 us a forward step and ~3.6-5 us a
//   backward-weights stage a block, one wave resident; + ~5 us of weights and phases, + the
//   split sums): 256 -> 512 and its transposed twin: forward and backward-data 0.165 ->
//   ~0.03 ms (8 steps a block, 16 MB of sums), backward-weights 0.229 -> ~0.035 (8 stages);
//   128 -> 256 and twin: forward / backward-data 0.072 / 0.053 -> ~0.035 (8 steps), backward-
//   weights 0.087 -> ~0.045 (one wave of 8 stages instead of two). Measured on an H200
//   (conv-ab, bench_conv_gpu --filter W5 --algos direct --precisions bf16, one image a block ->
//   several, medians of 2 rounds; results/bench/bf16-w5-h200/): 256 -> 512 forward 0.165 ->
//   0.081, backward-data 0.167 -> 0.074, backward-weights 0.229 -> 0.074; its transposed twin
//   0.166 -> 0.073, 0.165 -> 0.081, 0.229 -> 0.075: 2.0-3.1x, but 2.3-2.7x slower than
//   predicted. At 8x8 (two images a patch) only backward-weights gained (0.086 -> 0.072); forward
//   and backward-data lost (0.071 -> 0.083, 0.053 -> 0.077; twin 0.053 -> 0.077, 0.071 ->
//   0.083), and W5's bf16 step with them went 4.13 -> 4.23 ms: so Auto takes four images or
//   more (4x4 outputs), and 8x8 runs one image a block. Why the prediction missed (the split
//   sums' traffic, the per-step latency at a fuller patch): not yet profiled.
// Shared-memory strides are padded so that a warp's reads fall on different banks (noted at
// each). Index arithmetic: 64-bit image offsets, 32-bit within an image.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "cuda/launch.h"
#include "ops/conv/conv2d_3x3.h"
#include "ops/conv/conv2d_gpu.h"
#include "ops/conv/conv2d_k4s2.h"
#include "ops/conv/direct_taps.h"
#include "ops/kit/mma.h"
#include "ops/kit/split_k.h"
#include "ops/kit/tile.h"

namespace pdnn {
namespace cuda {

namespace {

using namespace kit;
using direct::Taps;
using direct::w_index;

// v, which the compiler must assume changed here: the BF16 loaders' index arithmetic is then
// recomputed at each stage instead of being kept in registers for the whole loop (hoisted, it
// cost more registers than the tiles' accumulators).
__device__ __forceinline__ int fresh(int v) {
  asm volatile("" : "+r"(v));
  return v;
}

constexpr int round_up_c(int a, int m) { return (a + m - 1) / m * m; }

// ---- weights re-laid out: out[i][tap][o] (o < Mp, zero past the output channels) ----------
// forward: i = input channel c, o = output channel k, from w[k][c][tap];
// backward-data (flip): i = k, o = c, from w[k][c][8 - tap] (the kernel rotated by 180 degrees).
__global__ void prep_weights_k(int k, int c, int Mp, bool flip, const float* __restrict__ w,
                               float* __restrict__ out) {
  const int in_ch = flip ? k : c;
  const int64_t total = static_cast<int64_t>(in_ch) * 9 * Mp;
  PDNN_GRID_LOOP(e, total) {
    const int o = static_cast<int>(e % Mp);
    const int tap = static_cast<int>((e / Mp) % 9);
    const int i = static_cast<int>(e / (9 * Mp));
    float v = 0.f;
    if (!flip && o < k) v = w[(static_cast<int64_t>(o) * c + i) * 9 + tap];
    if (flip && o < c) v = w[(static_cast<int64_t>(i) * c + o) * 9 + 8 - tap];
    out[e] = v;
  }
}

// The tensor cores' layout: out[i / G][tap][o][i % G] (i < round_up(in_ch, G), o < Mp; zero
// past the channels), rows of G input channels (32 bytes: G = 16 bf16, or 8 float32 rounded to
// TF32 here) for the A fragments (k = input channel) of the forward kind of pass; KK taps; cc:
// the kernel's channels (4c with S2d; c: w's). The pass's input channels are w's
// output channels k when flip (backward-data: the kernel rotated by 180 degrees) or Phase
// (then one such layout per phase, phase-major: direct::prep_index). A row (phase, i / G,
// tap) holds Mp x G outputs, over blockIdx.x; a thread takes `per` rows (kPrepRows at most;
// blockIdx.y's group, striding), their loads issued before any store, so that several are in
// flight: the gather's latency, not its bytes, sets the time of the large layouts. Index
// arithmetic in 32 bits, one division a row. ncu on an H200 (results/bench/w5-side-kernels-h200),
// W5's 256 -> 512 layer's 2M elements: one thread an element with 64-bit divisions 32 us, one
// row a thread 18 us, 8 rows 14 us (its traffic: ~3 us); the 128-channel layers' 131K elements:
// 3.2 us with one row a thread, 4.8 with 8 (fewer blocks): so 8 rows from 2^18 elements, else
// one. A kernel that copied blocks of 16 x 32 channels' runs of w through shared memory, every
// element read and written once, coalesced (17th session: its loads in flight together, its
// runs padded against bank conflicts), measured no faster: 153 us in W5's bf16 step's 22
// launches, this one 152 in the sixteenth session's (ncu, results/bench/w5-s17-h200); the small
// layouts are latency.
constexpr int kPrepRows = 8;
template <class E, int G>
__global__ void prep_weights_mma_k(int k, int cc, int c, int KK, int Mp, bool flip, Taps taps,
                                   int per, const E* __restrict__ w, E* __restrict__ out) {
  static_assert(G * sizeof(E) == 32, "rows of 32 bytes");
  const bool ko_in = flip || taps == Taps::Phase;  // the pass's input channel is w's k
  const int in_ch = ko_in ? k : cc, out_ch = ko_in ? cc : k;
  const int ing = (in_ch + G - 1) / G, rows = ing * KK * (taps == Taps::Phase ? 4 : 1);
  const int q = blockIdx.x * blockDim.x + threadIdx.x;  // o * G + j
  if (q >= Mp * G) return;
  const int j = q % G, o = q / G;
  for (int r0 = blockIdx.y * per; r0 < rows; r0 += gridDim.y * per) {
    const int r1 = min(rows, r0 + per);
    E v[kPrepRows];
#pragma unroll
    for (int t = 0; t < kPrepRows; ++t) {
      const int r = r0 + t, phase = r / (ing * KK), rest = r - phase * ing * KK;
      const int i = (rest / KK) * G + j, tap = rest % KK;
      v[t] = E{0};
      if (r < r1 && i < in_ch && o < out_ch)
        v[t] = w[w_index(taps, ko_in ? i : o, ko_in ? o : i, flip ? KK - 1 - tap : tap, c, phase)];
    }
#pragma unroll
    for (int t = 0; t < kPrepRows; ++t)
      if (r0 + t < r1) {
        if constexpr (std::is_same<E, float>::value) v[t] = round_tf32(v[t]);
        out[static_cast<int64_t>(r0 + t) * Mp * G + q] = v[t];
      }
  }
}

// xs (n, 4c, hs, ws) = the phases of x (n, c, h, w) zero-padded by 1: xs[4 ci + 2 pr + pq][u][v]
// = x[ci][2u + pr - 1][2v + pq - 1] (zero outside x). A 4x4 stride-2 padding-1 convolution of x
// is the 2x2 stride-1 convolution of xs without padding (conv2d_gpu.h). A thread makes both
// column phases pq of an (image, ci, pr, u, v), from x's neighbouring pixels (2v - 1, 2v) (a
// warp reads a row's consecutive bytes), kS2dUnroll of them with their loads in flight
// together; index = ((plane - plane0) 2 + pr) hs ws + u ws + v, split by FastDiv (a multiply
// and a shift), so the launch takes at most 2^30 of them (the host walks the planes in
// chunks). ncu on an H200, as above, W5's 64 -> 128 layer (x 8.4 MB, xs 10 MB: ~6 us of
// traffic): one thread an output with four 64-bit divisions 41 us; one plane a block, two loads
// a thread 14.7 us; this 13.2 us (256 -> 512: 18, 13.0, 7.1 us).
constexpr int kS2dUnroll = 4;
template <class E>
__global__ void space_to_depth_k(int count, int64_t plane0, int h, int w, int hs, int ws,
                                 FastDiv div2per, FastDiv divws, const E* __restrict__ x,
                                 E* __restrict__ xs) {
  const int per = hs * ws, stride = gridDim.x * blockDim.x;
  for (int i0 = blockIdx.x * blockDim.x + threadIdx.x; i0 < count; i0 += kS2dUnroll * stride) {
    E v0[kS2dUnroll], v1[kS2dUnroll];
    int64_t o[kS2dUnroll];
#pragma unroll
    for (int t = 0; t < kS2dUnroll; ++t) {
      const int i = i0 + t * stride;
      const int pl = static_cast<int>(div2per.div(static_cast<uint32_t>(i)));
      const int rem2 = i - pl * 2 * per, pr = rem2 >= per, rem = rem2 - pr * per;
      const int u = static_cast<int>(divws.div(static_cast<uint32_t>(rem))), v = rem - u * ws;
      const int iy = 2 * u + pr - 1, ix = 2 * v - 1;
      const bool row = i < count && static_cast<unsigned>(iy) < static_cast<unsigned>(h);
      const E* xp = x + (plane0 + pl) * h * w + iy * w;
      v0[t] = v1[t] = from_f32<E>(0.f);
      if (row && static_cast<unsigned>(ix) < static_cast<unsigned>(w)) v0[t] = xp[ix];
      if (row && static_cast<unsigned>(ix + 1) < static_cast<unsigned>(w)) v1[t] = xp[ix + 1];
      o[t] = i < count ? (4 * (plane0 + pl) + 2 * pr) * per + rem : -1;  // xs's plane 4p + 2pr
    }
#pragma unroll
    for (int t = 0; t < kS2dUnroll; ++t)
      if (o[t] >= 0) {
        xs[o[t]] = v0[t];
        xs[o[t] + per] = v1[t];
      }
  }
}

// The channel-minor copy of a forward-kind pass's input (conv2d_gpu.h's
// conv2d_direct_channel_minor): xc (n, G = ceil(c / 16), h, w, 16), xc[i][g][u][v][j] = channel
// 16 g + j at (u, v), zero past c. kS2d: the channels are x's space-to-depth phases
// (space_to_depth_k's: channel 4 ci + 2 pr + pq at (u, v) is x[ci][2u + pr - 1][2v + pq - 1],
// c = 4 cx, h x w = hs x ws, x of cx x xh x xw); else x itself (c x h x w). A thread makes one
// pixel's 16 channels: 16 loads in flight (consecutive threads, consecutive pixels of a row),
// then two 16-byte stores (a warp writes 1 KB in one run). count = n G h w < 2^31 (check_k4s2).
template <bool kS2d>
__global__ void to_cm16_k(int count, int c, int h, int w, int cx, int xh, int xw, FastDiv divw,
                          FastDiv divh, FastDiv divg, const bf16* __restrict__ x,
                          bf16* __restrict__ xc) {
  const int groups = (c + 15) / 16;
  for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < count; e += gridDim.x * blockDim.x) {
    const int t = static_cast<int>(divw.div(static_cast<uint32_t>(e))), v = e - t * w;
    const int t2 = static_cast<int>(divh.div(static_cast<uint32_t>(t))), u = t - t2 * h;
    const int i = static_cast<int>(divg.div(static_cast<uint32_t>(t2))), g = t2 - i * groups;
    const uint16_t* xi = reinterpret_cast<const uint16_t*>(x) +
                         static_cast<int64_t>(i) * (kS2d ? cx * xh * xw : c * h * w);
    uint32_t lo[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int p = 16 * g + j;
      lo[j] = 0u;
      if constexpr (kS2d) {
        int iy, ix;
        const int ci = direct::s2d_source(p, u, v, &iy, &ix);
        if (p < c && static_cast<unsigned>(iy) < static_cast<unsigned>(xh) &&
            static_cast<unsigned>(ix) < static_cast<unsigned>(xw))
          lo[j] = __ldg(xi + (ci * xh + iy) * xw + ix);
      } else {
        if (p < c) lo[j] = __ldg(xi + (p * h + u) * w + v);
      }
    }
    uint4* dst = reinterpret_cast<uint4*>(xc + static_cast<int64_t>(e) * 16);
    dst[0] = make_uint4(lo[0] | lo[1] << 16, lo[2] | lo[3] << 16, lo[4] | lo[5] << 16,
                        lo[6] | lo[7] << 16);
    dst[1] = make_uint4(lo[8] | lo[9] << 16, lo[10] | lo[11] << 16, lo[12] | lo[13] << 16,
                        lo[14] | lo[15] << 16);
  }
}

// ---- forward --------------------------------------------------------------------------------
// KS: the kernel's side (3; 2 for the 4x4 stride-2 kernel's phases, BF16 only), KK its taps.
template <int BM_, int TH_, int TW_, int WM_, int WN_, int STAGES_, int KS_ = 3>
struct FwdCfg {
  static constexpr int BM = BM_, TH = TH_, TW = TW_, BN = TH * TW, CK = 8, STAGES = STAGES_;
  static constexpr int KS = KS_, KK = KS * KS;
  static constexpr int THREADS = (BM / 8) * (BN / 8);  // FMA: 8 x 8 outputs a thread
  // Blocks an SM must hold (registers capped to fit): two warps a scheduler at least. The
  // tensor cores (less shared memory a block): 12 or 16 warps an SM, at most 168 or 128
  // registers a thread (ptxas -v, sm_90, BF16: 64 x 8 x 16 spilled 56 bytes under 128).
  template <class P>
  static constexpr int min_blocks() {
    return P::kMma ? (THREADS >= 256 ? 2 : 3) : (THREADS >= 256 ? 1 : 2);
  }
  static constexpr int WM = WM_, WN = WN_, MI = BM / WM / 16, NI = BN / WN / 8;
  static constexpr int XW = TW + KS - 1, XR = TH + KS - 1;
  // fp32 (FMA) tiles: input channel stride 8 mod 32 banks, so that the row reads spread over
  // the banks
  static constexpr int CS = round_up_c(XR * XW, 32) + 8;
  static constexpr int SA = BM + 8;  // fp32 tiles' weight rows: 8 mod 32 banks
  static constexpr int X_STAGE = CK * CS, W_STAGE = KK * CK * SA;
  static_assert(WM * WN * 32 == THREADS, "the warps cover the block on the tensor-core path");
  static_assert(TW % 8 == 0 && BM % 16 == 0 && MI >= 1 && NI >= 1, "tile shape");
  // Tensor cores (two stages, register-staged), in 16-bit units (a TF32 element is two): the
  // halo tile from an even column, XB pixels of 16 units (16 bf16 or 8 TF32 channels), and the
  // weights, KK x BM rows of 16 units (swizzled rows, kit::swz16). Pixels of the halo tile
  // padded to 24 units (48 bytes: 8 consecutive pixels on 8 bank groups, at any tap's offset,
  // with no per-tap swizzle arithmetic).
  static constexpr int XWB = TW + round_up_c(KS, 2), XB = XR * XWB, XP16 = 24;
  static constexpr int X16_STAGE = XB * XP16, W16_STAGE = KK * BM * 16;  // bf16 elements
  // Several images a block (direct_fwd_imgs): the halos of the patch's images, CAP pixels at
  // most (imgs_layout), RJ pixel pairs a thread.
  static constexpr int CAP = 512, XI16_STAGE = CAP * XP16;
  static constexpr int RJI = (CAP / 2 + THREADS / 4 - 1) / (THREADS / 4);
  static_assert(NI % 2 == 0, "BF16: B fragments by ldmatrix.x4, two n tiles at a time");
  static_assert((BN / WN) % TW == 0 && BM / WM % 16 == 0, "BF16: a warp's pixels are whole rows");
  template <class P>
  static size_t smem_bytes() {
    return P::kMma ? 2 * 2 * static_cast<size_t>(X16_STAGE + W16_STAGE)
                   : sizeof(float) * STAGES * (X_STAGE + W_STAGE);
  }
  static size_t smem_bytes_imgs() { return 2 * 2 * static_cast<size_t>(XI16_STAGE + W16_STAGE); }
  // From a channel-minor copy (direct_fwd_cm): CM_STAGES stages by cp.async, as many as keep
  // min_blocks blocks on a multiprocessor (Fwd128 at KS = 2: 4 x 24 KB, two blocks; Fwd64: 4 x
  // 16 KB, three; Fwd32: 3 x 19 KB, three).
  static constexpr int CM_STAGES = BM == 32 ? 3 : 4;
  static size_t smem_bytes_cm() { return 2 * CM_STAGES * static_cast<size_t>(X16_STAGE + W16_STAGE); }
  // (a configuration's kernels use some of these: the 2x2 ones the BF16 stages, the 3x3 ones
  // the others; referenced here, so that nvcc does not warn of the rest as unused)
  static_assert(CK > 0 && STAGES > 0 && CS > 0 && SA > 0 && X_STAGE > 0 && W_STAGE > 0 &&
                    CM_STAGES >= 2, "stages");
};
template <int KS>
using Fwd128K = FwdCfg<128, 8, 16, 2, 4, 2, KS>;   // 256 threads
template <int KS>
using Fwd64K = FwdCfg<64, 8, 16, 2, 2, 3, KS>;     // 128 threads
template <int KS>
using Fwd32K = FwdCfg<32, 16, 16, 1, 4, 3, KS>;    // 128 threads

// E: the tensors' element type (float; bf16 for the BF16 kernels).
template <class E>
struct FwdArgsOf {
  int n, c, h, w, k, oh, ow, pad, Mp, tiles_x, tiles_y;
  int pairs;        // tensor cores: x's pixel pairs are one access (w even, x aligned to a pair)
  int y_pairs;      // ... y's (and msrc's) pixel pairs (ow even), no phases
  const E* x;
  const E* wp;      // fp32 [c][9][Mp]; TF32 [c / 8][9][Mp][8]; BF16 [c / 16][KK][Mp][16]
  const float* bias;
  E* y;
  Act act;
  const E* msrc;    // y = act'(msrc) . (the sum) when mact is not None (backward-data)
  Act mact;
  int64_t y_img;    // elements of an image of y
  // phases (the 4x4 stride-2 backward-data): blockIdx.z = phase (pr, pq) = (z / 2, z % 2) runs
  // the 2x2 kernels at wp + z * w_phase over x padded by (1 - pr, 1 - pq), and its output
  // (u, v) is y's (2u + pr, 2v + pq), y of dh x dw pixels. Else pad on both sides.
  int phases, dh, dw;
  int64_t w_phase;
  // Several images a block (direct_fwd_imgs; imgs > 0): blockIdx.x = images x imgs ... + imgs - 1,
  // their halos side by side (hal), output pixel p of the patch being image p / (oh ow)'s pixel
  // p % (oh ow); the 16-channel steps split over blockIdx.z / (phases ? 4 : 1), per_split a
  // split, each split's raw sums to part[split][phase][image][k][oh ow] (fwd_imgs_finish_k).
  int imgs, per_split;
  ImgHalo hal;
  float* part;
};

// acc += taps [TAP0, TAP1) of one stage of a forward-kind pass on the tensor cores (P: BF16, 16
// channels a stage; TF32, 8: 32 bytes a pixel either way, so the addresses in 16-bit units are
// the same): xs the stage's halo tile ([pixel][XP16] units), ws its weights ([tap][BM][16]
// units, rows swizzled by kit::swz16); a_lane, b_lane this lane's A and B offsets
// (fwd_mma_steps); IMGS: the B pixel of each pair of n tiles at boff[nj / 2], tap rows rsx
// apart. Per tap a warp issues MI ldmatrix.x4 (A), NI / 2 ldmatrix.x4 (B) and MI NI mma.
template <class T, class P, bool IMGS, int TAP0, int TAP1>
__device__ __forceinline__ void fwd_mma_taps(float* acc, const uint16_t* xs, const uint16_t* ws,
                                              int a_lane, int b_lane, const int* boff, int rsx) {
  constexpr int BM = T::BM, TW = T::TW, XWB = T::XWB;
#pragma unroll
  for (int tap = TAP0; tap < TAP1; ++tap) {
    const int toff = (tap / T::KS) * XWB + tap % T::KS;
    uint32_t af[T::MI][4], bf[T::NI][2];
#pragma unroll
    for (int mi = 0; mi < T::MI; ++mi) ldmatrix_x4(af[mi], ws + a_lane + (tap * BM + mi * 16) * 16);
#pragma unroll
    for (int nj = 0; nj < T::NI; nj += 2) {
      uint32_t r[4];
      if constexpr (IMGS)
        ldmatrix_x4(r, xs + boff[nj / 2] + (tap / T::KS) * rsx + (tap % T::KS) * T::XP16);
      else  // tile nj's first pixel: row nj * 8 / TW of the warp's rows, column nj * 8 % TW
        ldmatrix_x4(r, xs + b_lane + ((nj * 8 / TW) * XWB + nj * 8 % TW + toff) * T::XP16);
      bf[nj][0] = r[0];
      bf[nj][1] = r[1];
      bf[nj + 1][0] = r[2];
      bf[nj + 1][1] = r[3];
    }
#pragma unroll
    for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < T::NI; ++ni) P::mma(acc + (mi * T::NI + ni) * 4, af[mi], bf[ni]);
  }
}

// This lane's A and B offsets in a tensor-core forward-kind stage (fwd_mma_taps; in 16-bit units). A: matrix j = lane
// / 8 of ldmatrix.x4 is (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15) of a
// 16 x 16 tile; the swizzle of row tap * BM + m0 + mi * 16 + r is r's. B: matrices (tile ni, k
// 0-7), (ni, k 8-15), (ni + 1, k 0-7), (ni + 1, k 8-15): the lane's pixel (tile ni + lane / 16: 8
// pixels further along the row; the halo tile starting `shift` columns left of the window), its
// half of the 16 channels.
template <class T>
__device__ __forceinline__ int fwd_mma_a_lane(int wm, int lane) {
  return swz16(wm * (T::BM / T::WM) + (lane & 15), lane >> 4);
}
template <class T>
__device__ __forceinline__ int fwd_mma_b_lane(int wn, int lane, int shift) {
  const int pn0 = wn * (T::BN / T::WN);
  return ((pn0 / T::TW) * T::XWB + shift + (lane >> 4) * 8 + (lane & 7)) * T::XP16 +
         ((lane >> 3) & 1) * 8;
}

// One step's weights of a forward-kind pass on the tensor cores into ws ([tap][BM][16] 16-bit
// units, rows swizzled by kit::swz16) by cp.async, from wp's [step][tap][Mp][G] at output
// channel m0 (prep_weights_mma_k's layout: G = 16 bf16 or 8 TF32 channels a row, 32 bytes);
// the caller commits. (wp in its own element type: read through a uint16_t view, the bf16
// kernels compiled differently, W5's Fwd128 channel-minor forward spilling 8 bytes more.)
// Units (tap, row m, half hh), thread t units t + j THREADS: with U = 2 BM units a tap (a power
// of two), a unit's tap, row and half are shifts and masks of compile-time steps (a runtime loop with divisions cost ~80 instructions a warp a step on Fwd128: ncu,
// D.conv2's forward at f6207d1).
template <class T, class E>
__device__ __forceinline__ void fwd_mma_load_w(uint16_t* ws, const E* wp, int step, int Mp,
                                               int m0, int tid) {
  constexpr int BM = T::BM, U = 2 * BM, N = T::KK * U, G = direct::row_channels(sizeof(E));
  static_assert((U & (U - 1)) == 0, "power-of-two units a tap");
  const E* src = wp + (static_cast<int64_t>(step) * T::KK * Mp + m0) * G;
#pragma unroll
  for (int j = 0; j < (N + T::THREADS - 1) / T::THREADS; ++j) {
    const int e = tid + j * T::THREADS, tap = e / U, m = (e % U) >> 1, hh = e & 1;
    if (N % T::THREADS != 0 && e >= N) break;
    cp_async16(ws + swz16(tap * BM + m, hh), src + (tap * Mp + m) * G + hh * (G / 2), true);
  }
}

// Forward-kind pass on the tensor cores (P: BF16 or TF32): acc += the block's products over the
// input channels of steps [st0, st1), row_channels of them at a time (the file's comment). sm: the
// dynamic shared memory; (iy0, ix0) the halo's first input pixel; wp: the weights of the block's
// phase. IMGS (BF16): several images a block (a.imgs, a.hal; xim the first of them), their halos
// side by side, each lane's B pixel gathered by address.
template <class T, class P, bool IMGS = false>
__device__ __forceinline__ void fwd_mma_steps(const FwdArgsOf<typename P::Data>& a, float* acc,
                                              uint16_t* sm, const typename P::Data* xim, int iy0,
                                              int ix0, int m0, int st0, int st1,
                                              const typename P::Data* wp, int tid, int lane,
                                              int wm, int wn, int left = 0) {
  static_assert(P::kMma && (!IMGS || P::kK == 16), "tensor cores; several images: BF16");
  constexpr int XWB = T::XWB, XB = T::XB, THREADS = T::THREADS;
  constexpr int XSTAGE = IMGS ? T::XI16_STAGE : T::X16_STAGE;
  // a stage's channels, a half's
  constexpr int CS = direct::row_channels(sizeof(typename P::Data)), CH = CS / 2;
  // The input's units (kit::HaloPairsBf16, kit::HaloImagesBf16; TF32: kit::HaloPairsF32): the
  // two halves of a stage (16 bytes of a pixel each), channel pairs t % 4 (BF16) or channel
  // t % 4 (TF32) of each.
  using Halo = std::conditional_t<
      P::kK == 16,
      std::conditional_t<IMGS, HaloImagesBf16<T::XP16, THREADS, 1, T::RJI>,
                         HaloPairsBf16<XWB, XB, T::XP16, THREADS, 1>>,
      HaloPairsF32<XWB, XB, T::XP16, THREADS>>;
  uint16_t* Xs = sm;                   // 2 x [XB (CAP)][XP16]
  uint16_t* Ws = sm + 2 * XSTAGE;      // 2 x [KK * BM][16]
  const int shift = ix0 & 1, ix0e = ix0 - shift;  // the tile from an even column
  const bool pairs = a.pairs != 0;
  // A warp's pixels are whole rows of the patch (static_assert in FwdCfg), so every fragment
  // address is this lane's base plus a compile-time offset (the tap, the tile): the loops below
  // keep two base registers, not one address per fragment.
  // A: matrix j = lane / 8 of ldmatrix.x4 is (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15),
  // (m 8-15, k 8-15) of a 16 x 16 tile; the swizzle of row tap * BM + m0 + mi * 16 + r is r's.
  const int a_lane = fwd_mma_a_lane<T>(wm, lane);
  const int pn0 = wn * (T::BN / T::WN);
  const int b_lane = fwd_mma_b_lane<T>(wn, lane, shift);
  // IMGS: the lane's pixel of each pair of n tiles as its place in the halos (pixels past the
  // patch's images read image 0's first: their sums are never written), and the tap row's step.
  int boff[IMGS ? T::NI / 2 : 1];
  int i0 = 0, r0 = 0, c0 = 0;  // IMGS: the thread's first unit of the halos
  const int rsx = a.hal.rs * T::XP16;
  if constexpr (IMGS) {
    const int hw = a.oh * a.ow;
#pragma unroll
    for (int nj = 0; nj < T::NI; nj += 2) {
      const int n = pn0 + nj * 8 + (lane >> 4) * 8 + (lane & 7);
      int pix = 0;
      if (n < a.imgs * hw) {
        const int i = n / hw, p = n - i * hw, oy = p / a.ow;
        pix = i * a.hal.is + oy * a.hal.rs + p - oy * a.ow;
      }
      boff[nj / 2] = (pix + shift) * T::XP16 + ((lane >> 3) & 1) * 8;
    }
    const int per_img = a.hal.hr * a.hal.hwp, pp0 = tid >> 2;
    i0 = pp0 / per_img;
    r0 = (pp0 - i0 * per_img) / a.hal.hwp;
    c0 = pp0 - i0 * per_img - r0 * a.hal.hwp;
  }
  // The next stage's loads in two halves (hh: channel pairs 0-3, 4-7), each in flight while the
  // block computes half of the taps (half the staging registers).
  Halo rx;
  auto load_x = [&](int ci0, int hh) {
    if constexpr (IMGS)
      rx.load(xim, static_cast<int64_t>(a.c) * a.h * a.w, left, a.c, a.h, a.w, ci0 + hh * CH, iy0,
              ix0e, pairs, a.hal, i0, r0, c0, fresh(tid));
    else
      rx.load(xim, a.c, a.h, a.w, ci0 + hh * CH, iy0, ix0e, pairs, fresh(tid));
  };
  auto store_x = [&](int buf, int hh) { rx.store(Xs + buf * XSTAGE + hh * 8, fresh(tid)); };
  auto load_w = [&](int buf, int step) {
    fwd_mma_load_w<T>(Ws + buf * T::W16_STAGE, wp, step, a.Mp, m0, tid);
    cp_async_commit();
  };
  auto compute = [&](auto half, int buf) {  // half: taps [0, KK/2) or the rest
    constexpr int kMid = (T::KK + 1) / 2, kHalf = decltype(half)::value;
    fwd_mma_taps<T, P, IMGS, kHalf ? kMid : 0, kHalf ? T::KK : kMid>(
        acc, Xs + buf * XSTAGE, Ws + buf * T::W16_STAGE, a_lane, b_lane, boff, rsx);
  };

  if (st0 >= st1) return;
  load_w(0, st0);
  for (int hh = 0; hh < 2; ++hh) {
    load_x(st0 * CS, hh);
    store_x(0, hh);
  }
  cp_async_wait<0>();
  __syncthreads();
  for (int st = st0; st < st1; ++st) {
    const int buf = (st - st0) & 1;
    const bool more = st + 1 < st1;
    if (more) {
      load_w(buf ^ 1, st + 1);
      load_x((st + 1) * CS, 0);
    }
    compute(std::integral_constant<int, 0>{}, buf);
    if (more) {
      store_x(buf ^ 1, 0);
      load_x((st + 1) * CS, 1);
    }
    compute(std::integral_constant<int, 1>{}, buf);
    if (more) store_x(buf ^ 1, 1);
    cp_async_wait<0>();
    __syncthreads();
  }
}

// BF16 forward-kind steps from a channel-minor copy of the input (a.x: [image][c / 16][h][w][16],
// conv2d_direct_channel_minor): acc += the block's products over all a.c / 16 steps, the halo
// tile of the window's first pixel (iy0, ix0) and the weights both by cp.async (kit::HaloCm16,
// fwd_mma_load_w), S stages in flight: a step waits on the oldest stage only, and x holds no
// staging registers (fwd_mma_steps stages x through registers, two stages: each step waited on
// a round trip). Fwd128 on D.conv2 (ncu, H200): ~430 -> 261 instructions a warp a step for its
// 64 mma, the file's header. xim: the block's image; wp: its phase's weights.
template <class T, int S>
__device__ __forceinline__ void fwd_bf16_steps_cm(const FwdArgsOf<bf16>& a, float* acc,
                                                  uint16_t* sm, const bf16* xim, int iy0, int ix0,
                                                  int m0, const bf16* wp, int tid, int lane,
                                                  int wm, int wn) {
  static_assert(S >= 2, "cp.async stages");
  using Halo = HaloCm16<T::XWB, T::XB, T::XP16, T::THREADS>;
  uint16_t* Xs = sm;                        // S x [XB][XP16]
  uint16_t* Ws = sm + S * T::X16_STAGE;     // S x [KK * BM][16]
  const int steps = (a.c + 15) / 16, group = a.h * a.w * 16;
  const int a_lane = fwd_mma_a_lane<T>(wm, lane), b_lane = fwd_mma_b_lane<T>(wn, lane, 0);
  auto load = [&](int buf, int step) {
    fwd_mma_load_w<T>(Ws + buf * T::W16_STAGE, wp, step, a.Mp, m0, tid);
    Halo::load(Xs + buf * T::X16_STAGE, xim + static_cast<int64_t>(step) * group, a.h, a.w, iy0,
               ix0, tid);
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (s < steps) load(s, s);
    cp_async_commit();
  }
  for (int st = 0; st < steps; ++st) {
    cp_async_wait<S - 2>();  // step st's stage has landed (this thread's part) ...
    __syncthreads();         // ... everyone's, and stage (st - 1) % S is free again
    if (st + S - 1 < steps) load((st + S - 1) % S, st + S - 1);
    cp_async_commit();
    const int buf = st % S;
    fwd_mma_taps<T, BF16, false, 0, T::KK>(acc, Xs + buf * T::X16_STAGE,
                                            Ws + buf * T::W16_STAGE, a_lane, b_lane, nullptr, 0);
  }
  cp_async_wait<0>();
}

// The tensor-core forward epilogue where y's rows are aligned pixel pairs (FwdArgsOf::y_pairs):
// an accumulator's two values of a row (pixels 2t, 2t + 1 of channel m: 8 pixels of a row are
// one m16n8 tile, so both lie in the patch's row, and with an even width both in y or neither)
// written as one store at the lane's base plus the tile's row and column (bf16x2, 4 bytes; a
// float32 y: float2, 8 bytes). The values are those of `put` in direct_fwd, rounded alike
// (bf16: cvt.rn.bf16x2 is two cvt.rn.bf16); the
// activations are compile-time (A: act, M: mact; at most one of them not None, y_pairs says)
// and kEdge masks the stores of a warp whose tile reaches past k, oh or ow: interior warps
// check nothing (measured in SASS: 133 instructions an output pair with the general `put`,
// per element, against about 8 here). mw: the warp's first output channel, pn0 its first pixel.
// kPhase (the 4x4 stride-2 backward-data's phase (pr, pq), FwdArgsOf::phases): the pair's
// outputs (u, 2t) and (u, 2t + 1) of the phase are y's pixels (2u + pr, 4t + pq) and (2u + pr,
// 4t + 2 + pq), two 2-byte stores (and two msrc loads), an odd ow masking the second: ncu on
// D.conv2's backward-data (f6207d1) counted 856 instructions a warp a 16-channel step with the
// general put, most of them the epilogue's, and instruction-fetch stalls.
template <class T, bool kEdge, FusedAct A, FusedAct M, bool kPhase = false, class E>
__device__ __forceinline__ void fwd_mma_put_pairs(const FwdArgsOf<E>& a, const float* acc,
                                                  E* yim, int mw, int oy0, int ox0, int pn0,
                                                  int gq, int tq, int pr = 0, int pq = 0) {
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  static_assert(kBf16 || !kPhase, "phases: the 4x4 stride-2 layers, bf16");
  constexpr int TW = T::TW, NI = T::NI;
  const Act act{A, a.act.slope}, mact{M, a.mact.slope};
  const int yw = kPhase ? a.dw : a.ow, yhw = kPhase ? a.dh * a.dw : a.oh * a.ow;
  const int ox = ox0 + 2 * tq, oyw = oy0 + pn0 / TW;
  const E* msrc = M != FusedAct::None ? a.msrc + (yim - a.y) : nullptr;
#pragma unroll
  for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows gq and gq + 8 of the m16 tile: c0, c1 and c2, c3
      const int m = mw + mi * 16 + h * 8 + gq;
      if (kEdge && m >= a.k) continue;
      const float b = bias_of(a.bias, m);
      const int base = kPhase ? m * yhw + (2 * oyw + pr) * yw + 2 * ox + pq : m * yhw + oyw * yw + ox;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int r = ni * 8 / TW, col = ni * 8 % TW;
        if (kEdge && (oyw + r >= a.oh || ox + col >= a.ow)) continue;
        const float* c = acc + (mi * NI + ni) * 4 + 2 * h;
        float v0 = act_apply(c[0] + b, act), v1 = act_apply(c[1] + b, act);
        if constexpr (kPhase) {
          const int o = base + 2 * (r * yw + col);
          const bool second = !kEdge || ox + col + 1 < a.ow;
          if (M != FusedAct::None) {
            v0 = act_grad(ldg_f32(msrc + o), v0, mact);
            if (second) v1 = act_grad(ldg_f32(msrc + o + 2), v1, mact);
          }
          yim[o] = from_f32<E>(v0);
          if (second) yim[o + 2] = from_f32<E>(v1);
        } else if constexpr (kBf16) {
          const int o = base + r * yw + col;
          if (M != FusedAct::None) {
            const uint32_t s = ldg_bits32(msrc + o);
            v0 = act_grad(bf16_float(s & 0xffffu), v0, mact);
            v1 = act_grad(bf16_float(s >> 16), v1, mact);
          }
          *reinterpret_cast<uint32_t*>(yim + o) = bf16x2_bits(v0, v1);
        } else {
          const int o = base + r * yw + col;
          if (M != FusedAct::None) {
            const float2 s = __ldg(reinterpret_cast<const float2*>(msrc + o));
            v0 = act_grad(s.x, v0, mact);
            v1 = act_grad(s.y, v1, mact);
          }
          *reinterpret_cast<float2*>(yim + o) = make_float2(v0, v1);
        }
      }
    }
}
// fwd_mma_put_pairs with the run's activations.
template <class T, bool kEdge, bool kPhase = false, class E>
__device__ __forceinline__ void fwd_mma_put_pairs_of(const FwdArgsOf<E>& a, const float* acc,
                                                     E* yim, int mw, int oy0, int ox0, int pn0,
                                                     int gq, int tq, int pr = 0, int pq = 0) {
  constexpr FusedAct N = FusedAct::None, R = FusedAct::ReLU, L = FusedAct::LeakyReLU;
  if (a.mact.kind == R)
    fwd_mma_put_pairs<T, kEdge, N, R, kPhase>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
  else if (a.mact.kind == L)
    fwd_mma_put_pairs<T, kEdge, N, L, kPhase>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
  else if (a.act.kind == R)
    fwd_mma_put_pairs<T, kEdge, R, N, kPhase>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
  else if (a.act.kind == L)
    fwd_mma_put_pairs<T, kEdge, L, N, kPhase>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
  else
    fwd_mma_put_pairs<T, kEdge, N, N, kPhase>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
}

// A forward-kind block's place (one image a block): blockIdx.x its image and patch of TH x TW
// outputs (first (oy0, ox0)), blockIdx.y its BM output channels, blockIdx.z its phase (pr, pq)
// with a.phases; (iy0, ix0) the input window's first pixel.
struct FwdPlace {
  int img, oy0, ox0, m0, pr, pq, iy0, ix0;
};
template <class T, class E>
__device__ __forceinline__ FwdPlace fwd_place(const FwdArgsOf<E>& a) {
  FwdPlace b;
  b.img = blockIdx.x / (a.tiles_x * a.tiles_y);
  const int trest = blockIdx.x - b.img * a.tiles_x * a.tiles_y;
  b.oy0 = (trest / a.tiles_x) * T::TH;
  b.ox0 = (trest % a.tiles_x) * T::TW;
  b.m0 = blockIdx.y * T::BM;
  b.pr = blockIdx.z >> 1;
  b.pq = blockIdx.z & 1;
  b.iy0 = a.phases ? direct::phase_window_start(b.oy0, b.pr) : b.oy0 - a.pad;
  b.ix0 = a.phases ? direct::phase_window_start(b.ox0, b.pq) : b.ox0 - a.pad;
  return b;
}

// A forward-kind block's output channel m at pixel p of its patch (first pixel (oy0, ox0)):
// bias, activation and act'(msrc) applied, written to y (phases: output (u, v) is y's (2u + pr,
// 2v + pq)), rounded once (bf16); nothing outside y.
template <class T, class E>
__device__ __forceinline__ void fwd_put(const FwdArgsOf<E>& a, E* yim, int oy0, int ox0, int pr,
                                        int pq, int m, int p, float v) {
  int oy = oy0 + p / T::TW, ox = ox0 + p % T::TW;
  if (m >= a.k || oy >= a.oh || ox >= a.ow) return;
  int ow = a.ow, oh = a.oh;
  if (a.phases) {
    oy = 2 * oy + pr;
    ox = 2 * ox + pq;
    oh = a.dh;
    ow = a.dw;
  }
  const int64_t o = (static_cast<int64_t>(m) * oh + oy) * ow + ox;
  v = act_apply(v + bias_of(a.bias, m), a.act);
  if (a.mact.kind != FusedAct::None) v = act_grad(ldg_f32(a.msrc + (yim - a.y) + o), v, a.mact);
  yim[o] = from_f32<E>(v);  // bf16: rounded once, here
}

// The epilogue of a tensor-core forward-kind block of image img: output pairs where y's rows
// allow or by phases (fwd_mma_put_pairs), else fwd_put an accumulator at a time.
template <class T, class E>
__device__ __forceinline__ void fwd_mma_epilogue(const FwdArgsOf<E>& a, const float* acc,
                                                 int img, int oy0, int ox0, int m0, int pr,
                                                 int pq, int wm, int wn, int gq, int tq) {
  E* yim = a.y + static_cast<int64_t>(img) * a.y_img;
  const int mw = m0 + wm * (T::BM / T::WM), pn0 = wn * (T::BN / T::WN);
  if (a.y_pairs || a.phases) {
    const bool edge = mw + T::BM / T::WM > a.k || oy0 + (pn0 + T::BN / T::WN) / T::TW > a.oh ||
                      ox0 + T::TW > a.ow;
    if constexpr (std::is_same<E, bf16>::value) {  // (phases: bf16 only)
      if (a.phases && edge) {
        fwd_mma_put_pairs_of<T, true, true>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
        return;
      }
      if (a.phases) {
        fwd_mma_put_pairs_of<T, false, true>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq, pr, pq);
        return;
      }
    }
    if (edge)
      fwd_mma_put_pairs_of<T, true>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq);
    else
      fwd_mma_put_pairs_of<T, false>(a, acc, yim, mw, oy0, ox0, pn0, gq, tq);
    return;
  }
  mma_tiles_for_each<T::MI, T::NI>(acc, mw, pn0, gq, tq, [&](int m, int p, float v) {
    fwd_put<T>(a, yim, oy0, ox0, pr, pq, m, p, v);
  });
}

// The forward kind of pass (forward; backward-data of dy with the rotated kernels), one image a
// block: on the tensor cores (P: TF32, BF16) by fwd_mma_steps and fwd_mma_epilogue; fp32 on the
// FMA units by the float tiles below.
template <class T, class P>
__global__ void __launch_bounds__(T::THREADS, T::template min_blocks<P>())
    direct_fwd(const FwdArgsOf<typename P::Data> a) {
  using E = typename P::Data;
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const FwdPlace b = fwd_place<T>(a);
  const int img = b.img, oy0 = b.oy0, ox0 = b.ox0, m0 = b.m0, pr = b.pr, pq = b.pq;
  const int iy0 = b.iy0, ix0 = b.ix0;
  const int hw = a.h * a.w;
  const E* xim = a.x + static_cast<int64_t>(img) * a.c * hw;
  if constexpr (P::kMma) {
    const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
    float acc[T::MI * T::NI * 4];
#pragma unroll
    for (int i = 0; i < T::MI * T::NI * 4; ++i) acc[i] = 0.f;
    constexpr int CS = direct::row_channels(sizeof(E));
    fwd_mma_steps<T, P>(a, acc, reinterpret_cast<uint16_t*>(smem), xim, iy0, ix0, m0, 0,
                        (a.c + CS - 1) / CS, a.wp + blockIdx.z * a.w_phase, tid, lane, wm, wn);
    fwd_mma_epilogue<T>(a, acc, img, oy0, ox0, m0, pr, pq, wm, wn, gq, tq);
  } else {
    // fp32: thread (ty, tx) computes 8 channels x 8 pixels (the file's comment).
    constexpr int BM = T::BM, TW = T::TW, CK = T::CK, XW = T::XW, XR = T::XR;
    constexpr int CS = T::CS, SA = T::SA, STAGES = T::STAGES, THREADS = T::THREADS;
    float* Xs = smem;                           // STAGES x [CK][CS]
    float* Ws = smem + STAGES * T::X_STAGE;     // STAGES x [KK][CK][SA]
    const int steps = (a.c + CK - 1) / CK;
    auto load = [&](int s, int ci0) {
      load_halo_tile<CK, XR, XW, CS, THREADS, true>(Xs + s * T::X_STAGE, xim, a.x, ci0, a.c, a.h,
                                                    a.w, iy0, ix0, tid);
      float* ws = Ws + s * T::W_STAGE;
      for (int e = tid; e < 9 * CK * (BM / 4); e += THREADS) {
        const int m4 = e % (BM / 4), ct = e / (BM / 4);  // ct = ci * 9 + tap
        const int ci = ct / 9, tap = ct - ci * 9;
        const bool ok = ci0 + ci < a.c;
        cp_async16(ws + (tap * CK + ci) * SA + m4 * 4,
                   ok ? a.wp + (static_cast<int64_t>(ci0 + ci) * 9 + tap) * a.Mp + m0 + m4 * 4 : a.wp,
                   ok);
      }
    };
    const int ty = tid / (T::BN / 8), tx = tid % (T::BN / 8);
    const int py = tx / (TW / 8), px0 = (tx % (TW / 8)) * 8;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f;
    auto compute = [&](int s) {
      const float* xs = Xs + s * T::X_STAGE;
      const float* ws = Ws + s * T::W_STAGE;
#pragma unroll 1
      for (int ci = 0; ci < CK; ++ci)
#pragma unroll
        for (int r = 0; r < 3; ++r) {
          float xv[10];
#pragma unroll
          for (int j = 0; j < 10; ++j) xv[j] = xs[ci * CS + (py + r) * XW + px0 + j];
#pragma unroll
          for (int q = 0; q < 3; ++q) {
            const float* wr = ws + ((r * 3 + q) * CK + ci) * SA;
            float av[8];
            *reinterpret_cast<float4*>(av) = *reinterpret_cast<const float4*>(wr + ty * 4);
            *reinterpret_cast<float4*>(av + 4) = *reinterpret_cast<const float4*>(wr + BM / 2 + ty * 4);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
              for (int j = 0; j < 8; ++j) acc[i * 8 + j] = fmaf(av[i], xv[j + q], acc[i * 8 + j]);
          }
        }
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < steps) load(s, s * CK);
      cp_async_commit();
    }
    for (int st = 0; st < steps; ++st) {
      const int s = st % STAGES;
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      if (st + STAGES - 1 < steps) load((st + STAGES - 1) % STAGES, (st + STAGES - 1) * CK);
      cp_async_commit();
      compute(s);
    }
    cp_async_wait<0>();
    E* yim = a.y + static_cast<int64_t>(img) * a.y_img;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int m = m0 + (i / 4) * (BM / 2) + ty * 4 + i % 4;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        fwd_put<T>(a, yim, oy0, ox0, pr, pq, m, py * TW + px0 + j, acc[i * 8 + j]);
    }
  }
}

// BF16 forward-kind pass of the 2x2 kernels (4x4 stride-2 layers) from a channel-minor copy of
// its input (a.x: [n][a.c / 16][a.h][a.w][16], conv2d_direct_channel_minor): direct_fwd's block
// (BM output channels x a TH x TW patch of one image; blockIdx.z the phase with a.phases), its
// steps by fwd_bf16_steps_cm (T::CM_STAGES stages of cp.async), its epilogue
// (fwd_mma_epilogue). Floor: the pass's FLOPs at mma.sync's rate, or x's copy and y once.
template <class T>
__global__ void __launch_bounds__(T::THREADS, T::template min_blocks<BF16>())
    direct_fwd_cm(const FwdArgsOf<bf16> a) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
  const FwdPlace b = fwd_place<T>(a);
  const bf16* xim = a.x + static_cast<int64_t>(b.img) * ((a.c + 15) / 16) * a.h * a.w * 16;
  float acc[T::MI * T::NI * 4];
#pragma unroll
  for (int i = 0; i < T::MI * T::NI * 4; ++i) acc[i] = 0.f;
  fwd_bf16_steps_cm<T, T::CM_STAGES>(a, acc, reinterpret_cast<uint16_t*>(smem), xim, b.iy0, b.ix0,
                                     b.m0, a.wp + blockIdx.z * a.w_phase, tid, lane, wm, wn);
  fwd_mma_epilogue<T>(a, acc, b.img, b.oy0, b.ox0, b.m0, b.pr, b.pq, wm, wn, gq, tq);
}

// BF16 forward-kind pass with several images a block (FwdArgsOf::imgs; the 2x2 kernels of the
// 4x4 stride-2 layers at small outputs): block = BM output channels x the outputs of a.imgs
// images (blockIdx.x: the group of images; blockIdx.y: the channels; blockIdx.z: split x phase),
// the reduction over its split's 16-channel steps; its raw sums to a.part (fwd_imgs_finish_k
// adds the splits in order and writes y).
template <class T>
__global__ void __launch_bounds__(T::THREADS, T::template min_blocks<BF16>())
    direct_fwd_imgs(const FwdArgsOf<bf16> a) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
  const int img0 = blockIdx.x * a.imgs, m0 = blockIdx.y * T::BM;
  const int ph = a.phases ? 4 : 1, z = blockIdx.z % ph, split = blockIdx.z / ph;
  const int iy0 = a.phases ? direct::phase_window_start(0, z >> 1) : -a.pad;
  const int ix0 = a.phases ? direct::phase_window_start(0, z & 1) : -a.pad;
  const int st0 = split * a.per_split, st1 = min((a.c + 15) / 16, st0 + a.per_split);
  float acc[T::MI * T::NI * 4];
#pragma unroll
  for (int i = 0; i < T::MI * T::NI * 4; ++i) acc[i] = 0.f;
  fwd_mma_steps<T, BF16, true>(a, acc, reinterpret_cast<uint16_t*>(smem),
                          a.x + static_cast<int64_t>(img0) * a.c * a.h * a.w, iy0, ix0, m0, st0,
                          st1, a.wp + z * a.w_phase, tid, lane, wm, wn, a.n - img0);
  // this lane's outputs n = pn0 + ni * 8 + 2 tq (+ 1): their image's place in part, -1 past the
  // patch's images or the batch
  const int hw = a.oh * a.ow, pn0 = wn * (T::BN / T::WN), mw = m0 + wm * (T::BM / T::WM);
  const int64_t khw = static_cast<int64_t>(a.k) * hw;
  float* part = a.part + static_cast<int64_t>(split * ph + z) * a.n * khw;
  int64_t off[T::NI][2];
#pragma unroll
  for (int ni = 0; ni < T::NI; ++ni)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = pn0 + ni * 8 + 2 * tq + e, i = n / hw;
      off[ni][e] = n < a.imgs * hw && img0 + i < a.n ? (img0 + i) * khw + n - i * hw : -1;
    }
#pragma unroll
  for (int mi = 0; mi < T::MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows gq and gq + 8 of the m16 tile: c0, c1 and c2, c3
      const int m = mw + mi * 16 + h * 8 + gq;
      if (m >= a.k) continue;
#pragma unroll
      for (int ni = 0; ni < T::NI; ++ni)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (off[ni][e] >= 0)
            part[off[ni][e] + static_cast<int64_t>(m) * hw] =
                acc[(mi * T::NI + ni) * 4 + 2 * h + e];
    }
}

// y from direct_fwd_imgs's split sums, added in split order: the epilogue of direct_fwd's
// `put` (bias, activation, act'(msrc); phases: output (u, v) is y's (2u + pr, 2v + pq)),
// rounded once. total = phases x n x k x oh x ow, an element a thread; I: the index type, int
// where twice total fits (64-bit divisions cost more than the sums' loads: 11-20 us a call at W5's
// sizes on an H200 against ~6 us of traffic).
template <class I>
__global__ void fwd_imgs_finish_k(const FwdArgsOf<bf16> a, int splits) {
  const int ph = a.phases ? 4 : 1, hw = a.oh * a.ow;
  const I total = static_cast<I>(ph) * a.n * a.k * hw;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<I>(gridDim.x) * blockDim.x) {
    const I row = e / hw;  // phase * n * k + image * k + m
    const int p = static_cast<int>(e - row * hw);
    const I zi = row / a.k;  // phase * n + image
    const int m = static_cast<int>(row - zi * a.k);
    const int z = static_cast<int>(zi / a.n), img = static_cast<int>(zi - static_cast<I>(z) * a.n);
    float v = 0.f;
#pragma unroll 4
    for (int s = 0; s < splits; ++s) v += a.part[static_cast<int64_t>(s) * total + e];
    int64_t o = (static_cast<int64_t>(img) * a.k + m) * hw + p;
    if (a.phases) {
      const int oy = p / a.ow, ox = p - oy * a.ow;
      o = img * a.y_img + (static_cast<int64_t>(m) * a.dh + 2 * oy + (z >> 1)) * a.dw + 2 * ox +
          (z & 1);
    }
    v = act_apply(v + bias_of(a.bias, m), a.act);
    if (a.mact.kind != FusedAct::None) v = act_grad(ldg_f32(a.msrc + o), v, a.mact);
    a.y[o] = from_f32<bf16>(v);
  }
}

// ---- backward-weights ---------------------------------------------------------------------
// KS: the kernel's side (3; 2 for the 4x4 stride-2 kernel's phases, BF16 only), KK its taps.
template <int BM_, int BC_, int TH_, int TW_, int WM_, int WN_, int STAGES_, int KS_ = 3>
struct BwwCfg {
  static constexpr int BM = BM_, BC = BC_, TH = TH_, TW = TW_, P = TH * TW, STAGES = STAGES_;
  static constexpr int KS = KS_, KK = KS * KS;
  static constexpr int THREADS = (BM / 8) * BC;  // FMA: 8 output channels x 1 input channel
  // BF16: 12 warps an SM at 128 threads (168 registers a thread; shared memory would allow
  // four blocks), 16 at 256 (128 registers). TF32: two blocks, 16 warps at 256 (two stages
  // without y are 114 KB with CS_T unpadded: 125 registers, no spills); with y one fits
  // (181 KB). FMA: one at 256.
  template <class Prec>
  static constexpr int min_blocks() {
    if (Prec::kK == 16) return THREADS >= 256 ? 2 : 3;
    if (Prec::kMma) return 2;
    return THREADS >= 256 ? 1 : 2;
  }
  static constexpr int WM = WM_, WN = WN_;       // TF32: a warp 32 output x 8 input channels
  static constexpr int XW = TW + KS - 1, XR = TH + KS - 1;
  // g rows: 4 mod 32 banks (TF32 A reads: 8 rows g x 4 pixels t); input channel stride: odd
  // for the FMA path (a warp reads 32 channels at one place), 4 mod 8 for the TF32 B reads
  // (8 channels g x 4 pixels t: g CS = 4 g (odd) mod 32 puts the 8 channels on 8 different
  // groups of 4 banks), the patch itself where it is (180 floats at 8 x 16), not padded
  static constexpr int SG = P + 4;
  static constexpr int CS_F = round_up_c(XR * XW, 32) + 1, CS_T = round_up_c(XR * XW + 4, 8) - 4;
  static_assert(CS_T >= XR * XW && CS_T % 8 == 4, "TF32 B reads: channel stride 4 mod 8");
  static_assert(WM * 32 == BM && WN * 8 == BC && WM * WN * 32 == THREADS, "warps cover the block");
  static_assert(TW % 8 == 0 && BC <= 32, "tile shape");
  // BF16 (two stages, register-staged; a 16-deep step is one row of the patch): g rows of P
  // pixels padded by 8 (272 bytes: ldmatrix's 8 rows on 8 bank groups); the input patch with
  // its halo pixel-major, [halo pixel][BC channels], read from an even column (XWB wide), a
  // pixel's channels padded by 8 (80 bytes: 5 bank groups, so any 8 consecutive pixels fall on
  // 8 different groups).
  static constexpr int XWB = TW + round_up_c(KS, 2), XB = XR * XWB, GS16 = P + 8, XP16 = BC + 8;
  static constexpr int G16_STAGE = BM * GS16, X16_STAGE = XB * XP16;  // bf16 elements
  static_assert(TW == 16, "BF16: a 16-deep step is one row of the patch");
  // Several images a stage (IMGS): the halos of the patch's images, CAP pixels at most (two
  // stages fit min_blocks blocks an SM: 104 KB at 256 threads, 74.5 KB at 128), RJI pixel pairs a
  // thread.
  static constexpr int CAP = THREADS >= 256 ? 448 : 368, XI16_STAGE = CAP * XP16;
  static constexpr int RJI = (CAP / 2 + THREADS / 4 - 1) / (THREADS / 4);
  template <class Prec>
  static size_t smem_bytes(bool mask, bool imgs = false) {
    if (Prec::kK == 16)
      return 2 * 2 * static_cast<size_t>(G16_STAGE + (imgs ? XI16_STAGE : X16_STAGE));
    return sizeof(float) * STAGES * (BM * SG * (mask ? 2 : 1) + BC * (Prec::kMma ? CS_T : CS_F));
  }
};
template <int KS>
using Bww64K = BwwCfg<64, 32, 8, 16, 2, 4, 2, KS>;  // 256 threads (TF32, two stages: 181 KB with y)
template <int KS>
using Bww32K = BwwCfg<32, 32, 8, 16, 1, 4, 3, KS>;  // 128 threads

template <class E>
struct BwwArgsOf {
  int n, c, h, w, k, oh, ow, pad, tiles_x, tiles_y, tiles, per_split;
  int x_pairs, g_pairs;  // BF16: x's (dy's and y's) pixel pairs are 4-byte aligned
  int g_octets;          // BF16: dy's (and y's) rows are whole 16-byte groups of 8 pixels
  const E* x;
  const E* dy;
  const E* y;       // with a fused activation
  float* part;      // (splits, k, c*KK), each split in w's layout (w_index)
  float* bias_part; // (splits, k) or null
  Act act;
  int s2d;          // x is a 4x4 stride-2 convolution's space-to-depth input (c = 4 w's channels)
  // Several images a stage (IMGS; imgs > 0): patch t = the outputs of images t imgs ...
  // t imgs + imgs - 1, pixel p of the patch image p / (oh ow)'s pixel p % (oh ow), their halos
  // side by side (hal); tiles = the groups of images.
  int imgs;
  ImgHalo hal;
};

// BF16 backward-weights: acc += the block's products over its split's patches, bias_sum (thread
// tid < BM) += the sums of its row of g (the file's comment). IMGS: a patch is the outputs of
// a.imgs images (BwwArgsOf::imgs), each lane's B pixel gathered by address.
template <class T, bool MASK, bool IMGS = false>
__device__ __forceinline__ void bww_bf16_steps(const BwwArgsOf<bf16>& a, float* acc, float& bias_sum,
                                               bool want_bias, uint16_t* sm, int c0, int m0,
                                               int t_begin, int steps, int tid, int lane, int wm,
                                               int wn) {
  constexpr int BM = T::BM, BC = T::BC, TH = T::TH, TW = T::TW, P = T::P, KS = T::KS;
  constexpr int XWB = T::XWB, XP = T::XP16, GS = T::GS16, THREADS = T::THREADS;
  // g's units, a (row m, pixel pair) each: thread t loads pixel pair t % PP of rows t / PP +
  // i MS, so that its pixel is the same for the whole stage and a unit's place in dy (y) and in
  // shared memory is the first unit's plus i times a row step (32-bit offsets, no division a
  // unit).
  constexpr int PP = P / 2, MS = THREADS / PP, RG = BM / MS, GH = RG / 2;
  static_assert(THREADS % PP == 0 && BM % MS == 0 && RG % 2 == 0, "g units: rows, two halves");
  static_assert(BC % 16 == 0 && (KS == 2 || KS == 3), "x: halves of whole groups of 8 channels");
  // x's units (kit::HaloPairsBf16, kit::HaloImagesBf16): half the channels a half, in groups of 8.
  using Halo = std::conditional_t<IMGS, HaloImagesBf16<XP, THREADS, BC / 16, T::RJI>,
                                  HaloPairsBf16<XWB, T::XB, XP, THREADS, BC / 16>>;
  static_assert(!IMGS || KS == 2, "several images a stage: the 2x2 kernels");
  constexpr int XSTAGE = IMGS ? T::XI16_STAGE : T::X16_STAGE;
  uint16_t* Gs = sm;                        // 2 x [BM][GS]
  uint16_t* Xs = sm + 2 * T::G16_STAGE;     // 2 x [XB (CAP)][XP]
  const int64_t ohw = static_cast<int64_t>(a.oh) * a.ow;
  // a unit's row step in dy: unsigned, so that the offsets of units past k (never read) wrap
  // harmlessly; those read are below k ohw < INT_MAX (check_geom)
  const unsigned gstep = static_cast<unsigned>(MS * ohw);
  const int shift = a.pad & 1;  // ix0 = ox0 - pad, ox0 even: the halo's columns from ix0 - shift
  const bool xp = a.x_pairs != 0, gp = a.g_pairs != 0, go = a.g_octets != 0;
  // Where dy's (and y's) rows are whole aligned octets, g's units are (row m, pixel octet): one
  // 16-byte load and store each, 4 times fewer than pairs; thread t's octet t % PO, rows
  // t / PO + i MO.
  constexpr int PO = P / 8, MO = THREADS / PO, NO = GH / 4;  // NO: octets a half
  static_assert(THREADS % PO == 0 && GH % 4 == 0 && NO * MO * 2 == BM, "g octets: rows, halves");
  // The next stage's loads in two halves, each in flight while the block computes half of the
  // rows of the patch (half the staging registers).
  uint32_t rg[GH], ry[MASK ? GH : 1];
  Halo rx;
  int ui0 = 0, ur0 = 0, uc0 = 0;  // IMGS: the thread's first unit of the halos
  if constexpr (IMGS) {
    const int per_img = a.hal.hr * a.hal.hwp, pp0 = tid >> 2;
    ui0 = pp0 / per_img;
    ur0 = (pp0 - ui0 * per_img) / a.hal.hwp;
    uc0 = pp0 - ui0 * per_img - ur0 * a.hal.hwp;
  }
  // g's unit in shared memory, from (row, first pixel) in the patch
  auto g_at = [&](int buf, int m, int p) { return Gs + buf * T::G16_STAGE + m * GS + p; };

  auto load = [&](int t, int half) {  // half of patch t into rg, ry, rx
    const int tt = fresh(tid);
    // the thread's first unit: row m, first pixel p of the patch
    const int m = go ? tt / PO + half * NO * MO : tt / PP + half * GH * MS;
    const int p = go ? 8 * (tt % PO) : 2 * (tt % PP);
    int64_t g0, g1;  // the unit's first and second pixel in dy
    bool ok0, ok1;   // ... in dy (IMGS: pairs and octets lie in one image where g_pairs, g_octets)
    int img, oy0 = 0, ox0 = 0;
    if constexpr (IMGS) {
      img = t * a.imgs;
      const int hw = a.oh * a.ow, i0 = p / hw, i1 = (p + 1) / hw;
      ok0 = p < a.imgs * hw && img + i0 < a.n;
      ok1 = p + 1 < a.imgs * hw && img + i1 < a.n;
      g0 = (static_cast<int64_t>(img + i0) * a.k + m0 + m) * ohw + p - i0 * hw;
      g1 = (static_cast<int64_t>(img + i1) * a.k + m0 + m) * ohw + p + 1 - i1 * hw;
    } else {
      img = t / (a.tiles_x * a.tiles_y);
      const int trest = t - img * a.tiles_x * a.tiles_y;
      oy0 = (trest / a.tiles_x) * TH, ox0 = (trest % a.tiles_x) * TW;
      const int oy = oy0 + p / TW, ox = ox0 + p % TW;
      g0 = (static_cast<int64_t>(img) * a.k + m0 + m) * ohw + static_cast<int64_t>(oy) * a.ow + ox;
      g1 = g0 + 1;
      ok0 = oy < a.oh && ox < a.ow;
      ok1 = oy < a.oh && ox + 1 < a.ow;
    }
    const bf16* pd = a.dy + g0;
    const bf16* pyv = MASK ? a.y + g0 : nullptr;
    const bf16* pd1 = a.dy + g1;
    const bf16* pyv1 = MASK ? a.y + g1 : nullptr;
    const int mleft = a.k - m0 - m;  // units i with i MS (MO) < mleft are rows of dy
    if (go) {  // ow a multiple of 8, ox too: the 8 pixels in the image or none
      const bool ok = ok0;
      const unsigned ostep = static_cast<unsigned>(MO * ohw);  // wraps as gstep
#pragma unroll
      for (int i = 0; i < NO; ++i) {
        const bool oki = ok && i * MO < mleft;
        const unsigned o = i * ostep;
        const uint4 z{0u, 0u, 0u, 0u}, d = oki ? ldg_bits128(pd + o) : z;
        rg[4 * i] = d.x, rg[4 * i + 1] = d.y, rg[4 * i + 2] = d.z, rg[4 * i + 3] = d.w;
        if (MASK) {
          const uint4 v = oki ? ldg_bits128(pyv + o) : z;
          ry[4 * i] = v.x, ry[4 * i + 1] = v.y, ry[4 * i + 2] = v.z, ry[4 * i + 3] = v.w;
        }
      }
    } else if (gp) {  // ow even: both pixels in the image or neither
      const bool ok = ok0;
#pragma unroll
      for (int i = 0; i < GH; ++i) {
        const bool oki = ok && i * MS < mleft;
        const unsigned o = i * gstep;
        rg[i] = oki ? ldg_bits32(pd + o) : 0u;
        if (MASK) ry[i] = oki ? ldg_bits32(pyv + o) : 0u;
      }
    } else {
#pragma unroll
      for (int i = 0; i < GH; ++i) {
        const bool in_k = i * MS < mleft, oki0 = ok0 && in_k, oki1 = ok1 && in_k;
        const unsigned o = i * gstep;
        rg[i] = (oki0 ? ldg_bits16(pd + o) : 0u) | (oki1 ? ldg_bits16(pd1 + o) : 0u) << 16;
        if (MASK)
          ry[i] = (oki0 ? ldg_bits16(pyv + o) : 0u) | (oki1 ? ldg_bits16(pyv1 + o) : 0u) << 16;
      }
    }
    if constexpr (IMGS)
      rx.load(a.x + static_cast<int64_t>(img) * a.c * (a.h * a.w),
              static_cast<int64_t>(a.c) * (a.h * a.w), a.n - img, a.c, a.h, a.w,
              c0 + half * (BC / 2), -a.pad, -a.pad - shift, xp, a.hal, ui0, ur0, uc0, tt);
    else
      rx.load(a.x + static_cast<int64_t>(img) * a.c * (a.h * a.w), a.c, a.h, a.w,
              c0 + half * (BC / 2), oy0 - a.pad, ox0 - a.pad - shift, xp, tt);
  };
  auto store = [&](int buf, int half) {
    const int tt = fresh(tid);
    uint32_t v[GH];
#pragma unroll
    for (int i = 0; i < GH; ++i) {
      v[i] = rg[i];
      if (MASK)  // act'(y) dy, rounded to bf16 (the operand)
        v[i] = bf16x2_bits(act_grad(bf16_float(ry[i] & 0xffffu), bf16_float(v[i] & 0xffffu), a.act),
                           act_grad(bf16_float(ry[i] >> 16), bf16_float(v[i] >> 16), a.act));
    }
    if (go) {
      uint16_t* gs = g_at(buf, tt / PO + half * NO * MO, 8 * (tt % PO));
#pragma unroll
      for (int i = 0; i < NO; ++i)
        *reinterpret_cast<uint4*>(gs + i * MO * GS) =
            uint4{v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]};
    } else {
      uint16_t* gs = g_at(buf, tt / PP + half * GH * MS, 2 * (tt % PP));
#pragma unroll
      for (int i = 0; i < GH; ++i) *reinterpret_cast<uint32_t*>(gs + i * MS * GS) = v[i];
    }
    rx.store(Xs + buf * XSTAGE + half * (BC / 2), tt);
  };
  // Fragment addresses: this lane's base plus compile-time offsets (row of the patch, tile, tap).
  // A: matrices (m 0-7, pixels 0-7), (m 8-15, 0-7), (m 0-7, 8-15), (m 8-15, 8-15);
  // B (ldmatrix.trans: the tile's rows are pixels, k): matrices (pixels 0-7, the warp's 8
  // channels), (pixels 8-15) of a halo row at column shift q = 0, then the same at q = 1 (lanes
  // 16-31; x2 at two columns on: q = 2).
  const int a_lane = (wm * 32 + (lane & 15)) * GS + (lane >> 4) * 8;
  const int b_lane = ((lane & 15) + (lane >> 4) + shift) * XP + wn * 8;
  // IMGS: lane l's B pixel of 16-pixel step s (pixel s 16 + l % 16 of the patch, at column shift
  // l / 16) as its place in the halos; pixels past the patch's images read image 0's first (their
  // g is zero); the tap row's step.
  int boff[IMGS ? TH : 1];
  const int rsx = a.hal.rs * XP;
  if constexpr (IMGS) {
    const int hw = a.oh * a.ow;
#pragma unroll
    for (int st = 0; st < TH; ++st) {
      const int n = st * 16 + (lane & 15);
      int pix = 0;
      if (n < a.imgs * hw) {
        const int i = n / hw, q = n - i * hw, oy = q / a.ow;
        pix = i * a.hal.is + oy * a.hal.rs + q - oy * a.ow;
      }
      boff[st] = (pix + (lane >> 4) + shift) * XP + wn * 8;
    }
  }
  auto compute = [&](int buf, int py0) {  // rows py0 .. py0 + TH / 2 - 1 of the patch
    const uint16_t* gs = Gs + buf * T::G16_STAGE;
    const uint16_t* xs = Xs + buf * XSTAGE;
    constexpr int R = TH / 2;
    if constexpr (IMGS) {  // a 16-pixel step: both tap rows' B at shifts 0 and 1, read per step
#pragma unroll
      for (int i = 0; i < R; ++i) {
        uint32_t bx[2][2][2], af[2][4];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          uint32_t r4[4];
          ldmatrix_x4_trans(r4, xs + boff[py0 + i] + r * rsx);
          bx[r][0][0] = r4[0];
          bx[r][0][1] = r4[1];
          bx[r][1][0] = r4[2];
          bx[r][1][1] = r4[3];
        }
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
          ldmatrix_x4(af[mi], gs + a_lane + mi * 16 * GS + (py0 + i) * 16);
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int q = 0; q < 2; ++q)
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
              BF16::mma(acc + (mi * T::KK + r * KS + q) * 4, af[mi], bx[r][q]);
      }
      return;
    }
    // halo row py0 + h at shift q: read once, used by the KS rows of the patch that need it
    uint32_t bx[R + KS - 1][KS][2];
    auto load_b = [&](int h) {
      const uint16_t* p = xs + b_lane + (py0 + h) * XWB * XP;
      uint32_t r4[4];
      ldmatrix_x4_trans(r4, p);
      bx[h][0][0] = r4[0];
      bx[h][0][1] = r4[1];
      bx[h][1][0] = r4[2];
      bx[h][1][1] = r4[3];
      if constexpr (KS == 3) ldmatrix_x2_trans(bx[h][KS - 1], p + 2 * XP);
    };
#pragma unroll
    for (int h = 0; h < KS - 1; ++h) load_b(h);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      load_b(i + KS - 1);
      uint32_t af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
        ldmatrix_x4(af[mi], gs + a_lane + mi * 16 * GS + (py0 + i) * 16);
#pragma unroll
      for (int r = 0; r < KS; ++r)
#pragma unroll
        for (int q = 0; q < KS; ++q)
#pragma unroll
          for (int mi = 0; mi < 2; ++mi)
            BF16::mma(acc + (mi * T::KK + r * KS + q) * 4, af[mi], bx[i + r][q]);
    }
  };

  // A warp whose 8 input channels all lie past x's (W4 conv1: 3 of the block's 32) only stages:
  // its mma would multiply zeros. W4 conv1's kernel 308 -> 250 us at ncu's (lower) clocks; at
  // the H200's own ~10-15 us (the pass 0.311 -> 0.247 ms with the grouped split sum, ~50 us of
  // that): there g's staging limits it, not the tensor cores.
  const bool busy = c0 + wn * 8 < a.c;
  if (steps > 0)
    for (int half = 0; half < 2; ++half) {
      load(t_begin, half);
      store(0, half);
    }
  __syncthreads();
  for (int st = 0; st < steps; ++st) {
    const int buf = st & 1;
    const bool more = st + 1 < steps;
    if (more) load(t_begin + st + 1, 0);
    if (want_bias && tid < BM) {  // this row's g, as stored (bf16), in a fixed order
      const uint4* gr = reinterpret_cast<const uint4*>(Gs + buf * T::G16_STAGE + tid * GS);
#pragma unroll 4
      for (int j = 0; j < P / 8; ++j) {
        const uint4 v = gr[j];
        for (uint32_t u : {v.x, v.y, v.z, v.w}) bias_sum += bf16_float(u & 0xffffu) + bf16_float(u >> 16);
      }
    }
    if (busy) compute(buf, 0);
    if (more) {
      store(buf ^ 1, 0);
      load(t_begin + st + 1, 1);
    }
    if (busy) compute(buf, TH / 2);
    if (more) store(buf ^ 1, 1);
    __syncthreads();
  }
}

template <class T, class Prec, bool MASK, bool IMGS = false>
__global__ void __launch_bounds__(T::THREADS, T::template min_blocks<Prec>())
    direct_bww(const BwwArgsOf<typename Prec::Data> a) {
  constexpr bool TF32 = Prec::kMma;  // the tensor cores (TF32 or BF16)
  constexpr int BM = T::BM, BC = T::BC, TH = T::TH, TW = T::TW, P = T::P, XW = T::XW, XR = T::XR;
  constexpr int SG = T::SG, CS = TF32 ? T::CS_T : T::CS_F, STAGES = T::STAGES, THREADS = T::THREADS;
  constexpr int G_STAGE = BM * SG, X_STAGE = BC * CS;
  extern __shared__ __align__(16) float smem[];
  float* Gs = smem;                                          // STAGES x [BM][SG]
  float* Xs = Gs + STAGES * G_STAGE;                         // STAGES x [BC][CS]
  float* Ys = MASK ? Xs + STAGES * X_STAGE : nullptr;        // STAGES x [BM][SG]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int c0 = blockIdx.x * BC, m0 = blockIdx.y * BM;
  const int t_begin = blockIdx.z * a.per_split, t_end = min(a.tiles, t_begin + a.per_split);
  const int steps = max(0, t_end - t_begin);
  const int hw = a.h * a.w;
  const int64_t ohw = static_cast<int64_t>(a.oh) * a.ow;

  auto load = [&](int s, int t) {  // pixel tile t (fp32 tiles; BF16: bww_bf16_steps)
    if constexpr (Prec::kK != 16) {
      const int img = t / (a.tiles_x * a.tiles_y), trest = t - img * a.tiles_x * a.tiles_y;
      const int oy0 = (trest / a.tiles_x) * TH, ox0 = (trest % a.tiles_x) * TW;
      const int64_t goff = static_cast<int64_t>(img) * a.k * ohw;
      float* gs = Gs + s * G_STAGE;
      for (int e = tid; e < BM * P; e += THREADS) {
        const int m = e / P, p = e - m * P;
        const int oy = oy0 + p / TW, ox = ox0 + p % TW;
        const bool ok = m0 + m < a.k && oy < a.oh && ox < a.ow;
        const int64_t idx = goff + (m0 + m) * ohw + static_cast<int64_t>(oy) * a.ow + ox;
        cp_async4(gs + m * SG + p, ok ? a.dy + idx : a.dy, ok);
        if (MASK) cp_async4(Ys + s * G_STAGE + m * SG + p, ok ? a.y + idx : a.y, ok);
      }
      load_halo_tile<BC, XR, XW, CS, THREADS, false>(Xs + s * X_STAGE,
                                                     a.x + static_cast<int64_t>(img) * a.c * hw, a.x,
                                                     c0, a.c, a.h, a.w, oy0 - a.pad, ox0 - a.pad, tid);
    }
  };
  // After the wait: act' applied to the g elements this thread copied; TF32 rounding of both
  // tiles' elements it copied.
  auto fix = [&](int s) {
    float* gs = Gs + s * G_STAGE;
    if (MASK)
      for (int e = tid; e < BM * P; e += THREADS) {
        const int m = e / P, p = e - m * P;
        const float v = gs[m * SG + p], yv = Ys[s * G_STAGE + m * SG + p];
        // the exact value, for the bias sum; the TF32 path rounds it where it reads it
        gs[m * SG + p] = act_grad(yv, v, a.act);
      }
    if (TF32) round_halo_tile<BC, XR, XW, CS, THREADS>(Xs + s * X_STAGE, tid);
  };

  const bool want_bias = a.bias_part != nullptr && blockIdx.x == 0;
  float bias_sum = 0.f;
  // FMA path: output channels mg*8 + {0..7}, input channel cl.
  const int cl = tid % BC, mg = tid / BC;
  // TF32 path
  const int wm = warp / T::WN, wn = warp % T::WN, gq = lane / 4, tq = lane % 4;
  // (TF32: a warp whose 8 input channels lie past x's only stages, as in bww_bf16_steps)
  const bool busy = !TF32 || c0 + wn * 8 < a.c;
  constexpr int kAcc = TF32 ? 8 * T::KK : 72;  // FMA: 8 x 9; TF32: MI 2 x NI KK x 4
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;

  auto compute = [&](int s) {
    const float* gs = Gs + s * G_STAGE;
    const float* xs = Xs + s * X_STAGE;
    if constexpr (!TF32) {
      for (int py = 0; py < TH; ++py)
#pragma unroll
        for (int px0 = 0; px0 < TW; px0 += 4) {
          float dv[8][4];
#pragma unroll
          for (int i = 0; i < 8; ++i)
            *reinterpret_cast<float4*>(dv[i]) =
                *reinterpret_cast<const float4*>(gs + (mg * 8 + i) * SG + py * TW + px0);
#pragma unroll
          for (int r = 0; r < 3; ++r) {
            float xv[6];
#pragma unroll
            for (int j = 0; j < 6; ++j) xv[j] = xs[cl * CS + (py + r) * XW + px0 + j];
#pragma unroll
            for (int q = 0; q < 3; ++q)
#pragma unroll
              for (int i = 0; i < 8; ++i) {
                float s4 = acc[i * 9 + r * 3 + q];
#pragma unroll
                for (int j = 0; j < 4; ++j) s4 = fmaf(dv[i][j], xv[j + q], s4);
                acc[i * 9 + r * 3 + q] = s4;
              }
          }
        }
    } else {
#pragma unroll 2
      for (int p0 = 0; p0 < P; p0 += 8) {
        const int py = p0 / TW, px0 = p0 % TW;
        uint32_t af[2][4];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          const float* gr = gs + (wm * 32 + mi * 16 + gq) * SG + p0 + tq;
          af[mi][0] = __float_as_uint(round_tf32(gr[0]));
          af[mi][1] = __float_as_uint(round_tf32(gr[8 * SG]));
          af[mi][2] = __float_as_uint(round_tf32(gr[4]));
          af[mi][3] = __float_as_uint(round_tf32(gr[8 * SG + 4]));
        }
        const float* xr = xs + (wn * 8 + gq) * CS + py * XW + px0 + tq;
#pragma unroll
        for (int tap = 0; tap < T::KK; ++tap) {
          uint32_t bf[2];
          bf[0] = __float_as_uint(xr[(tap / T::KS) * XW + tap % T::KS]);
          bf[1] = __float_as_uint(xr[(tap / T::KS) * XW + tap % T::KS + 4]);
#pragma unroll
          for (int mi = 0; mi < 2; ++mi) Prec::mma(acc + (mi * T::KK + tap) * 4, af[mi], bf);
        }
      }
    }
  };

  if constexpr (Prec::kK == 16) {
    bww_bf16_steps<T, MASK, IMGS>(a, acc, bias_sum, want_bias, reinterpret_cast<uint16_t*>(smem),
                                  c0, m0, t_begin, steps, tid, lane, wm, wn);
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < steps) load(s, t_begin + s);
      cp_async_commit();
    }
    for (int st = 0; st < steps; ++st) {
      const int s = st % STAGES;
      cp_async_wait<STAGES - 2>();
      fix(s);
      __syncthreads();
      if (st + STAGES - 1 < steps) load((st + STAGES - 1) % STAGES, t_begin + st + STAGES - 1);
      cp_async_commit();
      if (want_bias && tid < BM) {
        const float* gr = Gs + s * G_STAGE + tid * SG;
        for (int p = 0; p < P; ++p) bias_sum += gr[p];
      }
      if (busy) compute(s);
    }
    cp_async_wait<0>();
  }

  const int N = a.c * T::KK;
  float* out = a.part + static_cast<int64_t>(blockIdx.z) * a.k * N;
  const int cw = a.s2d ? a.c >> 2 : a.c;  // w's channels
  const Taps taps = a.s2d ? Taps::S2d : Taps::Plain;
  auto put = [&](int m, int ci, int tap, float v) {
    if (m < a.k && ci < a.c) out[w_index(taps, m, ci, tap, cw, 0)] = v;
  };
  if constexpr (!TF32) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int t = 0; t < 9; ++t) put(m0 + mg * 8 + i, c0 + cl, t, acc[i * 9 + t]);
  } else {
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int tap = 0; tap < T::KK; ++tap)
        frag_put(acc + (mi * T::KK + tap) * 4, m0 + wm * 32 + mi * 16 + gq, c0 + wn * 8 + tq * 2,
                 [&](int m, int ci, float v) { put(m, ci, tap, v); });
  }
  if (want_bias && tid < BM && m0 + tid < a.k)
    a.bias_part[static_cast<int64_t>(blockIdx.z) * a.k + m0 + tid] = bias_sum;
}

// ---- host side ----------------------------------------------------------------------------
template <class K>
void ensure_smem(K kernel, size_t bytes) {
  // Above 48 KB a kernel must ask for its dynamic shared memory (not a stream operation).
  PDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

void check_geom(const ConvGeom& g, int64_t n, int64_t k) {
  conv3x3_check(g, "direct 3x3 convolution (GPU)");
  PDNN_CHECK(g.c * g.h * g.w < INT_MAX && k * g.oh * g.ow < INT_MAX && n < INT_MAX / 4,
             "direct 3x3 convolution: an image of %lld x %lld x %lld is too large for its "
             "32-bit indexing within an image", (long long)g.c, (long long)g.h, (long long)g.w);
}

// Calls f(P{}) with the precision of tensors of type E: BF16 for bf16, else F32 or TF32 by the
// run's precision.
template <class E, class F>
void with_precision_of(CudaExec e, F&& f) {
  if constexpr (std::is_same<E, bf16>::value)
    f(BF16{});
  else
    with_precision(e.tf32, f);
}

// The loads and stores of pixel pairs in one access (BF16: 4 bytes; TF32's float32 tensors: 8):
// a row of even width in a tensor aligned to a pair.
bool pairs_aligned(const void* p, int64_t width, size_t elem_bytes = 2) {
  return width % 2 == 0 && aligned(p, 2 * elem_bytes);
}
// ... in whole 16-byte groups of 8 (BF16 backward-weights' g loads)
bool octets_aligned(const void* p, int64_t width) {
  return width % 8 == 0 && aligned(p, 16);
}

// y (n, out_ch, oh, ow) = conv3x3 of x (n, in_ch, h, w) with re-laid-out weights wp.
template <class T, class E>
void launch_fwd(const FwdArgsOf<E>& a, CudaExec e) {
  const dim3 grid(static_cast<unsigned>(static_cast<int64_t>(a.n) * a.tiles_x * a.tiles_y),
                  static_cast<unsigned>((a.k + T::BM - 1) / T::BM), a.phases ? 4 : 1);
  with_precision_of<E>(e, [&](auto p) {
    using P = decltype(p);
    const size_t smem = T::template smem_bytes<P>();
    static bool once = (ensure_smem(direct_fwd<T, P>, smem), true);
    (void)once;
    direct_fwd<T, P><<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  });
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 convolution");
}

// y from the channel-minor copy a.x (direct_fwd_cm): the 2x2 kernels of the 4x4 stride-2 layers.
template <class T>
void launch_fwd_cm(const FwdArgsOf<bf16>& a, CudaExec e) {
  const dim3 grid(static_cast<unsigned>(static_cast<int64_t>(a.n) * a.tiles_x * a.tiles_y),
                  static_cast<unsigned>((a.k + T::BM - 1) / T::BM), a.phases ? 4 : 1);
  const size_t smem = T::smem_bytes_cm();
  static bool once = (ensure_smem(direct_fwd_cm<T>, smem), true);
  (void)once;
  direct_fwd_cm<T><<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  PDNN_CUDA_LAUNCH_CHECK("direct 4x4 stride-2 convolution, channel-minor input");
}

// ---- several images a block (the 4x4 stride-2 layers' 2x2 kernels at small outputs) -----------
// The tile layout of the halos of a patch's images (kit::ImgHalo) for a patch of bn output
// pixels, images of oh x ow outputs and a ks x ks kernel, cap tile pixels at most, `threads`
// threads staging it; false where not one image fits. A halo is oh + ks - 1 rows of
// round_up(ow + ks, 2) columns (from an even column: one more where the padding is odd). The
// strides: where consecutive output pixels land on consecutive tile pixels modulo 8 (row stride
// = ow, image stride = oh rows, modulo 8), any 8 of them (an ldmatrix phase: the B rows of one
// n tile, 24 or 40 bf16 a pixel, an odd number of 16-byte bank groups) fall on 8 different bank
// groups; that layout where all bn / (oh ow) images fit cap, else the packed one (row stride =
// the halo's width; 4x4 outputs then read 2-way conflicted), with as many images as fit.
bool imgs_layout(int bn, int cap, int threads, int ks, int64_t oh, int64_t ow, ImgHalo* out) {
  const int64_t hw = oh * ow;
  if (hw <= 0 || hw > bn) return false;
  const int hr = static_cast<int>(oh) + ks - 1;
  const int hwb = static_cast<int>(conv3x3::round_up(ow + ks, 2));
  const int most = static_cast<int>(bn / hw);
  auto conflict_free = [&](int rs, int is) {
    for (int n0 = 0; n0 < most * hw; n0 += 8) {
      unsigned seen = 0;
      for (int n = n0; n < std::min<int64_t>(n0 + 8, most * hw); ++n) {
        const int i = static_cast<int>(n / hw), p = static_cast<int>(n % hw);
        const unsigned bit = 1u << ((i * is + (p / ow) * rs + p % ow) & 7);
        if (seen & bit) return false;
        seen |= bit;
      }
    }
    return true;
  };
  int rs = hwb, is = hr * hwb, imgs = most;
  if (!conflict_free(rs, is)) {
    int rs2 = hwb, is2;
    while ((rs2 - ow) % 8 != 0) ++rs2;
    is2 = hr * rs2;
    while ((is2 - oh * rs2) % 8 != 0) ++is2;
    if (static_cast<int64_t>(most) * is2 <= cap) rs = rs2, is = is2;
  }
  imgs = std::min(imgs, cap / is);
  if (imgs < 1) return false;
  const int ppt = threads / 4, per_img = hr * (hwb / 2);
  *out = ImgHalo{imgs, hr, hwb / 2, rs, is, ppt / per_img, (ppt % per_img) / (hwb / 2),
                 (ppt % per_img) % (hwb / 2)};
  return true;
}

// Whether a pass runs with several images a block: Many where imgs_layout finds a layout (else
// an error: tests force it on shapes it serves), Auto where four images or more fit the patch
// (two lost to one on the H200: the file's header),
// One never.
bool imgs_wanted(DirectImages mode, bool fits, int imgs, const char* what) {
  if (mode == DirectImages::Many)
    PDNN_CHECK(fits, "%s: several images a block asked for, but an image's outputs do not fit "
               "the block's patch", what);
  return mode != DirectImages::One && fits && (mode == DirectImages::Many || imgs >= 4);
}

struct FwdImgsPlan {
  ImgHalo hal;
  int groups, splits, per_split;
};
// T's plan for a forward-kind pass (ph phases) of n images, `steps` 16-channel steps, k output
// channels, given the halos' layout: as many splits of the steps as keep the grid within one
// wave of T's resident blocks (min_blocks an SM; 4 steps a split at least, 16 splits at most),
// the splits' sums being written and read once more (fwd_imgs_finish_k): the
// per-step latency, not the multiply-adds, sets a block's time at these sizes (the file's
// comment).
template <class T>
FwdImgsPlan fwd_imgs_splits(const ImgHalo& hal, int64_t n, int64_t k, int ph, int steps) {
  FwdImgsPlan p{};
  p.hal = hal;
  p.groups = static_cast<int>((n + hal.imgs - 1) / hal.imgs);
  const int64_t blocks = static_cast<int64_t>(p.groups) * ((k + T::BM - 1) / T::BM) * ph;
  const int64_t slots = static_cast<int64_t>(kit::device_sms()) * T::template min_blocks<BF16>();
  const int64_t want = std::max<int64_t>(1, std::min<int64_t>({slots / blocks, steps / 4, 16}));
  p.per_split = static_cast<int>((steps + want - 1) / want);
  p.splits = (steps + p.per_split - 1) / p.per_split;
  return p;
}

template <class T>
bool run_fwd_imgs(FwdArgsOf<bf16>& a, DirectImages mode, float* part, CudaExec e) {
  ImgHalo hal{};
  const bool fits = imgs_layout(T::BN, T::CAP, T::THREADS, T::KS, a.oh, a.ow, &hal);
  if (!imgs_wanted(mode, fits, hal.imgs, "direct 4x4 stride-2 convolution (bf16)")) return false;
  const int ph = a.phases ? 4 : 1;
  const FwdImgsPlan p = fwd_imgs_splits<T>(hal, a.n, a.k, ph, (a.c + 15) / 16);
  PDNN_CHECK(static_cast<int64_t>(p.splits) * ph * a.n * a.k * a.oh * a.ow <=
                 static_cast<int64_t>(conv2d_direct_fwd_imgs_part_floats(a.c, a.k, a.oh, a.ow, a.n, ph)),
             "direct 4x4 stride-2 convolution (bf16): %d splits exceed the workspace's bound",
             p.splits);
  a.imgs = p.hal.imgs;
  a.hal = p.hal;
  a.per_split = p.per_split;
  a.part = part;
  const size_t smem = T::smem_bytes_imgs();
  static bool once = (ensure_smem(direct_fwd_imgs<T>, smem), true);
  (void)once;
  const dim3 grid(static_cast<unsigned>(p.groups), static_cast<unsigned>((a.k + T::BM - 1) / T::BM),
                  static_cast<unsigned>(ph * p.splits));
  direct_fwd_imgs<T><<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  PDNN_CUDA_LAUNCH_CHECK("direct 4x4 stride-2 convolution, several images a block");
  const int64_t total = static_cast<int64_t>(ph) * a.n * a.k * a.oh * a.ow;
  if (total < INT_MAX / 2)  // the grid's stride added to an index stays an int
    fwd_imgs_finish_k<int><<<blocks_for(total), kThreads, 0, stream_of(e)>>>(a, p.splits);
  else
    fwd_imgs_finish_k<int64_t><<<blocks_for(total), kThreads, 0, stream_of(e)>>>(a, p.splits);
  PDNN_CUDA_LAUNCH_CHECK("direct 4x4 stride-2 convolution, the splits' sum");
  return true;
}

// KS: the kernel's side. phase_h > 0: the four output phases (FwdArgsOf::phases) of y (n,
// out_ch, phase_h, phase_w), oh x ow each, the weights of phase z at wp + z * w_phase.
template <int KS = 3, class E>
void run_fwd(int in_ch, int h, int w, int out_ch, int oh, int ow, int pad, int64_t n, const E* x,
             const E* wp, int Mp, const float* b, E* y, Act act, DirectTile tile, CudaExec e,
             const E* msrc = nullptr, Act mact = {}, int phase_h = 0, int phase_w = 0,
             int64_t w_phase = 0, DirectImages imgs = DirectImages::One, float* part = nullptr) {
  FwdArgsOf<E> a{};
  a.msrc = msrc;
  a.mact = mact;
  a.phases = phase_h > 0;
  a.dh = phase_h;
  a.dw = phase_w;
  a.w_phase = w_phase;
  a.y_img = static_cast<int64_t>(out_ch) * (a.phases ? static_cast<int64_t>(phase_h) * phase_w
                                                      : static_cast<int64_t>(oh) * ow);
  a.n = static_cast<int>(n);
  a.c = in_ch;
  a.h = h;
  a.w = w;
  a.k = out_ch;
  a.oh = oh;
  a.ow = ow;
  a.pad = pad;
  a.Mp = Mp;
  a.pairs = pairs_aligned(x, w, sizeof(E));
  // (fwd_mma_put_pairs: at most one activation, compile-time)
  a.y_pairs = !a.phases && pairs_aligned(y, ow, sizeof(E)) &&
              (msrc == nullptr || pairs_aligned(msrc, ow, sizeof(E))) &&
              (act.kind == FusedAct::None || mact.kind == FusedAct::None);
  a.x = x;
  a.wp = wp;
  a.bias = b;
  a.y = y;
  a.act = act;
  const int th = tile == DirectTile::M32 ? 16 : 8, tw = 16;
  a.tiles_x = (ow + tw - 1) / tw;
  a.tiles_y = (oh + th - 1) / th;
  if constexpr (KS == 2) {  // the 4x4 stride-2 layers (bf16): x as k4s2_layout chose
    static_assert(std::is_same<E, bf16>::value, "the 2x2 kernels run in bf16");
    if (tile == DirectTile::M128 ? run_fwd_imgs<Fwd128K<KS>>(a, imgs, part, e)
        : tile == DirectTile::M64 ? run_fwd_imgs<Fwd64K<KS>>(a, imgs, part, e)
                                  : run_fwd_imgs<Fwd32K<KS>>(a, imgs, part, e))
      return;
    if (tile == DirectTile::M128) launch_fwd_cm<Fwd128K<KS>>(a, e);
    else if (tile == DirectTile::M64) launch_fwd_cm<Fwd64K<KS>>(a, e);
    else launch_fwd_cm<Fwd32K<KS>>(a, e);
  } else {
    if (tile == DirectTile::M128) launch_fwd<Fwd128K<KS>>(a, e);
    else if (tile == DirectTile::M64) launch_fwd<Fwd64K<KS>>(a, e);
    else launch_fwd<Fwd32K<KS>>(a, e);
  }
}

// A 4x4 stride-2 forward-kind pass's block tile and input layout at oh x ow outputs a phase:
// several images a block (the input NCHW, direct_fwd_imgs) where imgs_wanted says so, else one
// image a block from the channel-minor copy (direct_fwd_cm). Returns the images mode run_fwd
// then takes (Many or One: the same choice again, no other).
DirectImages k4s2_layout(DirectTile tile, int64_t oh, int64_t ow, DirectImages mode) {
  ImgHalo hal{};
  auto many = [&](auto cfg) {
    using T = decltype(cfg);
    const bool fits = imgs_layout(T::BN, T::CAP, T::THREADS, T::KS, oh, ow, &hal);
    return imgs_wanted(mode, fits, hal.imgs, "direct 4x4 stride-2 convolution (bf16)");
  };
  const bool m = tile == DirectTile::M128 ? many(Fwd128K<2>{})
                 : tile == DirectTile::M64 ? many(Fwd64K<2>{})
                                           : many(Fwd32K<2>{});
  return m ? DirectImages::Many : DirectImages::One;
}

// xc = the channel-minor copy (to_cm16_k) of x: s2d: of the space-to-depth phases of x (n, cx,
// xh, xw), c = 4 cx channels of h x w = their dims; else of x itself, (n, c, h, w).
void channel_minor(const bf16* x, int64_t n, int64_t c, int64_t h, int64_t w, bool s2d,
                   int64_t cx, int64_t xh, int64_t xw, bf16* xc, CudaExec e) {
  const int64_t groups = (c + 15) / 16, count = n * groups * h * w;
  PDNN_CHECK(count < INT_MAX / 2, "direct 4x4 stride-2 convolution: the channel-minor copy of "
             "%lld x %lld x %lld x %lld has too many pixels for its 32-bit indexing",
             (long long)n, (long long)c, (long long)h, (long long)w);
  if (count == 0) return;
  const FastDiv divw(static_cast<uint32_t>(w)), divh(static_cast<uint32_t>(h)),
      divg(static_cast<uint32_t>(groups));
  const int ci = static_cast<int>(c), hi = static_cast<int>(h), wi = static_cast<int>(w);
  if (s2d)
    to_cm16_k<true><<<blocks_for(count), kThreads, 0, stream_of(e)>>>(
        static_cast<int>(count), ci, hi, wi, static_cast<int>(cx), static_cast<int>(xh),
        static_cast<int>(xw), divw, divh, divg, x, xc);
  else
    to_cm16_k<false><<<blocks_for(count), kThreads, 0, stream_of(e)>>>(
        static_cast<int>(count), ci, hi, wi, 0, 0, 0, divw, divh, divg, x, xc);
  PDNN_CUDA_LAUNCH_CHECK("direct 4x4 stride-2 convolution, the channel-minor copy");
}

// The block tile of a forward-kind pass with out_ch output channels at oh x ow, as measured on
// the H100 (W4's layers, results/bench/conv_gpu.csv of 2026-11-26): in fp32 the 32-row tile
// (8 x 8 outputs a thread over 16 x 16 pixels) wins up to 64 channels at 112 x 112 and above
// (conv4 forward 1.53 ms against 1.62 for 64 rows), the 64-row tile at 56 x 56 and for 128
// channels (conv5 0.97 against 1.05 for 128 rows); on the tensor cores the tile of the channel
// count wins (conv4 0.78 ms on 64 rows against 0.89 on 32, conv6 0.75 on 128 against 0.79).
// BF16 takes the tensor cores' rule (not yet measured).
DirectTile fwd_tile(int64_t out_ch, int64_t oh, int64_t ow, bool tensor_cores) {
  if (out_ch <= 32) return DirectTile::M32;
  if (tensor_cores) return out_ch <= 64 ? DirectTile::M64 : DirectTile::M128;
  return out_ch <= 64 && oh * ow >= 112 * 112 ? DirectTile::M32 : DirectTile::M64;
}

// Backward-weights' walk and split on this device (conv2d_gpu_ws.h, which sizes its partial
// sums by the same plan with resident = 0). resident: blocks of the kernel that fit on a
// multiprocessor at once (its registers and shared memory); imgs > 0: a patch is the outputs
// of imgs images.
DirectBwwPlan bww_plan(const ConvGeom& g, int64_t n, int64_t k, DirectTile tile, int resident,
                       int imgs = 0) {
  return conv2d_direct_bww_plan(g, n, k, tile, kit::device_sms(), resident, imgs);
}

template <class T, class P, bool MASK, bool IMGS>
void launch_bww_one(const BwwArgsOf<typename P::Data>& a, int splits, CudaExec e) {
  const size_t smem = T::template smem_bytes<P>(MASK, IMGS);
  static bool once = (ensure_smem(direct_bww<T, P, MASK, IMGS>, smem), true);
  (void)once;
  const dim3 grid(static_cast<unsigned>((a.c + T::BC - 1) / T::BC),
                  static_cast<unsigned>((a.k + T::BM - 1) / T::BM), static_cast<unsigned>(splits));
  direct_bww<T, P, MASK, IMGS><<<grid, T::THREADS, smem, stream_of(e)>>>(a);
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 backward-weights");
}

template <class T, class P, bool MASK, bool IMGS>
int bww_resident_one() {
  static const int r = [] {  // a property of the kernel and the device: asked once
    const size_t smem = T::template smem_bytes<P>(MASK, IMGS);
    ensure_smem(direct_bww<T, P, MASK, IMGS>, smem);
    int b = 0;
    PDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, direct_bww<T, P, MASK, IMGS>,
                                                                  T::THREADS, smem));
    return std::max(b, 1);
  }();
  return r;
}

// Several images a stage: BF16's 2x2 kernels only.
template <class T, class E>
constexpr bool kBwwImgs = std::is_same<E, bf16>::value && T::KS == 2;

template <class T, class E>
int bww_resident(bool mask, bool imgs, CudaExec e) {
  int r = 1;
  with_precision_of<E>(e, [&](auto p) {
    using P = decltype(p);
    if constexpr (kBwwImgs<T, E>)
      if (imgs) {
        r = mask ? bww_resident_one<T, P, true, true>() : bww_resident_one<T, P, false, true>();
        return;
      }
    r = mask ? bww_resident_one<T, P, true, false>() : bww_resident_one<T, P, false, false>();
  });
  return r;
}

template <class T, class E>
void launch_bww(const BwwArgsOf<E>& a, int splits, bool mask, CudaExec e) {
  with_precision_of<E>(e, [&](auto p) {
    using P = decltype(p);
    if constexpr (kBwwImgs<T, E>)
      if (a.imgs > 0) {
        if (mask) launch_bww_one<T, P, true, true>(a, splits, e);
        else launch_bww_one<T, P, false, true>(a, splits, e);
        return;
      }
    if (mask) launch_bww_one<T, P, true, false>(a, splits, e);
    else launch_bww_one<T, P, false, false>(a, splits, e);
  });
}

// T's halos' layout for a weight gradient at oh x ow outputs with several images a patch, and
// whether mode takes it (imgs_wanted).
template <class T>
bool bww_imgs(DirectImages mode, int64_t oh, int64_t ow, ImgHalo* hal) {
  const bool fits = imgs_layout(T::P, T::CAP, T::THREADS, T::KS, oh, ow, hal);
  return imgs_wanted(mode, fits, hal->imgs, "direct 4x4 stride-2 backward-weights (bf16)");
}

// The tensor cores' layout (prep_weights_mma_k) of w (E: bf16, or float32 rounded to TF32)
// into ws, with the taps (Plain: 3x3; S2d, Phase (bf16): a 4x4 stride-2 kernel's 2x2 kernels,
// Phase four layouts of conv2d_direct_weights_floats(k, c, true, 4) floats each); returns Mp.
template <class E>
int prep_weights_mma(const E* w, int64_t k, int64_t c, bool flip, float* ws, CudaExec e,
                     Taps taps = Taps::Plain) {
  constexpr int G = direct::row_channels(sizeof(E));
  const int64_t cc = taps == Taps::S2d ? 4 * c : c, kk = taps == Taps::Plain ? 9 : 4;
  const bool ko_in = flip || taps == Taps::Phase;
  const int Mp = static_cast<int>(conv3x3::round_up(ko_in ? cc : k, 128));
  const int64_t rows =
      conv3x3::round_up(ko_in ? k : cc, G) / G * kk * (taps == Taps::Phase ? 4 : 1);
  PDNN_CHECK(rows * Mp * G < INT_MAX, "direct convolution (%s): %lld x %lld weights exceed "
             "the 32-bit indexing of their re-layout", sizeof(E) == 2 ? "bf16" : "tf32",
             (long long)k, (long long)c);
  const int per = rows * Mp * G >= (int64_t{1} << 18) ? kPrepRows : 1;  // rows a thread
  const dim3 grid(static_cast<unsigned>(Mp * G / kThreads + (Mp * G % kThreads != 0)),
                  static_cast<unsigned>(std::min<int64_t>((rows + per - 1) / per, 65535)));
  prep_weights_mma_k<E, G><<<grid, kThreads, 0, stream_of(e)>>>(
      static_cast<int>(k), static_cast<int>(cc), static_cast<int>(c), static_cast<int>(kk), Mp,
      flip, taps, per, w, reinterpret_cast<E*>(ws));
  PDNN_CUDA_LAUNCH_CHECK("direct convolution's weights (tensor cores)");
  return Mp;
}
// The weights re-laid out into ws for a forward-kind pass (flip: backward-data's rotated
// kernels); returns Mp. fp32: [c][9][Mp] for the FMA tiles; TF32: the tensor cores' layout.
int prep_weights(const float* w, int64_t k, int64_t c, bool flip, float* ws, CudaExec e) {
  if (e.tf32) return prep_weights_mma(w, k, c, flip, ws, e);
  const int Mp = static_cast<int>(conv3x3::round_up(flip ? c : k, 128));
  const int64_t total = (flip ? k : c) * 9 * Mp;
  prep_weights_k<<<blocks_for(total), kThreads, 0, stream_of(e)>>>(
      static_cast<int>(k), static_cast<int>(c), Mp, flip, w, ws);
  PDNN_CUDA_LAUNCH_CHECK("direct 3x3 weights");
  return Mp;
}
int prep_weights(const bf16* w, int64_t k, int64_t c, bool flip, float* ws, CudaExec e,
                 Taps taps = Taps::Plain) {
  return prep_weights_mma(w, k, c, flip, ws, e, taps);
}

template <class E>
void forward(const ConvFwdOf<E, float>& a, float* ws, CudaExec e, DirectTile tile) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  check_geom(g, n, k);
  if (n * k * g.oh * g.ow == 0) return;
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  if (tile == DirectTile::Auto) tile = fwd_tile(k, g.oh, g.ow, e.tf32 || kBf16);
  const int Mp = prep_weights(a.w, k, g.c, false, ws, e);
  run_fwd(static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w),
          static_cast<int>(k), static_cast<int>(g.oh), static_cast<int>(g.ow),
          static_cast<int>(g.ph), n, a.x, reinterpret_cast<const E*>(ws), Mp, a.b, a.y, a.act,
          tile, e);
}

// Backward-data's operands, for every kernel here: dy already through the activation.
template <class E>
void check_data_args(const ConvBwdOf<E, float>& a) {
  PDNN_CHECK(a.act.kind == FusedAct::None,
             "conv2d_direct_backward_data: dy must already be through the activation");
  PDNN_CHECK(a.dx_act.kind == FusedAct::None || a.dx_src,
             "conv2d_direct_backward_data: dx through an activation needs its source");
}

template <class E>
void backward_data(const ConvBwdOf<E, float>& a, float* ws, CudaExec e, DirectTile tile) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  check_data_args(a);
  check_geom(g, n, k);
  if (n * g.c * g.h * g.w == 0) return;
  constexpr bool kBf16 = std::is_same<E, bf16>::value;
  if (tile == DirectTile::Auto) tile = fwd_tile(g.c, g.h, g.w, e.tf32 || kBf16);
  const int Mp = prep_weights(a.w, k, g.c, true, ws, e);
  // dx = conv3x3(dy, rotated weights) with padding 2 - p: from k channels at oh x ow to c
  // channels at h x w.
  run_fwd(static_cast<int>(k), static_cast<int>(g.oh), static_cast<int>(g.ow),
          static_cast<int>(g.c), static_cast<int>(g.h), static_cast<int>(g.w),
          static_cast<int>(2 - g.ph), n, a.dy, reinterpret_cast<const E*>(ws), Mp, nullptr, a.dx,
          Act{}, tile, e, a.dx_src, a.dx_act);
}

// The weight gradient of a KS x KS stride-1 convolution of x (n, cx, hx, wx) with padding pad
// to c.g's oh x ow: dw +=, db += (c.dy, c.y, c.act: the pass's). s2d: x is the space-to-depth
// input of a 4x4 stride-2 convolution (cx = 4 w's channels; the sums land in w's layout).
template <int KS, class E>
void run_bww(const ConvBwdOf<E, float>& c, const E* x, int64_t cx, int64_t hx, int64_t wx,
             int64_t pad, bool s2d, float* ws, CudaExec e, DirectTile tile,
             DirectImages mode = DirectImages::One) {
  const ConvGeom& g = c.g;
  const int64_t n = c.n, k = c.k;
  PDNN_CHECK(c.act.kind == FusedAct::None || c.y, "conv2d_direct_backward_weights: act needs y");
  if (tile == DirectTile::Auto) tile = k > 32 ? DirectTile::M64 : DirectTile::M32;
  if (tile == DirectTile::M128) tile = DirectTile::M64;  // the widest weight tile
  ConvGeom gb = g;  // the plan's: the output pixels, cx channels
  gb.c = cx;
  const bool mask = c.act.kind != FusedAct::None;
  ImgHalo hal{};
  bool many = false;
  if constexpr (kBwwImgs<Bww64K<KS>, E>)
    many = tile == DirectTile::M64 ? bww_imgs<Bww64K<KS>>(mode, g.oh, g.ow, &hal)
                                   : bww_imgs<Bww32K<KS>>(mode, g.oh, g.ow, &hal);
  const int resident = tile == DirectTile::M64 ? bww_resident<Bww64K<KS>, E>(mask, many, e)
                                               : bww_resident<Bww32K<KS>, E>(mask, many, e);
  const DirectBwwPlan p = bww_plan(gb, n, k, tile, resident, many ? hal.imgs : 0);
  BwwArgsOf<E> a{};
  if (many) {
    a.imgs = hal.imgs;
    a.hal = hal;
  }
  a.n = static_cast<int>(n);
  a.c = static_cast<int>(cx);
  a.h = static_cast<int>(hx);
  a.w = static_cast<int>(wx);
  a.k = static_cast<int>(k);
  a.oh = static_cast<int>(g.oh);
  a.ow = static_cast<int>(g.ow);
  a.pad = static_cast<int>(pad);
  a.tiles_x = p.tiles_x;
  a.tiles_y = p.tiles_y;
  a.tiles = p.tiles;
  a.per_split = p.per_split;
  a.x_pairs = pairs_aligned(x, wx);
  // (several images a patch: an image's pixels in a row, pairs and octets within one image)
  const int64_t gw = many ? g.oh * g.ow : g.ow;
  a.g_pairs = pairs_aligned(c.dy, gw) && (c.act.kind == FusedAct::None || pairs_aligned(c.y, gw));
  a.g_octets = octets_aligned(c.dy, gw) &&
               (c.act.kind == FusedAct::None || octets_aligned(c.y, gw));
  a.x = x;
  a.dy = c.dy;
  a.y = c.y;
  a.act = c.act;
  a.s2d = s2d;
  a.part = ws;
  const int64_t N = cx * KS * KS;
  a.bias_part = c.db ? ws + static_cast<int64_t>(p.splits) * k * N : nullptr;
  if (tile == DirectTile::M64) launch_bww<Bww64K<KS>>(a, p.splits, mask, e);
  else launch_bww<Bww32K<KS>>(a, p.splits, mask, e);
  sum_splits(p.splits, static_cast<int>(k), static_cast<int>(N), ws, a.bias_part, c.dw, c.db, e,
             "direct backward-weights sum");
}

template <class E>
void backward_weights(const ConvBwdOf<E, float>& c, float* ws, CudaExec e, DirectTile tile) {
  const ConvGeom& g = c.g;
  check_geom(g, c.n, c.k);
  if (c.k * g.c == 0) return;
  run_bww<3>(c, c.x, g.c, g.h, g.w, g.ph, false, ws, e, tile);
}

// ---- 4x4 stride-2 padding-1 (bf16): the 2x2 kernels over the space-to-depth phases ----------
void check_k4s2(const ConvGeom& g, int64_t n, int64_t k) {
  conv4x4s2_check(g, "direct 4x4 stride-2 convolution (GPU, bf16)");
  const S2dDims d = conv2d_direct_s2d_dims(g);
  // (d.h d.w 16: a channel group of the channel-minor copy, direct_fwd_cm's 32-bit offsets)
  PDNN_CHECK(d.c * d.h * d.w < INT_MAX && k * g.oh * g.ow < INT_MAX && g.image_size() < INT_MAX &&
                 k * 4 * d.c < INT_MAX && n < INT_MAX / 4 && d.h * d.w * 16 < INT_MAX,
             "direct 4x4 stride-2 convolution: an image of %lld x %lld x %lld is too large for "
             "its 32-bit indexing within an image", (long long)g.c, (long long)g.h,
             (long long)g.w);
}

// xs = x's phases (conv2d_direct_s2d_dims), in conv2d_direct_s2d_floats of workspace;
// max_pairs: the (pr, u, v) pairs of outputs a launch takes at most (conv2d_gpu.h).
template <class E>
void space_to_depth(const E* x, const ConvGeom& g, int64_t n, E* xs, CudaExec e,
                    int64_t max_pairs = int64_t{1} << 30) {
  PDNN_CHECK(max_pairs >= 1 && max_pairs <= int64_t{1} << 30,
             "direct 4x4 stride-2 space-to-depth: %lld pairs a launch is outside [1, 2^30]",
             (long long)max_pairs);
  const S2dDims d = conv2d_direct_s2d_dims(g);
  // (check_k4s2, which every caller ran, keeps an image's 4c hs ws below 2^31: per2 < 2^30)
  const int64_t planes = n * g.c, per2 = 2 * d.h * d.w;
  const int64_t chunk = std::max<int64_t>(1, max_pairs / per2);  // planes a launch
  const FastDiv div2per(static_cast<uint32_t>(per2)), divws(static_cast<uint32_t>(d.w));
  for (int64_t p0 = 0; p0 < planes; p0 += chunk) {
    const int count = static_cast<int>(std::min(chunk, planes - p0) * per2);
    space_to_depth_k<<<blocks_for((count + kS2dUnroll - 1) / kS2dUnroll), kThreads, 0,
                       stream_of(e)>>>(count, p0, static_cast<int>(g.h), static_cast<int>(g.w),
                                       static_cast<int>(d.h), static_cast<int>(d.w), div2per,
                                       divws, x, xs);
    PDNN_CUDA_LAUNCH_CHECK("direct 4x4 stride-2 space-to-depth");
  }
}

// ws: the weights [4c / 16][4][Mp][16], then x's phases (NCHW for several images a block, else
// channel-minor), then the split sums of several images a block.
void k4s2_forward(const ConvFwdBf16& a, float* ws, CudaExec e, DirectTile tile, DirectImages imgs) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  check_k4s2(g, n, k);
  if (n * k * g.oh * g.ow == 0) return;
  const S2dDims d = conv2d_direct_s2d_dims(g);
  if (tile == DirectTile::Auto) tile = fwd_tile(k, g.oh, g.ow, true);
  imgs = k4s2_layout(tile, g.oh, g.ow, imgs);
  const int Mp = prep_weights(a.w, k, g.c, false, ws, e, Taps::S2d);
  bf16* xs = reinterpret_cast<bf16*>(ws + conv2d_direct_weights_floats(d.c, k, true, 4));
  if (imgs == DirectImages::Many)
    space_to_depth(a.x, g, n, xs, e);
  else
    channel_minor(a.x, n, d.c, d.h, d.w, true, g.c, g.h, g.w, xs, e);
  float* part = ws + conv2d_direct_weights_floats(d.c, k, true, 4) + conv2d_direct_s2d_floats(g, n);
  run_fwd<2>(static_cast<int>(d.c), static_cast<int>(d.h), static_cast<int>(d.w),
             static_cast<int>(k), static_cast<int>(g.oh), static_cast<int>(g.ow), 0, n, xs,
             reinterpret_cast<const bf16*>(ws), Mp, a.b, a.y, a.act, tile, e,
             static_cast<const bf16*>(nullptr), Act{}, 0, 0, 0, imgs, part);
}

// dx by its four output phases (pr, pq), each the 2x2 stride-1 convolution of dy from row
// u - 1 + pr, column v - 1 + pq, written to dx's pixels (2u + pr, 2v + pq): one launch, the
// phase in blockIdx.z, dx_act in the output write. ws: the four phases' weights, then the split
// sums of several images a block (dy read as it is), else dy's channel-minor copy.
void k4s2_backward_data(const ConvBwdBf16& a, float* ws, CudaExec e, DirectTile tile,
                        DirectImages imgs) {
  const ConvGeom& g = a.g;
  const int64_t n = a.n, k = a.k;
  check_data_args(a);
  check_k4s2(g, n, k);
  if (n * g.c * g.h * g.w == 0) return;
  if (tile == DirectTile::Auto) tile = fwd_tile(g.c, g.oh, g.ow, true);
  imgs = k4s2_layout(tile, g.oh, g.ow, imgs);
  const int Mp = prep_weights(a.w, k, g.c, false, ws, e, Taps::Phase);
  const int64_t per_phase =
      static_cast<int64_t>(conv2d_direct_weights_floats(k, g.c, true, 4)) * 2;
  float* rest = ws + 4 * conv2d_direct_weights_floats(k, g.c, true, 4);
  const bf16* x = a.dy;
  if (imgs == DirectImages::One) {
    bf16* dyc = reinterpret_cast<bf16*>(rest);
    channel_minor(a.dy, n, k, g.oh, g.ow, false, 0, 0, 0, dyc, e);
    x = dyc;
  }
  run_fwd<2>(static_cast<int>(k), static_cast<int>(g.oh), static_cast<int>(g.ow),
             static_cast<int>(g.c), static_cast<int>(g.oh), static_cast<int>(g.ow), 0, n, x,
             reinterpret_cast<const bf16*>(ws), Mp, nullptr, a.dx, Act{}, tile, e, a.dx_src,
             a.dx_act, static_cast<int>(g.h), static_cast<int>(g.w), per_phase, imgs, rest);
}

// ws: the split partial sums (conv2d_direct_bww_part_floats), then x's phases.
void k4s2_backward_weights(const ConvBwdBf16& c, float* ws, CudaExec e, DirectTile tile,
                           DirectImages imgs) {
  const ConvGeom& g = c.g;
  const int64_t n = c.n, k = c.k;
  check_k4s2(g, n, k);
  if (k * g.c == 0) return;
  const S2dDims d = conv2d_direct_s2d_dims(g);
  bf16* xs = reinterpret_cast<bf16*>(
      ws + conv2d_direct_bww_part_floats(g, d.c, n, k, 4, kit::device_sms()));
  space_to_depth(c.x, g, n, xs, e);
  run_bww<2>(c, xs, d.c, d.h, d.w, 0, true, ws, e, tile, imgs);
}

}  // namespace

int conv2d_direct_weights(const bf16* w, int64_t k, int64_t c, bool flip, direct::Taps taps,
                          bf16* out, CudaExec e) {
  return prep_weights(w, k, c, flip, reinterpret_cast<float*>(out), e, taps);
}

void conv2d_direct_space_to_depth(const bf16* x, const ConvGeom& g, int64_t n, bf16* xs,
                                  CudaExec e, int64_t max_pairs) {
  check_k4s2(g, n, 1);
  space_to_depth(x, g, n, xs, e, max_pairs);
}

void conv2d_direct_channel_minor(const bf16* x, const ConvGeom& g, int64_t n, bf16* xc,
                                 CudaExec e, bool s2d) {
  check_k4s2(g, n, 1);
  if (s2d) {
    const S2dDims d = conv2d_direct_s2d_dims(g);
    channel_minor(x, n, d.c, d.h, d.w, true, g.c, g.h, g.w, xc, e);
  } else {
    channel_minor(x, n, g.c, g.h, g.w, false, 0, 0, 0, xc, e);
  }
}

void conv2d_direct_forward(const ConvFwd& a, float* ws, CudaExec e, DirectTile tile) {
  forward(a, ws, e, tile);
}
void conv2d_direct_forward(const ConvFwdBf16& a, float* ws, CudaExec e, DirectTile tile,
                           DirectImages imgs) {
  if (conv4x4s2_applies(a.g))
    k4s2_forward(a, ws, e, tile, imgs);
  else
    forward(a, ws, e, tile);
}
void conv2d_direct_backward_data(const ConvBwd& a, float* ws, CudaExec e, DirectTile tile) {
  backward_data(a, ws, e, tile);
}
void conv2d_direct_backward_data(const ConvBwdBf16& a, float* ws, CudaExec e, DirectTile tile,
                                 DirectImages imgs) {
  if (conv4x4s2_applies(a.g))
    k4s2_backward_data(a, ws, e, tile, imgs);
  else
    backward_data(a, ws, e, tile);
}
void conv2d_direct_backward_weights(const ConvBwd& a, float* ws, CudaExec e, DirectTile tile) {
  backward_weights(a, ws, e, tile);
}
void conv2d_direct_backward_weights(const ConvBwdBf16& a, float* ws, CudaExec e, DirectTile tile,
                                    DirectImages imgs) {
  if (conv4x4s2_applies(a.g))
    k4s2_backward_weights(a, ws, e, tile, imgs);
  else
    backward_weights(a, ws, e, tile);
}

}  // namespace cuda
}  // namespace pdnn
