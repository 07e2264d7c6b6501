// llama.cpp as a reference engine for the family twin tests (tests/it/families.rs): loads a GGUF file, evaluates
// the given token ids in one batch with logits at every position, then continues greedily for N_GEN tokens,
// feeding each chosen token back. CPU only, fixed threads, F32 KV cache (no cache rounding in the reference),
// argmax with the lowest id on ties: no randomness anywhere.
//
//   llama-reference [-t THREADS] [-c N_CTX] MODEL.gguf LOGITS.f32 N_GEN TOKEN...
//
// LOGITS.f32 receives (n_prompt + N_GEN) rows of n_vocab little-endian f32: one per prompt position, then one per
// greedy token fed back. Stdout gets `n_vocab V` and `greedy T1 T2 ...`. N_CTX 0 (the default) is the file's
// context_length, which is also what picks Phi-3's long or short LongRoPE factors (long when N_CTX exceeds
// rope.scaling.original_context_length). Built by scripts/build-llama-reference.sh.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

static int usage() {
    fprintf(stderr, "usage: llama-reference [-t THREADS] [-c N_CTX] MODEL.gguf LOGITS.f32 N_GEN TOKEN...\n");
    return 2;
}

int main(int argc, char ** argv) {
    int threads = 2;
    int n_ctx = 0;
    int arg = 1;
    while (arg + 1 < argc && argv[arg][0] == '-') {
        if (strcmp(argv[arg], "-t") == 0) {
            threads = atoi(argv[arg + 1]);
        } else if (strcmp(argv[arg], "-c") == 0) {
            n_ctx = atoi(argv[arg + 1]);
        } else {
            return usage();
        }
        arg += 2;
    }
    if (argc - arg < 4 || threads < 1) {
        return usage();
    }
    const char * model_path = argv[arg];
    const char * logits_path = argv[arg + 1];
    const int n_gen = atoi(argv[arg + 2]);
    std::vector<llama_token> prompt;
    for (int i = arg + 3; i < argc; i++) {
        prompt.push_back((llama_token) atoi(argv[i]));
    }
    const int n_prompt = (int) prompt.size();

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(model_path, mparams);
    if (model == nullptr) {
        fprintf(stderr, "llama.cpp could not load %s\n", model_path);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (llama_token t : prompt) {
        if (t < 0 || t >= n_vocab) {
            fprintf(stderr, "token %d is outside the vocabulary (%d)\n", t, n_vocab);
            return 1;
        }
    }

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t) n_ctx;
    cparams.n_batch = cparams.n_ubatch = (uint32_t) (n_prompt > 512 ? n_prompt : 512);
    cparams.n_seq_max = 1;
    cparams.n_threads = cparams.n_threads_batch = threads;
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cparams.type_k = cparams.type_v = GGML_TYPE_F32;
    cparams.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cparams);
    if (ctx == nullptr) {
        fprintf(stderr, "llama.cpp could not create a context for %s\n", model_path);
        return 1;
    }

    FILE * out = fopen(logits_path, "wb");
    if (out == nullptr) {
        fprintf(stderr, "cannot write %s\n", logits_path);
        return 1;
    }
    // Evaluates `tokens` at positions from `pos`, writes every row's logits, returns the last row's argmax.
    auto eval = [&](const std::vector<llama_token> & tokens, int pos) -> llama_token {
        llama_batch batch = llama_batch_init((int32_t) tokens.size(), 0, 1);
        for (size_t i = 0; i < tokens.size(); i++) {
            batch.token[i] = tokens[i];
            batch.pos[i] = pos + (llama_pos) i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        batch.n_tokens = (int32_t) tokens.size();
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama_decode failed at position %d\n", pos);
            exit(1);
        }
        llama_token best = 0;
        for (size_t i = 0; i < tokens.size(); i++) {
            const float * row = llama_get_logits_ith(ctx, (int32_t) i);
            fwrite(row, sizeof(float), (size_t) n_vocab, out);
            best = 0;
            for (int v = 1; v < n_vocab; v++) {
                if (row[v] > row[best]) {
                    best = v;
                }
            }
        }
        llama_batch_free(batch);
        return best;
    };

    printf("n_vocab %d\n", n_vocab);
    llama_token next = eval(prompt, 0);
    printf("greedy");
    for (int i = 0; i < n_gen; i++) {
        printf(" %d", next);
        next = eval({next}, n_prompt + i);
    }
    printf("\n");
    fclose(out);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
