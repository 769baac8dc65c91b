// The optimizers by name: one table (name, help, hyper-parameters with PyTorch 1.13's defaults,
// factory) behind every --optimizer flag, its validator and its help text. A new optimizer
// becomes selectable in every app by one entry in registry.cpp.
#pragma once
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace pdnn {

// A hyper-parameter with its default; kNoDefault where PyTorch has none (SGD's lr), so the
// caller must give it.
struct HyperParam {
  const char* name;
  double value;
};
inline constexpr double kNoDefault = std::numeric_limits<double>::quiet_NaN();

// Values by name, every hyper-parameter of the entry present (defaults filled in).
using HyperValues = std::map<std::string, double>;

struct OptimizerEntry {
  const char* name;  // as Optimizer::kind() says it
  const char* help;  // one line for --help
  std::vector<HyperParam> params;  // "lr" first
  std::unique_ptr<Optimizer> (*make)(ParamSet&, const HyperValues&);
};

// Every registered optimizer, in the order --help lists them.
const std::vector<OptimizerEntry>& optimizer_registry();
// The entry called `name`; unknown names throw pdnn::Error listing the known ones.
const OptimizerEntry& optimizer_entry(const std::string& name);
// The registered names, for CLI::IsMember.
std::vector<std::string> optimizer_name_list();
// The same, comma separated (for errors and one-line help texts).
std::string optimizer_names();
// One line per optimizer: "adam: <help> (lr 0.001, beta1 0.9, ...)", for --help.
std::string optimizer_help();

// `name` with its defaults overridden by `overrides`; an override the optimizer does not have,
// or a hyper-parameter without default left out, throws pdnn::Error naming it.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, ParamSet& params,
                                          const HyperValues& overrides);
// The --lr shorthand: lr < 0 keeps the optimizer's default learning rate.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, ParamSet& params, float lr);

}  // namespace pdnn
