// Szp block codec kernels (lam-codec), one thread per 32-value block.
// The same source compiles with NVRTC (CUDA) and hiprtc (HIP). It must
// compute exactly the integers of the CPU reference (lam-codec/src/szp.rs):
//   q = (int)rint((double)x * inv_step)       (round half to even, f64)
//   plain mode: coded[i] = q[i] - q[i-1] inside the block, q[-1] = 0
//   missing values of the last block code as 0
//   width w = bit length of max |coded|; payload (w > 0): sign word, then
//   w magnitude planes, least significant first, each a little-endian u32
//   decoded value = (float)((double)q * step)
// Compile with FMA contraction off (NVRTC --fmad=false, hiprtc
// -ffp-contract=off); there is no multiply-add here, but keep it that way.

#define SZP_BLOCK 32

typedef unsigned long long u64;
typedef unsigned int u32;

__device__ __forceinline__ void szp_coded(const float* x, u64 n, u64 b, double inv, int plain, int* v) {
    u64 base = b * SZP_BLOCK;
    int prev = 0;
    for (int i = 0; i < SZP_BLOCK; i++) {
        int c = 0;
        if (base + i < n) {
            int q = (int)rint((double)x[base + i] * inv);
            c = plain ? (int)((u32)q - (u32)prev) : q;
            prev = q;
        }
        v[i] = c;
    }
}

__device__ __forceinline__ unsigned char szp_width_of(const int* v) {
    u32 o = 0;
    for (int i = 0; i < SZP_BLOCK; i++) {
        int c = v[i];
        o |= (u32)(c < 0 ? -(long long)c : (long long)c);
    }
    return (unsigned char)(o == 0 ? 0 : 32 - __clz(o));
}

extern "C" __global__ void szp_widths(const float* x, u64 n, double inv, int plain, unsigned char* widths, u64 nblocks) {
    u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) return;
    int v[SZP_BLOCK];
    szp_coded(x, n, b, inv, plain, v);
    widths[b] = szp_width_of(v);
}

extern "C" __global__ void szp_pack(const float* x, u64 n, double inv, int plain, const unsigned char* widths,
                                    const u64* offsets, unsigned char* payload, u64 nblocks) {
    u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) return;
    int w = widths[b];
    if (w == 0) return;
    int v[SZP_BLOCK];
    szp_coded(x, n, b, inv, plain, v);
    u32 mags[SZP_BLOCK];
    u32 signs = 0;
    for (int i = 0; i < SZP_BLOCK; i++) {
        signs |= (u32)(v[i] < 0) << i;
        mags[i] = (u32)(v[i] < 0 ? -(long long)v[i] : (long long)v[i]);
    }
    // Offsets are multiples of 4 from a 4-byte aligned payload base.
    u32* dst = (u32*)(payload + offsets[b]);
    dst[0] = signs;
    for (int j = 0; j < w; j++) {
        u32 plane = 0;
        for (int i = 0; i < SZP_BLOCK; i++) plane |= ((mags[i] >> j) & 1u) << i;
        dst[1 + j] = plane;
    }
}

extern "C" __global__ void szp_unpack(const unsigned char* payload, const unsigned char* widths, const u64* offsets,
                                      u64 n, double step, int plain, float* out, u64 nblocks) {
    u64 b = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) return;
    int w = widths[b];
    u64 base = b * SZP_BLOCK;
    u32 mags[SZP_BLOCK];
    u32 signs = 0;
    for (int i = 0; i < SZP_BLOCK; i++) mags[i] = 0;
    if (w > 0) {
        const u32* src = (const u32*)(payload + offsets[b]);
        signs = src[0];
        for (int j = 0; j < w; j++) {
            u32 plane = src[1 + j];
            for (int i = 0; i < SZP_BLOCK; i++) mags[i] |= ((plane >> i) & 1u) << j;
        }
    }
    int prev = 0;
    for (int i = 0; i < SZP_BLOCK; i++) {
        int m = (int)mags[i];
        int d = ((signs >> i) & 1u) ? (int)(0u - (u32)m) : m;
        int q = plain ? (int)((u32)prev + (u32)d) : d;
        prev = q;
        if (base + i < n) out[base + i] = (float)((double)q * step);
    }
}
