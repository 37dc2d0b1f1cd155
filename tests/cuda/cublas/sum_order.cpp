// The order a cuBLAS sgemm (op(A) = T, op(B) = N, as ggml calls it) adds a
// dot product's k products in, read from its results alone, so that ours
// can be made to give NVIDIA's bits where a decode depends on them.
//
// B is all ones. In row i of op(A) the element at p is +M and at q is -M
// (M = 2^40, exact in tf32), every other element 1. A one that meets p's
// or q's partial sum before the two cancel vanishes (it is far below half
// of M's ulp); the rest survive. So C(i, j) = k - (the size of the
// smallest partial sum that holds both p and q): for p = 0 and every q
// those sizes list the sub-sums on position 0's way to the total, which is
// the shape of the summation (sequential, pairwise, split in chunks, fused
// groups of a tensor-core step). Each row of a call is one (p, q); every
// column must agree.
//
// Also the rounding of the inputs: one element 1 + 2^-11 + 2^-13, the rest
// 0: fp32 keeps it, tf32 rounding to nearest makes it 1 + 2^-10, tf32
// truncation 1.
//
//   sum_order M N K tf32|default|cpu-sequential|cpu-pairwise [FROM...]
//
// FROM: the p's (default 0 1). The cpu- modes sum on the host, in order or
// pairwise, without cuBLAS: they check the reading itself (a sequential sum
// reads "from 0: q:q+1", a pairwise one powers of two).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

static const double BIG = 1099511627776.0;  // 2^40

static void must(bool ok, const char *what) {
    if (!ok) {
        printf("FAIL %s\n", what);
        exit(2);
    }
}

enum class Model { Cublas, Sequential, Pairwise };

// A float sum of v[lo, hi) halved at each step.
static float pairwise(const float *v, int lo, int hi) {
    if (hi - lo == 1) return v[lo];
    const int mid = lo + (hi - lo + 1) / 2;
    return pairwise(v, lo, mid) + pairwise(v, mid, hi);
}

struct Gemm {
    Model model;
    cublasHandle_t h;
    int m, n, k;
    float *da, *db, *dc;

    // C = op(A) B for A given as m rows of k (row i is op(A)'s row i).
    std::vector<float> run(const std::vector<float> &rows) {
        if (model != Model::Cublas) {
            // B is ones: each column is the row's sum.
            std::vector<float> c(size_t(m) * n);
            for (int i = 0; i < m; i++) {
                const float *r = &rows[size_t(i) * k];
                float sum = 0;
                if (model == Model::Sequential)
                    for (int p = 0; p < k; p++) sum += r[p];
                else
                    sum = pairwise(r, 0, k);
                for (int j = 0; j < n; j++) c[i + size_t(j) * m] = sum;
            }
            return c;
        }
        must(cudaMemcpy(da, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy A");
        const float one = 1, zero = 0;
        must(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, k, db, k, &zero, dc, m) ==
                 CUBLAS_STATUS_SUCCESS,
             "cublasSgemm");
        std::vector<float> c(size_t(m) * n);
        must(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost) == cudaSuccess, "copy C");
        return c;
    }
};

// The value every column of row i holds, or NAN when the columns differ.
static double row_value(const std::vector<float> &c, int m, int n, int i) {
    const float first = c[i];
    for (int j = 1; j < n; j++)
        if (memcmp(&c[i + size_t(j) * m], &first, 4) != 0) return NAN;
    return first;
}

// 1 + 2^-11 + 2^-13: above half of tf32's last place.
static const double ABOVE_HALF = 1 + ldexp(1, -11) + ldexp(1, -13);
// 1 + 2^-11: exactly half of it, between 1 (even) and 1 + 2^-10 (odd).
static const double TIE = 1 + ldexp(1, -11);

static const char *rounding(double got) {
    if (got == ABOVE_HALF) return "fp32 (inputs kept)";
    if (got == 1 + ldexp(1, -10)) return "tf32, rounded to nearest";
    if (got == 1) return "tf32, truncated";
    return "unknown";
}

static const char *ties(double got) {
    if (got == TIE) return "fp32 (inputs kept)";
    if (got == 1 + ldexp(1, -10)) return "away from zero";
    if (got == 1) return "to even (or truncated)";
    return "unknown";
}

