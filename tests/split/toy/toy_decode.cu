// A decode-shaped CUDA program of our own, for CI's run of the split
// build on the null device (tests/split/check.sh, step 4). Its host path
// has the shape of ggml-cuda's for one decoded token, on a made-up model:
// a few layers of small kernels (a norm, a matrix-vector product, a
// softmax, a residual add). The first token captures the layers on a
// stream into a graph and instantiates it; every token then copies its
// input in, replays the graph, copies the logits back and synchronises:
// four runtime calls and one graph of KERNELS launches per token.
//
// The input lies right after the logits in device memory, so the copy back
// returns it too and the host checks that every token's input came back
// intact. That holds whether or not the kernels run (on the null device
// they do not, and the logits stay the zeros they were set to).
//
//   toy_decode N   -> "decoded N tokens", the graph's size, the input
//                     check (exit 1 if any came back changed), the logits
#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

namespace {

constexpr int kDim = 256;    // the hidden width
constexpr int kVocab = 512;  // logits per token
constexpr int kLayers = 4;
constexpr int kThreads = 256;  // one block's threads for the reductions (a power of two)
// The embedding copy, four kernels per layer, the final norm and the head.
constexpr int kKernels = 1 + 4 * kLayers + 2;

#define CHECK(call)                                                                     \
    do {                                                                                \
        cudaError_t err_ = (call);                                                      \
        if (err_ != cudaSuccess) {                                                      \
            std::fprintf(stderr, "toy_decode: %s failed: %s (%d)\n", #call,             \
                         cudaGetErrorString(err_), static_cast<int>(err_));             \
            std::exit(1);                                                               \
        }                                                                               \
    } while (0)

// The block's sum (op 0) or maximum (op 1) of each thread's v, to every
// thread.
__device__ float block_reduce(float v, int op, float *scratch) {
    int lane = static_cast<int>(threadIdx.x);
    scratch[lane] = v;
    __syncthreads();
    for (int half = static_cast<int>(blockDim.x) / 2; half > 0; half /= 2) {
        if (lane < half) {
            float other = scratch[lane + half];
            scratch[lane] = op == 0 ? scratch[lane] + other : fmaxf(scratch[lane], other);
        }
        __syncthreads();
    }
    float r = scratch[0];
    __syncthreads();
    return r;
}

// The token's input becomes the residual stream.
__global__ void embed(const float *input, float *h, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        h[i] = input[i];
    }
}

// One block: out = x scaled to unit root-mean-square, times gain.
__global__ void rms_norm(const float *x, const float *gain, float *out, int n) {
    __shared__ float scratch[kThreads];
    float squares = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        squares += x[i] * x[i];
    }
    float scale = rsqrtf(block_reduce(squares, 0, scratch) / n + 1e-6f);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        out[i] = x[i] * scale * gain[i];
    }
}

// One thread a row: out = w x, w row-major (rows x cols).
__global__ void mat_vec(const float *w, const float *x, float *out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) {
        return;
    }
    const float *row = w + static_cast<size_t>(r) * cols;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) {
        acc += row[c] * x[c];
    }
    out[r] = acc;
}

// One block: x = softmax(x), in place (each thread keeps to its own
// elements).
__global__ void soft_max(float *x, int n) {
    __shared__ float scratch[kThreads];
    float top = -FLT_MAX;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        top = fmaxf(top, x[i]);
    }
    top = block_reduce(top, 1, scratch);
    float total = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = expf(x[i] - top);
        x[i] = e;
        total += e;
    }
    total = block_reduce(total, 0, scratch);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        x[i] /= total;
    }
}

// h += scale * u
__global__ void add_scaled(float *h, const float *u, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        h[i] += scale * u[i];
    }
}

struct Model {
    float *w[kLayers];
    float *gain[kLayers];
    float *gain_out;
    float *head;  // kVocab x kDim
};

