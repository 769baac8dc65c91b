// Sequential: the chain, a Model (model/model.h) whose nodes each read the one before (the first
// the model's input), named by their index: parameters "0.weight", profiler rows "3".
#pragma once
#include <memory>
#include <string>
#include <utility>

#include "model/model.h"

namespace pdnn {

class Sequential : public Model {
 public:
  using Model::add;
  Layer& add(std::unique_ptr<Layer> layer) {
    const int before = last_node();
    return add_node(std::to_string(before + 1), std::move(layer), {before});
  }
  template <class L, class... A>
  L& emplace(A&&... args) {
    auto p = std::make_unique<L>(std::forward<A>(args)...);
    L& ref = *p;
    add(std::move(p));
    return ref;
  }
};

}  // namespace pdnn
