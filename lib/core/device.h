// Where a tensor's memory lives. Dispatch is on the tensor's device, never a global mode.
#pragma once

namespace pdnn {

enum class Device { CPU, CUDA };

inline const char* device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

}  // namespace pdnn
