#include "ggml.h"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

// The widest vectors the build allows, as ggml's kernels do: zmm with AVX-512, ymm with AVX2.
void ggml_vec_dot_f32(int n, float * s, const float * x, const float * y) {
    float sum = 0.0f;
    int i = 0;
#if defined(__AVX512F__)
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    }
    sum += _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__)
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
#if defined(__FMA__)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
#else
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    for (int k = 0; k < 8; k++) {
        sum += lanes[k];
    }
#endif
    for (; i < n; i++) {
        sum += x[i] * y[i];
    }
    *s = sum;
}
