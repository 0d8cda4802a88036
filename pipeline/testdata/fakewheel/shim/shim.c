/* The C names llama_cpp.py binds, forwarding to the C++ functions of fakellama's llama.h. */
float fake_llama_dot_cpp(int n);
const char * fake_llama_info_cpp(void);

float llama_dot(int n) { return fake_llama_dot_cpp(n); }
const char * llama_print_system_info(void) { return fake_llama_info_cpp(); }
