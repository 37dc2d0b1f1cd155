// Every tensor llama.cpp computes for one prompt, as a hash of its bytes:
// the same program run on NVIDIA's stack and on ours names the first op
// whose output differs in even one bit, which llama-eval-callback's
// four-decimal printout can hide (a router's logits a few ulps apart
// choose other experts two layers later). Our own tool, built on the GPU
// machine against the llama.cpp build (tests/llama/diverge.sh does).
//
//   tensor_hashes MODEL PROMPT      one line per tensor, then the argmax
//
// Lines: "INDEX NAME OP TYPE NE0xNE1xNE2xNE3 FNV1A64", and last
// "argmax TOKEN".
#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Seen {
    int index = 0;
    std::vector<uint8_t> bytes;
};

uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

// The scheduler asks first (ask = true) whether we want a node; then hands
// it over computed. The tensor may live on the GPU: copy it out whole.
bool on_tensor(ggml_tensor *t, bool ask, void *user) {
    if (ask) return true;
    auto *seen = static_cast<Seen *>(user);
    const size_t n = ggml_nbytes(t);
    seen->bytes.resize(n);
    ggml_backend_tensor_get(t, seen->bytes.data(), 0, n);
    printf("%d %s %s %s %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " %016" PRIx64 "\n", seen->index++, t->name,
           ggml_op_desc(t), ggml_type_name(t->type), t->ne[0], t->ne[1], t->ne[2], t->ne[3],
           fnv1a(seen->bytes.data(), n));
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tensor_hashes MODEL PROMPT\n");
        return 2;
    }
    ggml_backend_load_all();
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 99;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "tensor_hashes: cannot load %s\n", argv[1]);
        return 1;
    }
    const llama_vocab *vocab = llama_model_get_vocab(model);
    const std::string prompt = argv[2];
    std::vector<llama_token> tokens(prompt.size() + 8);
    const int n = llama_tokenize(vocab, prompt.c_str(), int(prompt.size()), tokens.data(), int(tokens.size()),
                                 true, true);
    if (n <= 0) {
        fprintf(stderr, "tensor_hashes: the prompt did not tokenize (%d)\n", n);
        return 1;
    }
    tokens.resize(n);
    Seen seen;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 512;
    cp.n_batch = 512;
    cp.cb_eval = on_tensor;
    cp.cb_eval_user_data = &seen;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "tensor_hashes: no context\n");
        return 1;
    }
    if (llama_decode(ctx, llama_batch_get_one(tokens.data(), n)) != 0) {
        fprintf(stderr, "tensor_hashes: decode failed\n");
        return 1;
    }
    const float *logits = llama_get_logits_ith(ctx, -1);
    const int vocab_n = llama_vocab_n_tokens(vocab);
    int best = 0;
    for (int i = 1; i < vocab_n; i++)
        if (logits[i] > logits[best]) best = i;
    printf("argmax %d\n", best);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
