// ClassifierTrainer: one training step of a classifier, the sequence every app and test repeats:
// forward, softmax cross-entropy, zero_grad, backward, optimizer update (the update timed per
// layer when a profiler is attached). Owns the loss and its gradient buffer.
#pragma once
#include <cstdint>

#include "data/idx.h"
#include "losses/softmax_cross_entropy.h"
#include "model/sequential.h"
#include "optim/optimizer.h"

namespace pdnn {

class ClassifierTrainer {
 public:
  // `opt` must have been built over model.params(); both must outlive the trainer.
  ClassifierTrainer(Sequential& model, Optimizer& opt) : model_(model), opt_(opt) {}
  // One step on a batch; returns the batch's mean loss. labels: x.shape(0) values.
  float step(Context& ctx, const Tensor& x, const int32_t* labels);
  // The logits of the last step (valid until the model's next forward).
  const Tensor& logits() const { return *logits_; }

 private:
  Sequential& model_;
  Optimizer& opt_;
  SoftmaxCrossEntropy loss_;
  Tensor dlogits_;
  const Tensor* logits_ = nullptr;
};

struct EvalResult {
  double loss = 0, acc = 0;
};

// Mean softmax cross-entropy and accuracy over a whole split, in stored order, in evaluation
// mode (the model is put back in training mode afterwards).
EvalResult evaluate_classifier(Context& ctx, Sequential& model, const LabeledImages& data,
                               int64_t batch);

}  // namespace pdnn
