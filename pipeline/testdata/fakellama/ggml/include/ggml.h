#pragma once
#ifdef __cplusplus
extern "C" {
#endif
const char * ggml_version(void);
const char * ggml_cpu_build_info(void);
void ggml_vec_dot_f32(int n, float * s, const float * x, const float * y);
#ifdef __cplusplus
}
#endif
