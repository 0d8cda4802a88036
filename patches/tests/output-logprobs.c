// Checks the libllama API of patches 0005 (llama_set_output_logprobs, llama_set_output_targets,
// llama_get_output_logprob_ith) and 0010 (llama_get_output_logprobs) against the logits on the host, on a model given on the
// command line, and whether a decode without targets leaves 0005's nodes out of the graph (patch
// 0014, "lean") or computes them ("full": a build without 0014). Built and run by
// patches/output_logprobs_test.go (TestOutputLogprobsAPI); exits 0 when every check passes, 1
// otherwise, printing one line per check.
//
// The batch is two sequences of n tokens each (so that outputs of two sequences share the
// ubatches), every token an output; the ubatch is small so that one decode spans several.
// Pass 1 decodes with the next token of the sequence as target at every other position and
// none elsewhere; pass 2 decodes the same batch with no targets and computes the log softmax
// of the target and the most probable token from the logits on the host. The two must agree.
// Pass 3 repeats pass 1 after pass 2's decode without targets, pass 4 sets targets in the first
// ubatch only: both must give pass 1's numbers, and the outputs without a target their logits.
// Pass 5 decodes single tokens, the shape graphs are reused for, with a target at two steps.
// An eval callback counts the nodes named "logprob" and "logprob_top" each decode computes, and
// llama_free's warning of a compute buffer grown past the reservation is counted.

#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static void check(int ok, const char * what) {
    printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        failures++;
    }
}

// compute buffers that grew past what the context reserved (llama_free warns of each)
static int buffers_grown = 0;

static void quiet(enum ggml_log_level level, const char * text, void * user) {
    (void) user;
    if (strstr(text, "does not match expectation")) {
        buffers_grown++;
        fputs(text, stdout);
    }
    if (level == GGML_LOG_LEVEL_ERROR && getenv("SHOW_ERRORS")) {
        fputs(text, stderr);
    }
}

// log softmax of logits at token t, and the most probable token with its log softmax
static double host_logprob(const float * logits, int n_vocab, int t, int * top, double * top_lp) {
    int imax = 0;
    for (int i = 1; i < n_vocab; i++) {
        if (logits[i] > logits[imax]) {
            imax = i;
        }
    }
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) {
        sum += exp((double) logits[i] - logits[imax]);
    }
    *top    = imax;
    *top_lp = -log(sum);
    return (double) logits[t] - logits[imax] - log(sum);
}

// the graph's log probability nodes ("logprob", "logprob_top") that a decode computed
static int logprob_nodes = 0;

static bool count_logprob_nodes(struct ggml_tensor * t, bool ask, void * user) {
    (void) user;
    if (ask && strncmp(ggml_get_name(t), "logprob", 7) == 0) {
        logprob_nodes++;
    }
    return false; // no tensor's data is wanted
}

static void fill(struct llama_batch * b, const llama_token * toks, int n) {
    b->n_tokens = 0;
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < n; i++) {
            const int k = b->n_tokens++;
            b->token[k]     = toks[s*n + i];
            b->pos[k]       = i;
            b->n_seq_id[k]  = 1;
            b->seq_id[k][0] = s;
            b->logits[k]    = 1;
        }
    }
}

