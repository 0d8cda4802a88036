#pragma once
#include <string>
std::string llama_print_system_info();
float llama_dot(int n);
