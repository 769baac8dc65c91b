// How good a generator's samples are, judged by a classifier trained on the real data (the
// analogues of the Inception score and the FID, with a pdnn classifier in Inception's place:
// W3 for MNIST and Fashion-MNIST, the photo judge "photo64" of the model zoo for the Caltech
// photos):
//   class_scores: from the classifier's softmax p(y|x) of each sample: the entropy (nats) of
//     the predicted-class histogram (ln 10 = 2.303 when every class is generated equally
//     often; low: few classes, mode collapse), the mean confidence max_y p(y|x) (high: samples
//     the classifier finds clear), the Inception-score analogue exp(mean KL(p(y|x) || p(y)))
//     (1 to the number of classes: both at once), and the smallest class's share of the
//     predictions.
//   frechet_distance: between Gaussians fitted to two sets of features (the classifier's
//     penultimate layer), |mu1 - mu2|^2 + tr(S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2): 0 for the
//     same distribution. The matrix square roots are of symmetric positive semi-definite
//     matrices, computed in double by LAPACK's dsyevd eigen-decomposition (eigenvalues that
//     rounding makes slightly negative are taken as 0).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/context.h"
#include "data/idx.h"
#include "model/model.h"

namespace pdnn {

// A symmetric n x n matrix (row-major, double) = V diag(values) V^T; V's columns are the
// orthonormal eigenvectors, values ascending (LAPACK's dsyevd, divide and conquer). A matrix
// that is not symmetric to 1e-9 relative throws pdnn::Error.
void symmetric_eigen(const std::vector<double>& a, int64_t n, std::vector<double>* values,
                     std::vector<double>* vectors);
// The symmetric square root of a symmetric positive semi-definite matrix.
std::vector<double> sqrt_psd(const std::vector<double>& a, int64_t n);

struct Gaussian {
  int64_t dim = 0, count = 0;
  std::vector<double> mean, cov;  // cov: dim x dim, divided by count - 1 (as numpy's np.cov)
};
// features: count x dim, row-major.
Gaussian fit_gaussian(const std::vector<float>& features, int64_t count, int64_t dim);
double frechet_distance(const Gaussian& a, const Gaussian& b);

struct ClassScores {
  double class_entropy = 0, mean_confidence = 0, inception_score = 0, min_class_fraction = 0;
  std::vector<double> fractions;  // of the predictions (argmax) per class
};
// probs: count x classes softmax outputs.
ClassScores class_scores(const std::vector<float>& probs, int64_t count, int64_t classes);

// What a classifier makes of a set of images: its softmax outputs and the output of one of its
// layers (the penultimate: the features of the Fréchet distance), computed in evaluation
// mode on the model's device, in batches.
struct Classified {
  int64_t count = 0, classes = 0, dim = 0;
  std::vector<float> probs, features;
};
// images: host (N,C,H,W) float32 as the classifier was trained on (values in [0,1]).
Classified classify(Context& ctx, Model& model, size_t feature_layer, const Tensor& images,
                    int64_t batch = 250);

// The images of an IDX file (any size, e.g. the DCGAN's 64x64 grey samples) as the W3
// classifier's input: bytes / 255, each averaged down (or copied) to side x side as PyTorch's
// interpolate(mode="area") does (data/resize.h). (N,1,side,side).
Tensor classifier_input(const IdxImages& images, int side);
// The images of a colour IDX file (the DCGAN's samples of photos, N x 3 x H x W bytes, and the
// real photos as the dcgan app caches them) as the photo judge's input: (b / 255 - 0.5) / 0.5,
// the [-1, 1] of the dcgan app's photos and of the judge's training (caltech101 --normalize
// half). (N,3,H,W); a grey file is refused, naming `what`.
Tensor photo_input(const IdxImages& images, const std::string& what);
// Real images (N,1,h,w) in [0,1] through the path the DCGAN's samples take: upscaled to
// `up` x `up` (bilinear, as the training data), stored as bytes (rounded), then
// classifier_input(side). So real and generated images are scored alike.
Tensor real_through_sample_path(const Tensor& images, int up, int side);

}  // namespace pdnn
