// The optimizer table (see registry.h). The defaults here are PyTorch 1.13's, the same as the
// constructors' default arguments; Optim.RegistryDefaultsMatchConstructors checks they agree.
#include "optim/registry.h"

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "optim/adadelta.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace pdnn {

namespace {

std::unique_ptr<Optimizer> make_sgd(ParamSet& ps, const HyperValues& h) {
  return std::make_unique<Sgd>(ps, h.at("lr"), h.at("momentum"), h.at("weight_decay"),
                               h.at("dampening"), h.at("nesterov") != 0);
}

std::unique_ptr<Optimizer> make_adagrad(ParamSet& ps, const HyperValues& h) {
  return std::make_unique<Adagrad>(ps, h.at("lr"), h.at("lr_decay"), h.at("weight_decay"),
                                   h.at("initial_accumulator_value"), h.at("eps"));
}

std::unique_ptr<Optimizer> make_adadelta(ParamSet& ps, const HyperValues& h) {
  return std::make_unique<Adadelta>(ps, h.at("lr"), h.at("rho"), h.at("eps"),
                                    h.at("weight_decay"));
}

std::unique_ptr<Optimizer> make_adam(ParamSet& ps, const HyperValues& h) {
  return std::make_unique<Adam>(ps, h.at("lr"), h.at("beta1"), h.at("beta2"), h.at("eps"),
                                h.at("weight_decay"));
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

const std::vector<OptimizerEntry>& optimizer_registry() {
  static const std::vector<OptimizerEntry> table = {
      {"sgd", "SGD with momentum, dampening, Nesterov (nesterov 1) and weight decay",
       {{"lr", kNoDefault}, {"momentum", 0}, {"weight_decay", 0}, {"dampening", 0},
        {"nesterov", 0}},
       make_sgd},
      {"adagrad", "AdaGrad (W4's)",
       {{"lr", 1e-2}, {"lr_decay", 0}, {"weight_decay", 0}, {"initial_accumulator_value", 0},
        {"eps", 1e-10}},
       make_adagrad},
      {"adadelta", "Adadelta (W3 sets rho 0.95)",
       {{"lr", 1.0}, {"rho", 0.9}, {"eps", 1e-6}, {"weight_decay", 0}},
       make_adadelta},
      {"adam", "Adam (W2's and W5's)",
       {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0}},
       make_adam},
  };
  return table;
}

std::vector<std::string> optimizer_name_list() {
  std::vector<std::string> v;
  for (const auto& e : optimizer_registry()) v.push_back(e.name);
  return v;
}

std::string optimizer_names() { return join(optimizer_name_list()); }

const OptimizerEntry& optimizer_entry(const std::string& name) {
  for (const auto& e : optimizer_registry())
    if (name == e.name) return e;
  PDNN_FAIL("unknown optimizer '%s' (known: %s)", name.c_str(), optimizer_names().c_str());
}

std::string optimizer_help() {
  std::string s;
  for (const auto& e : optimizer_registry()) {
    std::vector<std::string> hp;
    for (const auto& p : e.params) {
      char buf[64];
      if (std::isnan(p.value))
        std::snprintf(buf, sizeof buf, "%s required", p.name);
      else
        std::snprintf(buf, sizeof buf, "%s %g", p.name, p.value);
      hp.push_back(buf);
    }
    s += std::string(s.empty() ? "" : "\n") + e.name + ": " + e.help + " (" + join(hp) + ")";
  }
  return s;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, ParamSet& params,
                                          const HyperValues& overrides) {
  const OptimizerEntry& e = optimizer_entry(name);
  HyperValues h;
  for (const auto& p : e.params) h[p.name] = p.value;
  for (const auto& [k, v] : overrides) {
    PDNN_CHECK(h.count(k), "optimizer %s: no hyper-parameter '%s'", e.name, k.c_str());
    h[k] = v;
  }
  for (const auto& p : e.params)
    PDNN_CHECK(!std::isnan(h[p.name]),
               "optimizer %s: %s has no default (PyTorch requires one); give one%s", e.name,
               p.name, std::string(p.name) == "lr" ? " (--lr)" : "");
  return e.make(params, h);
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, ParamSet& params, float lr) {
  HyperValues overrides;
  if (lr >= 0.f) overrides["lr"] = lr;
  return make_optimizer(name, params, overrides);
}

}  // namespace pdnn
