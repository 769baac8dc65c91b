// Factories for the CUDA allocators (lib/cuda/allocator.cpp says how they work). CUDA builds
// only; no CUDA header needed to include this.
#pragma once
#include <memory>

#include "core/allocator.h"

namespace pdnn {

// Device memory with a cache of freed blocks (no cudaMalloc once a loop has warmed up).
std::shared_ptr<Allocator> make_cuda_caching_allocator(int device);
// Page-locked host memory (cudaMallocHost).
std::shared_ptr<Allocator> make_cuda_pinned_allocator();

}  // namespace pdnn