// Deterministic weights from a small linear congruential generator.
float *upload_weights(size_t count, unsigned *seed, float scale) {
    std::vector<float> host(count);
    for (float &v : host) {
        *seed = *seed * 1664525u + 1013904223u;
        v = (static_cast<float>(*seed >> 8) / 16777216.0f - 0.5f) * scale;
    }
    float *dev = nullptr;
    CHECK(cudaMalloc(&dev, count * sizeof(float)));
    CHECK(cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    return dev;
}

// What token `token` at position `pos` feeds the model: computed here, by
// the host, so that it can be checked when it comes back.
void token_input(int token, int pos, float *x) {
    for (int i = 0; i < kDim; ++i) {
        x[i] = static_cast<float>((token * 131 + pos * 17 + i * 7) % 251) / 251.0f - 0.5f;
    }
}

unsigned long long fnv1a(const void *data, size_t len, unsigned long long h) {
    const unsigned char *p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < len; ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

// The layers, as one token runs them, on `stream`.
void enqueue_layers(const Model &m, const float *input, float *h, float *t, float *u, float *logits,
                    cudaStream_t stream) {
    embed<<<kDim / 128, 128, 0, stream>>>(input, h, kDim);
    for (int l = 0; l < kLayers; ++l) {
        rms_norm<<<1, kThreads, 0, stream>>>(h, m.gain[l], t, kDim);
        mat_vec<<<kDim / 128, 128, 0, stream>>>(m.w[l], t, u, kDim, kDim);
        soft_max<<<1, kThreads, 0, stream>>>(u, kDim);
        add_scaled<<<kDim / 128, 128, 0, stream>>>(h, u, 1.0f, kDim);
    }
    rms_norm<<<1, kThreads, 0, stream>>>(h, m.gain_out, t, kDim);
    mat_vec<<<kVocab / 128, 128, 0, stream>>>(m.head, t, logits, kVocab, kDim);
}

}  // namespace

int main(int argc, char **argv) {
    int tokens = argc > 1 ? std::atoi(argv[1]) : 0;
    if (tokens < 1) {
        std::fprintf(stderr, "usage: toy_decode TOKENS (at least 1)\n");
        return 2;
    }
    CHECK(cudaSetDevice(0));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    unsigned seed = 17;
    Model m;
    for (int l = 0; l < kLayers; ++l) {
        m.w[l] = upload_weights(static_cast<size_t>(kDim) * kDim, &seed, 0.125f);
        m.gain[l] = upload_weights(kDim, &seed, 2.0f);
    }
    m.gain_out = upload_weights(kDim, &seed, 2.0f);
    m.head = upload_weights(static_cast<size_t>(kVocab) * kDim, &seed, 0.125f);

    // [logits | input]: one copy back returns both.
    float *state = nullptr, *h = nullptr, *t = nullptr, *u = nullptr;
    CHECK(cudaMalloc(&state, (kVocab + kDim) * sizeof(float)));
    CHECK(cudaMemset(state, 0, (kVocab + kDim) * sizeof(float)));
    CHECK(cudaMalloc(&h, kDim * sizeof(float)));
    CHECK(cudaMalloc(&t, kDim * sizeof(float)));
    CHECK(cudaMalloc(&u, kDim * sizeof(float)));
    float *logits = state, *input = state + kVocab;
    float *sent = nullptr, *back = nullptr;
    CHECK(cudaMallocHost(&sent, kDim * sizeof(float)));
    CHECK(cudaMallocHost(&back, (kVocab + kDim) * sizeof(float)));

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    size_t nodes = 0;
    int token = 1, intact = 0;
    unsigned long long sent_sum = 14695981039346656037ull, back_sum = sent_sum;
    double magnitude = 0.0;
    for (int pos = 0; pos < tokens; ++pos) {
        token_input(token, pos, sent);
        CHECK(cudaMemcpyAsync(input, sent, kDim * sizeof(float), cudaMemcpyHostToDevice, stream));
        if (exec == nullptr) {
            CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
            enqueue_layers(m, input, h, t, u, logits, stream);
            CHECK(cudaStreamEndCapture(stream, &graph));
            CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
        }
        CHECK(cudaGraphLaunch(exec, stream));
        CHECK(cudaMemcpyAsync(back, state, (kVocab + kDim) * sizeof(float), cudaMemcpyDeviceToHost, stream));
        CHECK(cudaStreamSynchronize(stream));

        intact += std::memcmp(back + kVocab, sent, kDim * sizeof(float)) == 0;
        sent_sum = fnv1a(sent, kDim * sizeof(float), sent_sum);
        back_sum = fnv1a(back + kVocab, kDim * sizeof(float), back_sum);
        int best = 0;
        for (int i = 0; i < kVocab; ++i) {
            magnitude += back[i] < 0 ? -back[i] : back[i];
            if (back[i] > back[best]) {
                best = i;
            }
        }
        token = best;
    }

    std::printf("decoded %d tokens\n", tokens);
    std::printf("graph: %zu nodes (the shape's %d kernels), captured once, launched %d times\n", nodes, kKernels,
                tokens);
    std::printf("inputs: %d of %d came back intact (fnv-1a %016llx sent, %016llx back)\n", intact, tokens, sent_sum,
                back_sum);
    std::printf("logits: sum of magnitudes %.6g, last token %d\n", magnitude, token);

    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    for (int l = 0; l < kLayers; ++l) {
        CHECK(cudaFree(m.w[l]));
        CHECK(cudaFree(m.gain[l]));
    }
    CHECK(cudaFree(m.gain_out));
    CHECK(cudaFree(m.head));
    CHECK(cudaFree(state));
    CHECK(cudaFree(h));
    CHECK(cudaFree(t));
    CHECK(cudaFree(u));
    CHECK(cudaFreeHost(sent));
    CHECK(cudaFreeHost(back));
    CHECK(cudaStreamDestroy(stream));
    return intact == tokens ? 0 : 1;
}
