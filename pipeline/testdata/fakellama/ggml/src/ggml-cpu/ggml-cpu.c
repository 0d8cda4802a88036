#include "ggml.h"

// What reached the compiler: the CMake options ggml saw, the flags it added, and the ISA
// macros the compiler then defined.
const char * ggml_cpu_build_info(void) {
    return "options: " GGML_BUILD_OPTIONS "\n"
           "flags: " GGML_BUILD_FLAGS "\n"
           "isa:"
#ifdef __SSE4_2__
           " SSE42"
#endif
#ifdef __AVX__
           " AVX"
#endif
#ifdef __AVX2__
           " AVX2"
#endif
#ifdef __FMA__
           " FMA"
#endif
#ifdef __F16C__
           " F16C"
#endif
#ifdef __BMI2__
           " BMI2"
#endif
#ifdef __AVXVNNI__
           " AVX_VNNI"
#endif
#ifdef __AVX512F__
           " AVX512"
#endif
#ifdef __AVX512VBMI__
           " AVX512_VBMI"
#endif
#ifdef __AVX512VNNI__
           " AVX512_VNNI"
#endif
           "\n"
           "file: " __FILE__ "\n";
}
