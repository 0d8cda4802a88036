#include "ggml.h"

const char * ggml_version(void) { return "0.9.4"; }
