#include "llama.h"

int llama_common_answer() { return 42; }
