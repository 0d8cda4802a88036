#include "llama.h"

#include <string>

extern "C" float fake_llama_dot_cpp(int n) { return llama_dot(n); }

extern "C" const char * fake_llama_info_cpp(void) {
    static const std::string info = llama_print_system_info();
    return info.c_str();
}
