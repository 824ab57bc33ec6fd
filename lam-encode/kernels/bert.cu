// BERT encoder kernels (lam-encode feature `cuda`), compiled at run time with
// NVRTC; the GEMMs run in cuBLAS. No headers: half and bfloat16 values are
// `unsigned short` bit patterns converted here, so NVRTC needs no toolkit.
//
// A batch is B sequences padded to L tokens (T = B*L rows, row-major):
// x [T, H] is the fp32 residual stream. GEMM inputs (`g` buffers) are in the
// storage kind `kind`: 0 fp32, 1 bf16, 2 fp16 (kind 0 writes no copy; the
// GEMM reads the fp32 buffer itself). Padding rows stay finite (pad token 0,
// masked keys get probability exactly 0), so they never leak into real rows.
// Every reduction is a fixed tree over the block, so a row's result depends
// only on that row, never on the batch.

typedef unsigned short u16;
typedef unsigned int u32;

__device__ __forceinline__ u16 f2bf(float f) {
    u32 u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even (inputs are finite)
    return (u16)(u >> 16);
}
__device__ __forceinline__ float bf2f(u16 h) { return __uint_as_float(((u32)h) << 16); }
__device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// Store v at index i of a buffer of kind `kind`.
__device__ __forceinline__ void store(void* p, size_t i, float v, int kind) {
    if (kind == 0) ((float*)p)[i] = v;
    else if (kind == 1) ((u16*)p)[i] = f2bf(v);
    else ((u16*)p)[i] = f2h(v);
}

// Sum of one value per thread over the block (blockDim.x a power of two <= 1024).
__device__ float block_sum(float v, float* sh) {
    int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ float block_max(float v, float* sh) {
    int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = fmaxf(sh[t], sh[t + s]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// Layer norm of row (in place) over h values, two passes like the CPU
// encoder: mean, then mean squared deviation. Also writes the GEMM copy.
__device__ void ln_row(float* row, int h, const float* gam, const float* bet, float eps, void* g, size_t gbase, int kind, float* sh) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < h; i += blockDim.x) s += row[i];
    float mean = block_sum(s, sh) / (float)h;
    float q = 0.0f;
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        float d = row[i] - mean;
        q += d * d;
    }
    float var = block_sum(q, sh) / (float)h;
    float inv = 1.0f / sqrtf(var + eps);
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        float v = (row[i] - mean) * inv * gam[i] + bet[i];
        row[i] = v;
        if (kind != 0) store(g, gbase + i, v, kind);
    }
}

// One block per row of x: word + position + token type 0 embeddings, layer norm.
// Padding positions (p >= len) use token 0.
extern "C" __global__ void embed_ln(const u32* ids, const u32* lens, int L, int h, int vocab, const float* word, const float* pos,
                                    const float* typ, const float* gam, const float* bet, float eps, float* x, void* xg, int kind) {
    __shared__ float sh[1024];
    int row = blockIdx.x;
    int b = row / L, p = row % L;
    u32 id = p < (int)lens[b] ? ids[row] : 0u;
    if (id >= (u32)vocab) id = vocab - 1;
    float* xr = x + (size_t)row * h;
    for (int i = threadIdx.x; i < h; i += blockDim.x) xr[i] = word[(size_t)id * h + i] + typ[i] + pos[(size_t)p * h + i];
    __syncthreads();
    ln_row(xr, h, gam, bet, eps, xg, (size_t)row * h, kind, sh);
}

// x = LN(x + y + bias) for one row per block; writes the GEMM copy too.
extern "C" __global__ void residual_ln(float* x, const float* y, const float* bias, int h, const float* gam, const float* bet, float eps,
                                       void* xg, int kind) {
    __shared__ float sh[1024];
    size_t row = blockIdx.x;
    float* xr = x + row * h;
    const float* yr = y + row * h;
    for (int i = threadIdx.x; i < h; i += blockDim.x) xr[i] = xr[i] + (yr[i] + bias[i]);
    __syncthreads();
    ln_row(xr, h, gam, bet, eps, xg, row * h, kind, sh);
}