int main(int argc, char **argv) {
    if (argc < 5) {
        printf("usage: sum_order M N K tf32|default|cpu-sequential|cpu-pairwise [FROM...]\n");
        return 2;
    }
    Gemm g;
    g.m = atoi(argv[1]);
    g.n = atoi(argv[2]);
    g.k = atoi(argv[3]);
    const std::string mode = argv[4];
    const bool tf32 = mode == "tf32";
    g.model = mode == "cpu-sequential" ? Model::Sequential : mode == "cpu-pairwise" ? Model::Pairwise : Model::Cublas;
    must(tf32 || mode == "default" || g.model != Model::Cublas, "mode (tf32, default, cpu-sequential, cpu-pairwise)");
    std::vector<int> froms;
    for (int a = 5; a < argc; a++) froms.push_back(atoi(argv[a]));
    if (froms.empty()) froms = {0, 1};
    must(g.m > 0 && g.n > 0 && g.k > 2 && g.k < (1 << 20), "sizes (M, N > 0, 2 < K < 2^20)");
    setvbuf(stdout, NULL, _IOLBF, 0);
    const size_t na = size_t(g.m) * g.k, nb = size_t(g.k) * g.n;
    printf("sum_order: sgemm TN m=%d n=%d k=%d math=%s\n", g.m, g.n, g.k, mode.c_str());
    if (g.model == Model::Cublas) {
        must(cublasCreate(&g.h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
        must(cublasSetMathMode(g.h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS,
             "cublasSetMathMode");
        must(cudaMalloc((void **)&g.da, na * 4) == cudaSuccess && cudaMalloc((void **)&g.db, nb * 4) == cudaSuccess &&
                 cudaMalloc((void **)&g.dc, size_t(g.m) * g.n * 4) == cudaSuccess,
             "cudaMalloc");
        std::vector<float> ones(nb, 1.0f);
        must(cudaMemcpy(g.db, ones.data(), nb * 4, cudaMemcpyHostToDevice) == cudaSuccess, "copy B");
    }

    // The inputs' rounding, at every position of row 0 in turn would be
    // k calls; one position (the first) and the last say enough.
    for (int at : {0, g.k - 1}) {
        std::vector<float> a(na, 0.0f);
        a[at] = float(ABOVE_HALF);
        const double got = row_value(g.run(a), g.m, g.n, 0);
        a[at] = float(TIE);
        const double tie = row_value(g.run(a), g.m, g.n, 0);
        printf("inputs at %d: %s (%.10g); ties %s (%.10g)\n", at, rounding(got), got, ties(tie), tie);
    }

    for (int from : froms) {
        if (from < 0 || from >= g.k) continue;
        // sizes[q]: the smallest partial sum holding `from` and q.
        std::vector<double> sizes(g.k, 0);
        std::vector<int> qs;
        for (int q = 0; q < g.k; q++)
            if (q != from) qs.push_back(q);
        for (size_t at = 0; at < qs.size(); at += g.m) {
            std::vector<float> a(na, 1.0f);
            for (int i = 0; i < g.m; i++) {
                const int q = qs[std::min(at + i, qs.size() - 1)];
                a[size_t(i) * g.k + from] = float(BIG);
                a[size_t(i) * g.k + q] = float(-BIG);
            }
            const std::vector<float> c = g.run(a);
            for (int i = 0; i < g.m && at + i < qs.size(); i++) {
                const double v = row_value(c, g.m, g.n, i);
                sizes[qs[at + i]] = g.k - v;
            }
        }
        // Runs of equal sizes, as "q=FIRST-LAST:SIZE".
        std::string line;
        int runs = 0;
        for (size_t i = 0; i < qs.size();) {
            size_t j = i;
            while (j + 1 < qs.size() && qs[j + 1] == qs[j] + 1 &&
                   (sizes[qs[j + 1]] == sizes[qs[i]] || (isnan(sizes[qs[j + 1]]) && isnan(sizes[qs[i]]))))
                j++;
            char buf[64];
            if (isnan(sizes[qs[i]]))
                snprintf(buf, sizeof buf, " %d-%d:columns-differ", qs[i], qs[j]);
            else if (i == j)
                snprintf(buf, sizeof buf, " %d:%g", qs[i], sizes[qs[i]]);
            else
                snprintf(buf, sizeof buf, " %d-%d:%g", qs[i], qs[j], sizes[qs[i]]);
            line += buf;
            runs++;
            i = j + 1;
        }
        printf("from %d (%d runs):%s\n", from, runs, line.c_str());
    }
    if (g.model == Model::Cublas) cublasDestroy(g.h);
    return 0;
}
