// The model zoo (workloads/model_zoo.h): every entry builds a classifier of the advertised
// output shape whose feature layer is the last hidden ReLU, SPEC.md's optimizer comes with the
// SPEC's hyper-parameters (W3's Adadelta rho 0.95, bit for bit the constructor's), and unknown
// names fail naming the known ones.
#include <set>
#include <string>

#include "optim/adadelta.h"
#include "testing.h"
#include "workloads/model_zoo.h"

namespace pdnn {

TEST(ModelZoo, EveryClassifierBuildsWithItsFeatureLayer) {
  std::set<std::string> names;
  for (const ClassifierModel& m : classifier_models()) {
    SCOPED_TRACE(m.name);
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate name";
    const int64_t side = std::string(m.app) == "caltech101" ? 32 : 28;
    Sequential net = m.build(side, 7);
    EXPECT_EQ(net.output_shape(Shape{2, std::string(m.app) == "caltech101" ? 3 : 1, side, side}),
              (Shape{2, 7}));
    ASSERT_LT(m.feature_layer + 1, net.size());
    EXPECT_EQ(net.layer(m.feature_layer).kind(), "ReLU");
    for (size_t i = m.feature_layer + 1; i < net.size(); ++i)
      EXPECT_NE(net.layer(i).kind(), "ReLU") << "layer " << i << " is a later ReLU";
    optimizer_entry(m.optimizer);  // a registered optimizer
    EXPECT_GT(m.batch, 0);
  }
  EXPECT_EQ(classifier_model_names("mnist"), (std::vector<std::string>{"small", "keras"}));
  EXPECT_EQ(classifier_model_names("caltech101"),
            (std::vector<std::string>{"caltech9", "photo64"}));
  EXPECT_EQ(gan_model("dcgan").generator(DcganConfig{}).size(), 14u);
}

TEST(ModelZoo, SpecOptimizersAndErrors) {
  const ClassifierModel& keras = classifier_model("keras");
  Sequential a = keras.build(28, 10), b = keras.build(28, 10);
  Context ctx(1, 5);
  a.reset_parameters(ctx.rng());
  Context ctx2(1, 5);
  b.reset_parameters(ctx2.rng());
  auto by_zoo = make_model_optimizer("keras", "", a.parameters(), -1.f);
  Adadelta direct(b.parameters(), 1.0, 0.95, 1e-6);
  EXPECT_EQ(by_zoo->kind(), "adadelta");
  for (int s = 0; s < 2; ++s) {
    for (ParamSet* ps : {&a.parameters(), &b.parameters()})
      for (int64_t i = 0; i < ps->grads().numel(); ++i)
        ps->grads()[i] = 0.01f * static_cast<float>((i * 7 + s) % 13) - 0.06f;
    by_zoo->step(ctx);
    direct.step(ctx2);
  }
  for (int64_t i = 0; i < a.parameters().values().numel(); ++i)
    ASSERT_EQ(a.parameters().values()[i], b.parameters().values()[i]) << "element " << i;
  // Another optimizer than the model's own: PyTorch's defaults, not the model's departures.
  EXPECT_EQ(make_model_optimizer("keras", "adam", a.parameters(), -1.f)->lr(), 1e-3f);
  EXPECT_EQ(make_model_optimizer("keras", "", a.parameters(), 0.5f)->lr(), 0.5f);
  EXPECT_EQ(model_optimizer_name("small"), "adam");
  EXPECT_EQ(model_optimizer_name("caltech9", "sgd"), "sgd");
  testing::expect_error_mentions([] { classifier_model("resnet"); },
                                 {"resnet", "small", "keras", "caltech9"});
  testing::expect_error_mentions([] { classifier_model("caltech9", "mnist"); },
                                 {"caltech9", "small, keras"});
  testing::expect_error_mentions([] { gan_model("stylegan"); }, {"stylegan", "dcgan"});
}

}  // namespace pdnn
