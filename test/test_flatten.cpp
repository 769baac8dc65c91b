// Flatten: shape rule, copy forward and backward, errors.
#include "core/error.h"
#include "layers/flatten.h"
#include "testing.h"

using namespace pdnn;
namespace pt = pdnn::testing;

TEST(Flatten, ForwardCopiesAndReshapes) {
  Context ctx(1);
  Rng rng(1);
  Flatten f;
  Tensor x = pt::random_tensor(Shape{3, 2, 4, 5}, rng);
  EXPECT_EQ(f.output_shape(x.shape()), (Shape{3, 40}));
  EXPECT_EQ(f.output_shape(Shape{3, 7}), (Shape{3, 7}));
  Tensor y(f.output_shape(x.shape()));
  f.forward(ctx, x, y);
  EXPECT_NE(y.data(), x.data());
  pt::expect_close(y, x.reshape(y.shape()), 0, 0, "flatten forward");
}

TEST(Flatten, Gradients) {
  Context ctx(1);
  Rng rng(2);
  Flatten f;
  for (const Shape& s : {Shape{1, 1, 1, 1}, Shape{2, 3, 5, 7}, Shape{4, 6}})
    pt::check_layer_gradients(ctx, f, pt::random_tensor(s, rng));
}

TEST(Flatten, Errors) {
  Context ctx(1);
  Flatten f;
  EXPECT_THROW(f.output_shape(Shape{5}), Error);
  Tensor x(Shape{2, 3, 2, 2}), y(Shape{2, 13});
  EXPECT_THROW(f.forward(ctx, x, y), Error);
}
