// cuDNN opened at run time (cudnn.h).
#include "cuda/cudnn.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace pdnn {
namespace cuda {

#if PDNN_CUDNN_HEADER

void CudnnApi::check(cudnnStatus_t s, const char* what) const {
  if (s != CUDNN_STATUS_SUCCESS)
    PDNN_FAIL("cuDNN: %s failed: %s", what, error_string ? error_string(s) : "?");
}

namespace {

struct Loaded {
  CudnnApi api;
  bool ok = false;
  std::string why;
};

// Where libcudnn.so.9 is looked for: PDNN_CUDNN_LIBRARY, the loader's path, then the CUDA
// toolkit's folders. (A pip wheel's libcudnn.so.9 must be opened by its full path, so that its
// sub-libraries, libcudnn_cnn.so.9 among them, load from beside it.)
Loaded load() {
  Loaded l;
  std::vector<std::string> names;
  if (const char* p = std::getenv("PDNN_CUDNN_LIBRARY")) names.push_back(p);
  names.insert(names.end(), {"libcudnn.so.9", "/usr/local/cuda/lib64/libcudnn.so.9",
                             "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"});
  void* lib = nullptr;
  std::string tried;
  for (const std::string& n : names) {
    if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE))) {
      l.api.path = n;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + n;
  }
  if (!lib) {
    l.why = "no libcudnn.so.9 (tried " + tried + ")";
    return l;
  }
  bool all = true;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) {
      all = false;
      l.why += std::string(l.why.empty() ? "" : ", ") + name;
    }
  };
  decltype(&cudnnGetVersion) version = nullptr;
  get(version, "cudnnGetVersion");
  get(l.api.error_string, "cudnnGetErrorString");
  get(l.api.create, "cudnnCreate");
  get(l.api.destroy, "cudnnDestroy");
  get(l.api.set_stream, "cudnnSetStream");
  get(l.api.create_tensor, "cudnnCreateTensorDescriptor");
  get(l.api.set_tensor, "cudnnSetTensor4dDescriptor");
  get(l.api.destroy_tensor, "cudnnDestroyTensorDescriptor");
  get(l.api.create_filter, "cudnnCreateFilterDescriptor");
  get(l.api.set_filter, "cudnnSetFilter4dDescriptor");
  get(l.api.destroy_filter, "cudnnDestroyFilterDescriptor");
  get(l.api.create_conv, "cudnnCreateConvolutionDescriptor");
  get(l.api.set_conv, "cudnnSetConvolution2dDescriptor");
  get(l.api.set_math, "cudnnSetConvolutionMathType");
  get(l.api.destroy_conv, "cudnnDestroyConvolutionDescriptor");
  get(l.api.fwd_algos, "cudnnFindConvolutionForwardAlgorithm");
  get(l.api.bwd_data_algos, "cudnnFindConvolutionBackwardDataAlgorithm");
  get(l.api.bwd_filter_algos, "cudnnFindConvolutionBackwardFilterAlgorithm");
  get(l.api.fwd_algos_ex, "cudnnFindConvolutionForwardAlgorithmEx");
  get(l.api.bwd_data_algos_ex, "cudnnFindConvolutionBackwardDataAlgorithmEx");
  get(l.api.bwd_filter_algos_ex, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
  get(l.api.fwd_heuristics, "cudnnGetConvolutionForwardAlgorithm_v7");
  get(l.api.bwd_data_heuristics, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  get(l.api.bwd_filter_heuristics, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  get(l.api.fwd_ws, "cudnnGetConvolutionForwardWorkspaceSize");
  get(l.api.bwd_data_ws, "cudnnGetConvolutionBackwardDataWorkspaceSize");
  get(l.api.bwd_filter_ws, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  get(l.api.forward, "cudnnConvolutionForward");
  get(l.api.backward_data, "cudnnConvolutionBackwardData");
  get(l.api.backward_filter, "cudnnConvolutionBackwardFilter");
  if (!all) {
    l.why = l.api.path + " lacks " + l.why;
    return l;
  }
  l.api.version = version();
  if (l.api.version / 10000 != 9) {
    l.why = l.api.path + " is cuDNN " + std::to_string(l.api.version) + ", not 9";
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const CudnnApi* cudnn_api(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;  // the shared library's entry points: loaded once per process
  std::call_once(once, [] { loaded = load(); });
  if (why) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

std::string cudnn_status() {
  std::string why;
  const CudnnApi* a = cudnn_api(&why);
  if (!a) return "cuDNN: not found (" + why + ")";
  char s[96];
  std::snprintf(s, sizeof s, "cuDNN %zu.%zu.%zu (%s)", a->version / 10000, a->version / 100 % 100,
                a->version % 100, a->path.c_str());
  return s;
}

#else

const CudnnApi* cudnn_api(std::string* why) {
  if (why) *why = "this pdnn was built without cudnn.h";
  return nullptr;
}
std::string cudnn_status() { return "cuDNN: not found (built without cudnn.h)"; }

#endif

}  // namespace cuda
}  // namespace pdnn
