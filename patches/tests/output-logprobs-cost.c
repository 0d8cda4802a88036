// What llama_set_output_logprobs() costs a decode step without targets (a generated token):
// the same context decodes single tokens with the option off and on, alternating which goes
// first from round to round, and prints one line per round with the two medians. With the
// series' 0005 every decode graph of a context with the option on carries an argmax and a
// softmax over the vocabulary; with 0014 only a ubatch with a target does. Run by
// patches/output_logprobs_test.go (BenchmarkOutputLogprobsOnWithoutTargets), which judges the
// rounds' on/off ratios with bench's judge.
//
//   output-logprobs-cost MODEL.gguf ROUNDS STEPS THREADS [GPU_LAYERS]
//
// (GPU_LAYERS, default 0: the layers offloaded to a GPU backend where the build has one)
//
// Output: "round R off NS on NS" (median ns per decode step of STEPS), then "done".

#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void quiet(enum ggml_log_level level, const char * text, void * user) {
    (void) level; (void) text; (void) user;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

static int cmp(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// median ns of steps single-token decodes after a few untimed ones (the first after the option
// changed reserves the scheduler again)
static double run(struct llama_context * ctx, struct llama_batch * b, int steps, int n_vocab, double * t) {
    llama_memory_clear(llama_get_memory(ctx), true);
    for (int i = 0; i < steps + 4; i++) {
        b->n_tokens     = 1;
        b->token[0]     = 1 + (i * 7919) % (n_vocab - 1);
        b->pos[0]       = i;
        b->n_seq_id[0]  = 1;
        b->seq_id[0][0] = 0;
        b->logits[0]    = 1;
        const double t0 = now_ns();
        if (llama_decode(ctx, *b) != 0) {
            return -1;
        }
        llama_synchronize(ctx);
        if (llama_get_logits_ith(ctx, 0) == NULL) { // a generated token's logits, as a server reads them
            return -1;
        }
        if (i >= 4) {
            t[i - 4] = now_ns() - t0;
        }
    }
    qsort(t, steps, sizeof(double), cmp);
    return t[steps / 2];
}

int main(int argc, char ** argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s MODEL.gguf ROUNDS STEPS THREADS [GPU_LAYERS]\n", argv[0]);
        return 2;
    }
    const int rounds = atoi(argv[2]), steps = atoi(argv[3]), threads = atoi(argv[4]);
    const int ngl = argc == 6 ? atoi(argv[5]) : 0;
    if (rounds < 1 || steps < 1 || threads < 1 || ngl < 0) {
        fprintf(stderr, "ROUNDS, STEPS and THREADS must be positive, GPU_LAYERS not negative\n");
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = ngl;
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 2;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = steps + 16;
    cp.n_batch         = 64;
    cp.n_ubatch        = 64;
    cp.n_seq_max       = 1;
    cp.n_threads       = threads;
    cp.n_threads_batch = threads;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 2;
    }
    struct llama_batch b = llama_batch_init(1, 0, 1);
    double * t = malloc(sizeof(double) * (size_t) steps);
    for (int r = 0; r < rounds; r++) {
        double ns[2];
        for (int k = 0; k < 2; k++) {
            const int on = (r + k) % 2; // alternate which goes first
            llama_set_output_logprobs(ctx, on);
            ns[on] = run(ctx, &b, steps, n_vocab, t);
            if (ns[on] < 0) {
                fprintf(stderr, "decode failed\n");
                return 1;
            }
        }
        printf("round %d off %.0f on %.0f\n", r, ns[0], ns[1]);
        fflush(stdout);
    }
    printf("done\n");
    free(t);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
