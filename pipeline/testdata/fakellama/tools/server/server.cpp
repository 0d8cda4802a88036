#include "llama.h"

#include <cstdio>
#include <cstring>

static const char * greeting = "fake llama-server";

int main(int argc, char ** argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--build-info") == 0) {
            // __DATE__ and __TIME__ come from SOURCE_DATE_EPOCH when it is set
            printf("%s\nbuilt: %s %s\n", llama_print_system_info().c_str(), __DATE__, __TIME__);
            printf("server: %s\n", __FILE__);
            return 0;
        }
    }
    printf("%s: dot(64) = %.1f\n", greeting, llama_dot(64));
    return 0;
}
