// The DCGAN generator and discriminator of W5 and their initialisation (dcgan_models.h).
#include "workloads/dcgan/dcgan_models.h"

#include "core/error.h"
#include "core/init.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/conv_transpose2d.h"

namespace pdnn {

namespace {
void check_config(const DcganConfig& c) {
  PDNN_CHECK(c.nz >= 1 && c.ngf >= 1 && c.ndf >= 1 && c.nc >= 1,
             "dcgan: nz %lld, ngf %lld, ndf %lld and nc %lld must all be >= 1",
             static_cast<long long>(c.nz), static_cast<long long>(c.ngf),
             static_cast<long long>(c.ndf), static_cast<long long>(c.nc));
}
}  // namespace

Sequential make_dcgan_generator(const DcganConfig& c) {
  check_config(c);
  Sequential g;
  g.set_name("G");
  const int64_t w = c.ngf;
  const int64_t ch[5] = {c.nz, 8 * w, 4 * w, 2 * w, w};
  for (int i = 0; i < 4; ++i) {
    if (i == 0)
      g.emplace<ConvTranspose2d>(ch[0], ch[1], 4, 1, 0, /*bias=*/false);
    else
      g.emplace<ConvTranspose2d>(ch[i], ch[i + 1], 4, 2, 1, /*bias=*/false);
    g.emplace<BatchNorm2d>(ch[i + 1]);
    g.emplace<ReLU>();
  }
  g.emplace<ConvTranspose2d>(w, c.nc, 4, 2, 1, /*bias=*/false);
  g.emplace<Tanh>();
  return g;
}

Sequential make_dcgan_discriminator(const DcganConfig& c) {
  check_config(c);
  Sequential d;
  d.set_name("D");
  const int64_t w = c.ndf;
  d.emplace<Conv2d>(c.nc, w, 4, 2, 1, /*bias=*/false);
  d.emplace<LeakyReLU>(0.2f);
  for (int64_t k = w; k < 8 * w; k *= 2) {
    d.emplace<Conv2d>(k, 2 * k, 4, 2, 1, /*bias=*/false);
    d.emplace<BatchNorm2d>(2 * k);
    d.emplace<LeakyReLU>(0.2f);
  }
  d.emplace<Conv2d>(8 * w, 1, 4, 1, 0, /*bias=*/false);
  d.emplace<Sigmoid>();
  return d;
}

void dcgan_init(Model& model, Rng& rng) {
  PDNN_CHECK(model.device() == Device::CPU,
             "dcgan_init draws on the host: call it before model.to(%s)",
             device_name(model.device()));
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& l = model.layer(i);
    if (auto* conv = dynamic_cast<Conv2d*>(&l)) {
      init::normal(conv->weight(), 0.f, 0.02f, rng);
    } else if (auto* convt = dynamic_cast<ConvTranspose2d*>(&l)) {
      init::normal(convt->weight(), 0.f, 0.02f, rng);
    } else if (auto* bn = dynamic_cast<BatchNorm2d*>(&l)) {
      bn->reset_parameters(rng);  // gamma 1, beta 0, running mean 0, running var 1
      init::normal(bn->weight(), 1.f, 0.02f, rng);
    } else {
      PDNN_CHECK(l.params().empty(),
                 "dcgan_init: layer %zu (%s) has parameters DCGAN's initialisation does not "
                 "cover", i, l.describe().c_str());
    }
  }
}

}  // namespace pdnn
