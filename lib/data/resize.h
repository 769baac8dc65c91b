// Image resampling in plain C++, defined as PyTorch's so that scripts/twins/torch_reference.py
// prepares the same pixels:
//   resize_bilinear: torch.nn.functional.interpolate(mode="bilinear", align_corners=False)
//     without antialiasing: output pixel j samples the input at max((j + 0.5) * in/out - 0.5, 0)
//     with edges clamped (upscaling the 28x28 MNIST images to the DCGAN's 64x64);
//   resize_area: interpolate(mode="area") = adaptive average pooling: output pixel j averages
//     input pixels floor(j * in/out) .. ceil((j + 1) * in/out) - 1 (the DCGAN's 64x64 samples
//     scaled back to 28x28 for the classifier that scores them).
// src and dst hold `channels` planes of h x w (oh x ow) floats, row-major (CHW).
#pragma once

namespace pdnn {

void resize_bilinear(int channels, int h, int w, const float* src, int oh, int ow, float* dst);
void resize_area(int channels, int h, int w, const float* src, int oh, int ow, float* dst);

}  // namespace pdnn
