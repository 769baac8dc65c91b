// Whether this binary can use a GPU, and which: for apps that offer --device cuda and for tests
// that skip without one. Safe to call in builds without CUDA (it then says so).
#pragma once
#include <string>

namespace pdnn {

// "" when CUDA kernels can run here, else one line saying why not (no CUDA in this build, no
// GPU, a driver too old for the runtime).
std::string cuda_unavailable_reason();

// e.g. "NVIDIA H100 80GB HBM3, 132 SMs"; "" without a usable GPU.
std::string cuda_device_name();

}  // namespace pdnn