int main(int argc, char ** argv) {
    if (argc != 3 || (strcmp(argv[2], "lean") != 0 && strcmp(argv[2], "full") != 0)) {
        fprintf(stderr, "usage: %s MODEL.gguf lean|full (lean: the build has patch 0014)\n", argv[0]);
        return 2;
    }
    const bool lean = strcmp(argv[2], "lean") == 0;
    llama_log_set(quiet, NULL);
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 2;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    const int n = 40; // tokens per sequence
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx      = 256;
    cp.n_batch    = 2*n;
    cp.n_ubatch   = 16;
    cp.n_seq_max  = 2;
    cp.n_threads  = 2;
    cp.n_threads_batch = 2;
    cp.cb_eval = count_logprob_nodes;
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 2;
    }

    llama_token toks[2*40];
    srand(7);
    for (int i = 0; i < 2*n; i++) {
        toks[i] = 1 + rand() % (n_vocab - 1);
    }
    // the target of output i (batch order) is the next token of its sequence, at even positions
    llama_token targets[2*40];
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < n; i++) {
            targets[s*n + i] = (i % 2 == 0 && i + 1 < n) ? toks[s*n + i + 1] : -1;
        }
    }

    struct llama_batch b = llama_batch_init(2*n, 0, 1);
    fill(&b, toks, n);

    // errors: targets without the option, a wrong count, a token outside the vocabulary
    llama_set_output_targets(ctx, targets, 2*n);
    check(llama_decode(ctx, b) == -1, "targets without llama_set_output_logprobs: decode returns -1");
    llama_memory_clear(llama_get_memory(ctx), true);

    llama_set_output_logprobs(ctx, true);
    llama_set_output_targets(ctx, targets, 2*n - 1);
    check(llama_decode(ctx, b) == -1, "a target count other than the batch's: decode returns -1");
    llama_memory_clear(llama_get_memory(ctx), true);

    llama_token bad[2*40];
    memcpy(bad, targets, sizeof(bad));
    bad[3] = n_vocab;
    llama_set_output_targets(ctx, bad, 2*n);
    check(llama_decode(ctx, b) == -1, "a target outside the vocabulary: decode returns -1");
    llama_memory_clear(llama_get_memory(ctx), true);

    // pass 1: targets at even positions
    llama_set_output_targets(ctx, targets, 2*n);
    check(llama_decode(ctx, b) == 0, "decode with targets");
    float lp[2*40], lp_top[2*40];
    llama_token top[2*40];
    int n_with = 0, n_logits_ok = 0, n_null = 0, n_false = 0;
    float * kept[2*40] = { 0 };
    for (int i = 0; i < 2*n; i++) {
        const bool got = llama_get_output_logprob_ith(ctx, i, &lp[i], &top[i], &lp_top[i]);
        const float * row = llama_get_logits_ith(ctx, i);
        if (targets[i] >= 0) {
            n_with += got;
            n_null += row == NULL;
        } else {
            n_false += !got;
            if (row) {
                n_logits_ok++;
                kept[i] = malloc(sizeof(float)*n_vocab);
                memcpy(kept[i], row, sizeof(float)*n_vocab);
            }
        }
    }
    int n_targets = 0;
    for (int i = 0; i < 2*n; i++) {
        n_targets += targets[i] >= 0;
    }
    check(n_with == n_targets, "llama_get_output_logprob_ith answers for every output with a target");
    check(n_null == n_targets, "llama_get_logits_ith is NULL for every output with a target");
    check(n_false == 2*n - n_targets, "llama_get_output_logprob_ith is false for outputs without a target");
    check(n_logits_ok == 2*n - n_targets, "outputs without a target keep their logits");

    // patch 0010: all outputs at once, with one synchronization, give the same numbers
    {
        int32_t ids[2*40];
        float b_lp[2*40], b_lp_top[2*40];
        llama_token b_top[2*40];
        for (int i = 0; i < 2*n; i++) {
            ids[i] = 2*n - 1 - i; // any order
        }
        const bool ok = llama_get_output_logprobs(ctx, ids, 2*n, b_lp, b_top, b_lp_top);
        int same = 0, none = 0;
        for (int k = 0; ok && k < 2*n; k++) {
            const int i = ids[k];
            if (targets[i] >= 0) {
                same += b_lp[k] == lp[i] && b_top[k] == top[i] && b_lp_top[k] == lp_top[i];
            } else {
                none += b_top[k] == -1 && b_lp[k] == 0.0f && b_lp_top[k] == 0.0f;
            }
        }
        check(ok, "llama_get_output_logprobs answers for every output");
        check(same == n_targets, "llama_get_output_logprobs gives llama_get_output_logprob_ith's numbers for every output with a target");
        check(none == 2*n - n_targets, "llama_get_output_logprobs gives top -1 for outputs without a target");
        int32_t bad_ids[2] = { 0, 2*n };
        check(!llama_get_output_logprobs(ctx, bad_ids, 2, b_lp, b_top, b_lp_top), "llama_get_output_logprobs refuses an id outside the batch");
    }

    // the next decode has no targets unless they are set again
    llama_memory_clear(llama_get_memory(ctx), true);
    logprob_nodes = 0;
    check(llama_decode(ctx, b) == 0, "decode without targets");
    const int nodes_without_targets = logprob_nodes;
    double worst = 0.0, worst_kept = 0.0;
    int top_same = 0;
    for (int i = 0; i < 2*n; i++) {
        const float * row = llama_get_logits_ith(ctx, i);
        if (!row) {
            check(0, "logits of every output after a decode without targets");
            break;
        }
        if (kept[i]) {
            for (int k = 0; k < n_vocab; k++) {
                worst_kept = fmax(worst_kept, fabs(kept[i][k] - row[k]));
            }
            free(kept[i]);
        }
        if (targets[i] < 0) {
            continue;
        }
        int t; double t_lp;
        const double want = host_logprob(row, n_vocab, targets[i], &t, &t_lp);
        worst = fmax(worst, fabs(want - lp[i]));
        worst = fmax(worst, fabs(t_lp - lp_top[i]));
        top_same += t == top[i];
    }
    printf("      %d outputs with a target, largest difference to the host's log softmax %.2g\n", n_targets, worst);
    check(worst < 1e-4, "graph and host log probabilities agree within 1e-4");
    check(top_same == n_targets, "the most probable token agrees with the host's");
    printf("      outputs without a target: largest logit difference between the passes %.2g\n", worst_kept);
    check(worst_kept < 1e-4, "kept logits are those of a decode without targets");

    // pass 3: targets again after a decode without them (a graph built, or reused, without the
    // nodes where patch 0014 leaves them out) give pass 1's numbers
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_set_output_targets(ctx, targets, 2*n);
    logprob_nodes = 0;
    check(llama_decode(ctx, b) == 0, "decode with targets after one without");
    check(logprob_nodes > 0, "a decode with targets computes the log probability nodes");
    const int nodes_all_ubatches = logprob_nodes; // every ubatch of pass 3 has a target
    int again = 0;
    for (int i = 0; i < 2*n; i++) {
        float l, lt;
        llama_token t;
        if (targets[i] >= 0 && llama_get_output_logprob_ith(ctx, i, &l, &t, &lt)) {
            again += fabs(l - lp[i]) < 1e-6 && t == top[i] && fabs(lt - lp_top[i]) < 1e-6;
        }
    }
    check(again == n_targets, "targets after a decode without them give the first pass's numbers");

    // pass 4: targets in the first sequence's first 8 positions only, so that later ubatches
    // (16 tokens each) have none: each ubatch takes its own graph, and the outputs of the
    // ubatches without a target keep their logits
    llama_token few[2*40];
    for (int i = 0; i < 2*n; i++) {
        few[i] = i < 8 ? targets[i] : -1;
    }
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_set_output_targets(ctx, few, 2*n);
    logprob_nodes = 0;
    check(llama_decode(ctx, b) == 0, "decode with targets in the first ubatch only");
    const int nodes_few = logprob_nodes;
    int few_same = 0, few_targets = 0, few_logits = 0;
    for (int i = 0; i < 2*n; i++) {
        float l, lt;
        llama_token t;
        if (few[i] >= 0) {
            few_targets++;
            few_same += llama_get_output_logprob_ith(ctx, i, &l, &t, &lt) && fabs(l - lp[i]) < 1e-6 && t == top[i];
        } else {
            few_logits += llama_get_logits_ith(ctx, i) != NULL;
        }
    }
    check(few_same == few_targets, "targets in one ubatch give the first pass's numbers");
    check(few_logits == 2*n - few_targets, "the outputs of ubatches without a target keep their logits");

    // pass 5: generation, one token a decode, the shape a graph is reused for: with targets
    // between steps without, the graph must follow (a graph without the nodes reused for a step
    // with a target would give no log probability; one with them, reused for a step without,
    // would compute them)
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_perf_context_reset(ctx);
    int step_nodes[6], step_ok = 1;
    const llama_token step_target[6] = { -1, -1, 5, -1, -1, 7 };
    for (int k = 0; k < 6; k++) {
        struct llama_batch one = llama_batch_init(1, 0, 1);
        one.n_tokens = 1;
        one.token[0] = toks[k];
        one.pos[0] = k;
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        if (step_target[k] >= 0) {
            llama_set_output_targets(ctx, &step_target[k], 1);
        }
        logprob_nodes = 0;
        step_ok &= llama_decode(ctx, one) == 0;
        step_nodes[k] = logprob_nodes;
        float l, lt;
        llama_token t;
        const bool got = llama_get_output_logprob_ith(ctx, 0, &l, &t, &lt);
        if (step_target[k] >= 0) {
            // a log probability (the values themselves are passes 1-4's to check), a token of the vocabulary
            step_ok &= got && isfinite(l) && l <= 0.0f && t >= 0 && t < n_vocab;
        } else {
            step_ok &= !got && llama_get_logits_ith(ctx, 0) != NULL;
        }
        llama_batch_free(one);
    }
    const int reused = llama_perf_context(ctx).n_reused;
    check(step_ok, "single-token steps with and without a target: log probabilities where a target was set, logits elsewhere");
    printf("      graphs reused over the 6 steps: %d\n", reused);
    check(reused >= 2, "the steps reuse graphs (so that the reuse check is what pass 5 tests)");

    // patch 0014: a decode without targets (a generated token, a draft's verification) computes
    // none of the nodes, and a decode whose targets lie in one of its ubatches computes them for
    // that one only; without it every decode of a context with the option on pays for them in
    // every ubatch. The caller says which build this is (argv[2]: lean with 0014, full without)
    printf("      log probability nodes computed by the decode without targets: %d; with targets in every ubatch: %d; in the first only: %d\n",
        nodes_without_targets, nodes_all_ubatches, nodes_few);
    printf("      nodes by single-token step (targets at steps 2 and 5): %d %d %d %d %d %d\n",
        step_nodes[0], step_nodes[1], step_nodes[2], step_nodes[3], step_nodes[4], step_nodes[5]);
    if (lean) {
        check(nodes_without_targets == 0, "a decode without targets computes no log probability nodes (0014)");
        check(nodes_few > 0 && nodes_few < nodes_all_ubatches, "targets in one ubatch: the nodes in that ubatch's graph only (0014)");
        check(step_nodes[2] > 0 && step_nodes[5] > 0 && step_nodes[0] + step_nodes[1] + step_nodes[3] + step_nodes[4] == 0,
            "single-token steps: the nodes exactly in the steps with a target (0014)");
    } else {
        check(nodes_without_targets > 0, "a decode without targets computes the log probability nodes (a build without 0014)");
        check(nodes_few == nodes_all_ubatches, "targets in one ubatch: the nodes in every ubatch's graph (a build without 0014)");
    }

    llama_batch_free(b);
    llama_free(ctx);
    // llama_free warns where a compute buffer grew past the reservation: a graph larger than the
    // reserved one (the log probability nodes left out of the reservation) would show here
    check(buffers_grown == 0, "no compute buffer grew past what the context reserved");
    llama_model_free(model);
    llama_backend_free();

    printf("%s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
