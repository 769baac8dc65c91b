// The GPU convolutions' workspace sizes and splits, on the host (conv2d_gpu_ws.h).
#include "ops/conv/conv2d_gpu_ws.h"

#include <algorithm>
#include <climits>

#include "ops/conv/direct_taps.h"

namespace pdnn {
namespace cuda {

const char* conv_tile_name(ConvTile t) {
  switch (t) {
    case ConvTile::Auto: return "auto";
    case ConvTile::T128x128: return "128x128";
    case ConvTile::T64x128: return "64x128";
    case ConvTile::T32x256: return "32x256";
    case ConvTile::T32x128: return "32x128";
    case ConvTile::T32x32: return "32x32";
  }
  return "?";
}

bool conv_implicit_fits(const ConvGeom& g, int64_t n, int64_t k) {
  const int64_t lim = INT_MAX;
  return g.h * g.w < lim && g.oh * g.ow < lim && n * g.oh * g.ow < lim && n * g.h * g.w < lim &&
         k * g.c * g.kh * g.kw < lim && g.kh < 65536 && g.kw < 65536;
}

bool conv_implicit_wide(const ConvGeom& g) {
  return g.c * g.h * g.w + g.kh * g.w + g.kw >= INT_MAX;
}

ConvTile conv_implicit_tile(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k) {
  (void)n;
  const int64_t M = k;
  if (pass == ConvPass::Forward) {
    if (M > 64) return ConvTile::T128x128;
    if (M > 32) return ConvTile::T64x128;
    return ConvTile::T32x256;
  }
  const int64_t N = g.c * g.kh * g.kw;  // backward-weights: the taps
  if (M <= 32 && N <= 32) return ConvTile::T32x32;
  if (M <= 32) return ConvTile::T32x128;
  if (M <= 64) return ConvTile::T64x128;
  return ConvTile::T128x128;
}

kit::KSplit conv2d_implicit_backward_weights_split(ConvTile tile, int64_t M, int64_t N, int64_t K,
                                                   int sms) {
  const ConvTileDims d = conv_tile_dims(tile);
  return kit::split_k_for(((M + d.bm - 1) / d.bm) * ((N + d.bn - 1) / d.bn), K, d.bk, sms);
}

size_t conv2d_implicit_backward_weights_ws(const ConvGeom& g, int64_t n, int64_t k, int sms,
                                           ConvTile tile) {
  if (tile == ConvTile::Auto) tile = conv_implicit_tile(ConvPass::BackwardWeights, g, n, k);
  const int64_t N = g.c * g.kh * g.kw;
  const kit::KSplit s = conv2d_implicit_backward_weights_split(tile, k, N, n * g.oh * g.ow, sms);
  return static_cast<size_t>(s.splits) * static_cast<size_t>(k) * static_cast<size_t>(N + 1);
}

bool conv2d_implicit_data_as_forward(const ConvGeom& g) {
  return g.sh == 1 && g.sw == 1 && g.ph < g.kh && g.pw < g.kw;
}

size_t conv2d_implicit_backward_data_ws(const ConvGeom& g, int64_t n, int64_t k) {
  (void)n;
  return conv2d_implicit_data_as_forward(g)
             ? static_cast<size_t>((k * g.c * g.kh * g.kw + 63) / 64 * 64)
             : 1;
}

int conv2d_implicit_staged_rows(int64_t M) {
  return M > 64 ? 128 : M > 32 ? 64 : M > 16 ? 32 : 16;
}

kit::KSplit conv2d_implicit_bf16_backward_weights_split(const ConvGeom& g, int64_t n, int64_t k,
                                                        int sms) {
  const int64_t N = g.c * g.kh * g.kw, bm = conv2d_implicit_staged_rows(k);
  const int64_t bn = bm == 128 || bm == 64 ? 128 : 256;
  return kit::split_k_for(((k + bm - 1) / bm) * ((N + bn - 1) / bn), n * g.oh * g.ow, 16, sms);
}

size_t conv2d_implicit_bf16_backward_weights_ws(const ConvGeom& g, int64_t n, int64_t k, int sms) {
  const int64_t N = g.c * g.kh * g.kw;
  return static_cast<size_t>(conv2d_implicit_bf16_backward_weights_split(g, n, k, sms).splits) *
         static_cast<size_t>(k) * static_cast<size_t>(N + 1);
}

const char* direct_images_name(DirectImages m) {
  switch (m) {
    case DirectImages::Auto: return "auto";
    case DirectImages::One: return "one";
    case DirectImages::Many: return "many";
  }
  return "?";
}

const char* direct_tile_name(DirectTile t) {
  switch (t) {
    case DirectTile::Auto: return "auto";
    case DirectTile::M128: return "m128";
    case DirectTile::M64: return "m64";
    case DirectTile::M32: return "m32";
  }
  return "?";
}

DirectBwwPlan conv2d_direct_bww_plan(const ConvGeom& g, int64_t n, int64_t k, DirectTile tile,
                                     int sms, int resident, int imgs) {
  DirectBwwPlan p{};
  p.bm = tile == DirectTile::M32 ? 32 : 64;
  p.tiles_x = imgs > 0 ? 1 : static_cast<int>((g.ow + 15) / 16);
  p.tiles_y = imgs > 0 ? 1 : static_cast<int>((g.oh + 7) / 8);
  p.tiles = imgs > 0 ? static_cast<int>((n + imgs - 1) / imgs)
                     : static_cast<int>(n) * p.tiles_x * p.tiles_y;
  const int64_t blocks = ((k + p.bm - 1) / p.bm) * ((g.c + 31) / 32);
  // At most four blocks a multiprocessor, in whole waves of the resident blocks, at least 8
  // patches a split. Every block does the same work, so a last wave partly full costs a whole
  // one: with three resident (Bww32 in bf16, 48 KB) four a multiprocessor ran as 1.33 waves,
  // two rounds of 48 patches where one round of 64 does (W4 conv2 on an H200: 0.67 ms).
  const int per_sm = resident <= 0 ? 4 : std::min(4, resident * std::max(1, 4 / resident));
  const int64_t want = std::max<int64_t>(1, per_sm * static_cast<int64_t>(sms) / blocks);
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(want, p.tiles / 8));
  p.per_split = static_cast<int>((p.tiles + splits - 1) / splits);
  p.splits = (p.tiles + p.per_split - 1) / p.per_split;
  return p;
}

size_t conv2d_direct_fwd_imgs_part_floats(int64_t in_ch, int64_t out_ch, int64_t oh, int64_t ow,
                                          int64_t n, int ph) {
  if (oh * ow <= 0 || oh * ow > 256) return 0;
  const int64_t steps = (in_ch + 15) / 16;
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(steps / 4, 16));
  return static_cast<size_t>(conv3x3::round_up(splits * ph * n * out_ch * oh * ow, 64));
}

