#include "llama.h"
#include "ggml.h"

#include <vector>

std::string llama_print_system_info() {
    return std::string("version: ") + std::to_string(LLAMA_BUILD_NUMBER) + " (" + LLAMA_BUILD_COMMIT + ")\n" +
           "ggml " + ggml_version() + "\n" + ggml_cpu_build_info();
}

float llama_dot(int n) {
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    float s = 0;
    ggml_vec_dot_f32(n, &s, x.data(), y.data());
    return s;
}
