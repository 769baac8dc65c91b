// The DCGAN of SPEC.md's W5 (Radford et al. 2016 as PyTorch's DCGAN tutorial writes it, which
// the PyCUDA study followed), built in one place so the app, the tests and the benchmarks train
// the same thing (scripts/twins/torch_reference.py builds its PyTorch twin, layer for layer, with the
// same indices, so parameter names match: "<layer>.weight").
//   generator (z (N,nz,1,1) -> image (N,nc,64,64) in [-1,1]):
//     0 ConvT(nz->8g, k4 s1 p0) 1 BN 2 ReLU   (1x1 -> 4x4)
//     3 ConvT(8g->4g, k4 s2 p1) 4 BN 5 ReLU   (-> 8x8)
//     6 ConvT(4g->2g) 7 BN 8 ReLU             (-> 16x16)
//     9 ConvT(2g->g) 10 BN 11 ReLU            (-> 32x32)
//     12 ConvT(g->nc) 13 Tanh                 (-> 64x64)
//   discriminator (image (N,nc,64,64) -> probability (N,1,1,1)):
//     0 Conv(nc->d, k4 s2 p1) 1 LeakyReLU(0.2)        (-> 32x32)
//     2 Conv(d->2d) 3 BN 4 LeakyReLU(0.2)             (-> 16x16)
//     5 Conv(2d->4d) 6 BN 7 LeakyReLU(0.2)            (-> 8x8)
//     8 Conv(4d->8d) 9 BN 10 LeakyReLU(0.2)           (-> 4x4)
//     11 Conv(8d->1, k4 s1 p0) 12 Sigmoid             (-> 1x1)
// with g = ngf, d = ndf (64 each in W5, nz = 100, nc = 3). No convolution has a bias (the
// tutorial's bias=False: BatchNorm's beta does that job). Sequential fuses each ReLU/LeakyReLU
// into the BatchNorm or convolution before it at the first forward.
#pragma once
#include <cstdint>

#include "core/rng.h"
#include "model/sequential.h"

namespace pdnn {

struct DcganConfig {
  int64_t nz = 100;  // noise values per sample
  int64_t ngf = 64;  // generator width (channels of its last hidden layer)
  int64_t ndf = 64;  // discriminator width (channels of its first layer)
  int64_t nc = 3;    // image channels
  static constexpr int64_t kImageSide = 64;
};

// Layers are built with zero parameters: draw them with dcgan_init (G first, then D, from
// the run's stream after seeding, as the app and scripts/twins/torch_reference.py do).
Sequential make_dcgan_generator(const DcganConfig& c = {});
Sequential make_dcgan_discriminator(const DcganConfig& c = {});

// DCGAN's initialisation (the tutorial's weights_init), layer by layer in order: every
// convolution's weight ~ N(0, 0.02); every BatchNorm's gamma ~ N(1, 0.02), beta = 0 (running
// statistics reset to 0 and 1). Normals are init::normal's (Box-Muller, two draws each, values
// in row-major order), so the draws are reproducible elsewhere. On the host: before to().
void dcgan_init(Model& model, Rng& rng);

}  // namespace pdnn
