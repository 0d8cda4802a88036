#include "llama.h"
#include "ggml.h"

#include <vector>

#ifdef GGML_USE_CUDA
extern "C" const char * ggml_cuda_info(void);
#endif

std::string llama_print_system_info() {
    return std::string("version: ") + std::to_string(LLAMA_BUILD_NUMBER) + " (" + LLAMA_BUILD_COMMIT + ")\n" +
           "ggml " + ggml_version() + "\n" + ggml_cpu_build_info()
#ifdef GGML_USE_CUDA
           + ggml_cuda_info() + "\n"
#endif
           ;
}

float llama_dot(int n) {
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    float s = 0;
    ggml_vec_dot_f32(n, &s, x.data(), y.data());
    return s;
}