// out = gelu(y + bias) (exact erf GELU), n = T * inter values; out of kind
// `kind` (fp32 in place when kind is 0 and out == y).
extern "C" __global__ void bias_gelu(const float* y, const float* bias, int inter, size_t n, void* out, int kind) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = y[i] + bias[i % inter];
    store(out, i, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)), kind);
}

// qkv [T, 3H] + bias -> q, k, v head-major [3][B*heads][L][d] of kind `kind`.
extern "C" __global__ void split_heads(const float* qkv, const float* bias, int L, int h, int heads, size_t n, void* out, int kind) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over T * 3H
    if (i >= n) return;
    int d = h / heads;
    size_t row = i / (3 * h);
    int col = (int)(i % (3 * h));
    int which = col / h, head = (col % h) / d, c = col % d;
    size_t b = row / L, p = row % L;
    size_t T = n / (3 * h);
    size_t B = T / L;
    size_t dst = (size_t)which * T * h + ((b * heads + head) * L + p) * d + c;
    store(out, dst, qkv[i] + bias[col], kind);
}

// Softmax of each row of s [B*heads][L][L] over the first len keys; keys past
// the sequence get 0, and so do whole rows of padding queries. One block per row.
extern "C" __global__ void masked_softmax(const float* s, const u32* lens, int L, int heads, void* p, int kind) {
    __shared__ float sh[1024];
    size_t row = blockIdx.x;  // (b*heads + head) * L + q
    int q = (int)(row % L);
    int b = (int)(row / L / heads);
    int len = (int)lens[b];
    const float* sr = s + row * L;
    size_t base = row * L;
    if (q >= len) {
        for (int k = threadIdx.x; k < L; k += blockDim.x) store(p, base + k, 0.0f, kind);
        return;
    }
    float m = -3.0e38f;
    for (int k = threadIdx.x; k < len; k += blockDim.x) m = fmaxf(m, sr[k]);
    m = block_max(m, sh);
    float sum = 0.0f;
    for (int k = threadIdx.x; k < len; k += blockDim.x) sum += expf(sr[k] - m);
    sum = block_sum(sum, sh);
    float inv = 1.0f / sum;
    for (int k = threadIdx.x; k < L; k += blockDim.x) store(p, base + k, k < len ? expf(sr[k] - m) * inv : 0.0f, kind);
}

// ctx head-major [B*heads][L][d] (fp32) -> out [T, H] of kind `kind`.
extern "C" __global__ void merge_heads(const float* ctx, int L, int h, int heads, size_t n, void* out, int kind) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over T * H, destination order
    if (i >= n) return;
    int d = h / heads;
    size_t row = i / h;
    int col = (int)(i % h);
    int head = col / d, c = col % d;
    size_t b = row / L, p = row % L;
    store(out, i, ctx[((b * heads + head) * L + p) * d + c], kind);
}

// Pooled rows [B, H]: the mean of the first len token rows summed in token
// order then divided by len (as lam-encode's Front::pool), or the [CLS] row.
// One thread per (sequence, coordinate). Normalisation happens on the host.
extern "C" __global__ void pool(const float* x, const u32* lens, int L, int h, int B, int cls, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * h) return;
    int b = i / h, c = i % h;
    const float* xb = x + (size_t)b * L * h;
    if (cls) {
        out[i] = xb[c];
        return;
    }
    int len = (int)lens[b];
    float s = 0.0f;
    for (int t = 0; t < len; t++) s += xb[(size_t)t * h + c];
    out[i] = s / (float)len;
}

// fp32 -> kind, n values (weights are converted on the host; this is for activations).
extern "C" __global__ void convert(const float* src, size_t n, void* dst, int kind) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) store(dst, i, src[i], kind);
}