size_t conv2d_direct_weights_floats(int64_t in_ch, int64_t out_ch, bool is_bf16, int64_t kk) {
  const int64_t Mp = conv3x3::round_up(out_ch, 128);
  // rows of direct::row_channels input channels (float32: TF32's; the FMA tiles' [c][9][Mp] is
  // no larger)
  const int64_t rows = conv3x3::round_up(in_ch, direct::row_channels(is_bf16 ? 2 : 4));
  return static_cast<size_t>(rows * kk * Mp / (is_bf16 ? 2 : 1));
}

size_t conv2d_direct_bww_part_floats(const ConvGeom& g, int64_t cx, int64_t n, int64_t k,
                                     int64_t kk, int sms) {
  ConvGeom gb = g;
  gb.c = cx;
  const int s = std::max(conv2d_direct_bww_plan(gb, n, k, DirectTile::M64, sms).splits,
                         conv2d_direct_bww_plan(gb, n, k, DirectTile::M32, sms).splits);
  return static_cast<size_t>(conv3x3::round_up(s * k * (cx * kk + 1), 64));
}

S2dDims conv2d_direct_s2d_dims(const ConvGeom& g) {
  return {4 * g.c, direct::s2d_rows(g.h), direct::s2d_cols(g.w)};
}

size_t conv2d_direct_cm16_floats(int64_t c, int64_t h, int64_t w, int64_t n) {
  return static_cast<size_t>(conv3x3::round_up(n * conv3x3::round_up(c, 16) * h * w / 2, 64));
}

size_t conv2d_direct_s2d_floats(const ConvGeom& g, int64_t n) {
  const S2dDims d = conv2d_direct_s2d_dims(g);
  return conv2d_direct_cm16_floats(d.c, d.h, d.w, n);
}

size_t conv2d_direct_ws(ConvPass pass, const ConvGeom& g, int64_t n, int64_t k, DType dtype,
                        int sms) {
  if (dtype == DType::BF16 && conv4x4s2_applies(g)) {
    const int64_t cc = 4 * g.c;
    if (pass == ConvPass::Forward)
      return conv2d_direct_weights_floats(cc, k, true, 4) + conv2d_direct_s2d_floats(g, n) +
             conv2d_direct_fwd_imgs_part_floats(cc, k, g.oh, g.ow, n, 1);
    if (pass == ConvPass::BackwardData)  // the split sums or dy's channel-minor copy
      return 4 * conv2d_direct_weights_floats(k, g.c, true, 4) +
             std::max(conv2d_direct_fwd_imgs_part_floats(k, g.c, g.oh, g.ow, n, 4),
                      conv2d_direct_cm16_floats(k, g.oh, g.ow, n));
    return conv2d_direct_bww_part_floats(g, cc, n, k, 4, sms) + conv2d_direct_s2d_floats(g, n);
  }
  if (pass == ConvPass::BackwardWeights) return conv2d_direct_bww_part_floats(g, g.c, n, k, 9, sms);
  // forward: weights [c][9][Mp]; backward-data: [k][9][Mp of c] (bf16: channels by 16)
  const bool is_bf16 = dtype == DType::BF16;
  return pass == ConvPass::Forward ? conv2d_direct_weights_floats(g.c, k, is_bf16)
                                   : conv2d_direct_weights_floats(k, g.c, is_bf16);
}

}  // namespace cuda

size_t gpu_conv_own_ws_floats(ConvPass pass, ConvAlgo a, const ConvGeom& g, int64_t n, int64_t k,
                              Act act, DType dtype, int sms) {
  const bool is_bf16 = dtype == DType::BF16;
  const size_t masked = pass == ConvPass::Forward ? 0 : cuda::conv2d_act_grad_floats(g, n, k, act);
  if (a == ConvAlgo::Direct && cuda::direct_applies(g, dtype))
    return masked + cuda::conv2d_direct_ws(pass, g, n, k, dtype, sms);
  if (a == ConvAlgo::Implicit) {
    if (pass == ConvPass::Forward) return 1;
    if (pass == ConvPass::BackwardWeights)
      return masked + (is_bf16 ? cuda::conv2d_implicit_bf16_backward_weights_ws(g, n, k, sms)
                               : cuda::conv2d_implicit_backward_weights_ws(g, n, k, sms));
    // bf16's register-staged backward-data runs every stride without flipped weights
    return masked + (is_bf16 ? 1 : cuda::conv2d_implicit_backward_data_ws(g, n, k));
  }
  return cuda_conv_workspace_floats(g, n, k);
}

}  // namespace pdnn
