// make_optimizer: the name -> optimizer table behind --optimizer.
#include "optim/make_optimizer.h"

#include "core/error.h"
#include "optim/adadelta.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace pdnn {

const char* optimizer_names() { return "sgd, adagrad, adadelta, adam"; }

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, ParamSet& params, float lr) {
  const bool dflt = lr < 0.f;
  if (name == "sgd") {
    PDNN_CHECK(!dflt,
               "make_optimizer: sgd has no default learning rate (PyTorch requires one); "
               "give one (--lr)");
    return std::make_unique<Sgd>(params, lr);
  }
  // The defaults live in the constructors' default arguments only.
  if (name == "adagrad")
    return dflt ? std::make_unique<Adagrad>(params)
                : std::make_unique<Adagrad>(params, lr);
  if (name == "adadelta")
    return dflt ? std::make_unique<Adadelta>(params)
                : std::make_unique<Adadelta>(params, lr);
  if (name == "adam")
    return dflt ? std::make_unique<Adam>(params)
                : std::make_unique<Adam>(params, lr);
  PDNN_FAIL("make_optimizer: unknown optimizer '%s' (known: %s)", name.c_str(), optimizer_names());
}

}  // namespace pdnn
