/*
 * The hardware challenge's device kernels: the seeded inputs (ChaCha8), the commitment
 * leaves of the product's rows with the held low halves, the held leaves of a pass, and a
 * Merkle level. They must reproduce `crate::matrix` and `crate::hash` byte for byte.
 *
 * One source, two compilers. NVRTC compiles it for the device at run time (`gpu.rs`). The
 * build script compiles the same text as C on the host with MCJS_HOST defined, where each
 * kernel is a loop over its thread indices (`mcjs_host_*`), so the unit tests hold every
 * per-thread body to the Rust reference on a machine without a GPU. Everything above the
 * kernels is therefore plain C: no templates, no shared memory, no barriers; each thread's
 * work depends only on its index.
 *
 * Layouts (row-major, little-endian, as the Rust reference):
 *   A panel   int8  rows x width           row i of A is ChaCha8(a_key) from byte i*width
 *   B^T       int8  width x width          B^T[j*width + l] = B[l][j]  (for cuBLAS "TN")
 *   C panel   int32 rows x width           what cuBLAS GemmEx writes
 *   held      uint16 rows x width          the low 16 bits of every entry of C
 *   digests   32 bytes each                sha256 output bytes
 */

/* Own type names: NVRTC has no <stdint.h>, and these clash with nothing it defines. */
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned int u32;
typedef unsigned long long u64;

#ifdef MCJS_HOST
#define MCJS_FN static inline
#define MCJS_UNROLL
#else
#define MCJS_FN static __device__ __forceinline__
#define MCJS_UNROLL _Pragma("unroll")
#endif

/* ---- ChaCha8, as rand_chacha: 64-bit block counter in words 12-13, stream 0 ---- */

#define MCJS_ROTL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))
#define MCJS_QR(a, b, c, d)                                                             \
    a += b; d ^= a; d = MCJS_ROTL(d, 16);                                               \
    c += d; b ^= c; b = MCJS_ROTL(b, 12);                                               \
    a += b; d ^= a; d = MCJS_ROTL(d, 8);                                                \
    c += d; b ^= c; b = MCJS_ROTL(b, 7);

/* Block `counter` of the ChaCha8 stream keyed by `key` (eight little-endian words). */
MCJS_FN void chacha8_block(const u32 *key, u64 counter, u32 out[16]) {
    u32 s[16];
    s[0] = 0x61707865u; s[1] = 0x3320646eu; s[2] = 0x79622d32u; s[3] = 0x6b206574u;
    for (int i = 0; i < 8; i++) s[4 + i] = key[i];
    s[12] = (u32)counter; s[13] = (u32)(counter >> 32);
    s[14] = 0; s[15] = 0;
    u32 x[16];
    for (int i = 0; i < 16; i++) x[i] = s[i];
    MCJS_UNROLL
    for (int r = 0; r < 4; r++) {
        MCJS_QR(x[0], x[4], x[8], x[12]);
        MCJS_QR(x[1], x[5], x[9], x[13]);
        MCJS_QR(x[2], x[6], x[10], x[14]);
        MCJS_QR(x[3], x[7], x[11], x[15]);
        MCJS_QR(x[0], x[5], x[10], x[15]);
        MCJS_QR(x[1], x[6], x[11], x[12]);
        MCJS_QR(x[2], x[7], x[8], x[13]);
        MCJS_QR(x[3], x[4], x[9], x[14]);
    }
    for (int i = 0; i < 16; i++) out[i] = x[i] + s[i];
}

/* Thread t of a panel of A: the 64 bytes at block `first_block + t`, to out[t*64..]. */
MCJS_FN void gen_a_thread(u64 t, const u32 *key, u64 first_block, u32 *out) {
    u32 w[16];
    chacha8_block(key, first_block + t, w);
    for (int i = 0; i < 16; i++) out[t * 16 + i] = w[i];
}

/* Thread t of B^T: block t of B's stream (B row-major from row 0), written transposed. */
MCJS_FN void gen_bt_thread(u64 t, const u32 *key, u32 width, i8 *out) {
    u32 w[16];
    chacha8_block(key, t, w);
    u64 base = t * 64;
    u64 l = base / width;
    u64 j0 = base % width;
    for (int i = 0; i < 64; i++) {
        u8 byte = (u8)(w[i >> 2] >> (8 * (i & 3)));
        out[(j0 + (u64)i) * width + l] = (i8)byte;
    }
}

/* ---- SHA-256 ---- */

#define MCJS_ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

#ifdef MCJS_HOST
static const u32 MCJS_K[64] = {
#else
__constant__ u32 MCJS_K[64] = {
#endif
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u,
};

MCJS_FN void sha256_init(u32 h[8]) {
    h[0] = 0x6a09e667u; h[1] = 0xbb67ae85u; h[2] = 0x3c6ef372u; h[3] = 0xa54ff53au;
    h[4] = 0x510e527fu; h[5] = 0x9b05688cu; h[6] = 0x1f83d9abu; h[7] = 0x5be0cd19u;
}

/* One block, its sixteen words big-endian as sha256 reads them. */
MCJS_FN void sha256_compress(u32 h[8], const u32 block[16]) {
    u32 w[16];
    for (int i = 0; i < 16; i++) w[i] = block[i];
    u32 a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    MCJS_UNROLL
    for (int i = 0; i < 64; i++) {
        u32 wi;
        if (i < 16) {
            wi = w[i];
        } else {
            u32 w15 = w[(i - 15) & 15], w2 = w[(i - 2) & 15];
            u32 s0 = MCJS_ROTR(w15, 7) ^ MCJS_ROTR(w15, 18) ^ (w15 >> 3);
            u32 s1 = MCJS_ROTR(w2, 17) ^ MCJS_ROTR(w2, 19) ^ (w2 >> 10);
            wi = w[i & 15] + s0 + w[(i - 7) & 15] + s1;
            w[i & 15] = wi;
        }
        u32 S1 = MCJS_ROTR(e, 6) ^ MCJS_ROTR(e, 11) ^ MCJS_ROTR(e, 25);
        u32 ch = (e & f) ^ (~e & g);
        u32 t1 = k + S1 + ch + MCJS_K[i] + wi;
        u32 S0 = MCJS_ROTR(a, 2) ^ MCJS_ROTR(a, 13) ^ MCJS_ROTR(a, 22);
        u32 maj = (a & b) ^ (a & c) ^ (b & c);
        u32 t2 = S0 + maj;
        k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

MCJS_FN u32 bswap32(u32 x) {
    return (x >> 24) | ((x >> 8) & 0x0000ff00u) | ((x << 8) & 0x00ff0000u) | (x << 24);
}

MCJS_FN void sha256_store(const u32 h[8], u8 *out) {
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (u8)(h[i] >> 24);
        out[4 * i + 1] = (u8)(h[i] >> 16);
        out[4 * i + 2] = (u8)(h[i] >> 8);
        out[4 * i + 3] = (u8)h[i];
    }
}

/*
 * A leaf: its header block (`header`, sixteen big-endian words with the index left zero;
 * the index's eight little-endian bytes go at byte `index_at`), then `blocks` blocks of
 * data read as little-endian words from `data`, then the padding block. Both leaves'
 * data are a whole number of blocks (widths are multiples of 64), so the padding is a
 * block of its own.
 */
MCJS_FN void leaf_start(u32 h[8], const u32 *header, u32 index_at, u64 index) {
    u32 block[16];
    for (int i = 0; i < 16; i++) block[i] = header[i];
    for (int i = 0; i < 8; i++) {
        u32 at = index_at + (u32)i;
        block[at >> 2] |= (u32)(u8)(index >> (8 * i)) << (24 - 8 * (at & 3));
    }
    sha256_init(h);
    sha256_compress(h, block);
}

MCJS_FN void leaf_finish(u32 h[8], u64 blocks, u8 *out) {
    u32 block[16];
    for (int i = 0; i < 16; i++) block[i] = 0;
    block[0] = 0x80000000u;
    u64 bits = (blocks + 1) * 512;
    block[14] = (u32)(bits >> 32);
    block[15] = (u32)bits;
    sha256_compress(h, block);
    sha256_store(h, out);
}

/*
 * Thread t of a product panel: row `row0 + t` of C, whose `width` values are at
 * c[t*width..]. Writes the row's commitment leaf to leaves[(row0+t)*32..] and its low
 * halves to held[(row0+t)*width..].
 */
MCJS_FN void row_leaf_thread(u64 t, const u32 *header, u32 index_at,
                             u64 row0, u32 width, const u32 *c,
                             u32 *held, u8 *leaves) {
    u64 row = row0 + t;
    const u32 *values = c + t * (u64)width;
    u32 *low = held + row * (u64)(width / 2);
    u32 h[8];
    leaf_start(h, header, index_at, row);
    u64 blocks = width / 16;
    for (u64 b = 0; b < blocks; b++) {
        u32 block[16];
        for (int i = 0; i < 16; i++) block[i] = values[b * 16 + i];
        for (int i = 0; i < 8; i++) {
            low[b * 8 + i] = (block[2 * i] & 0xffffu) | (block[2 * i + 1] << 16);
        }
        for (int i = 0; i < 16; i++) block[i] = bswap32(block[i]);
        sha256_compress(h, block);
    }
    leaf_finish(h, blocks, leaves + row * 32);
}

/* Thread t of a held pass: row t's held leaf under the pass whose header is `header`. */
MCJS_FN void held_leaf_thread(u64 t, const u32 *header, u32 index_at,
                              u32 width, const u32 *held, u8 *leaves) {
    const u32 *low = held + t * (u64)(width / 2);
    u32 h[8];
    leaf_start(h, header, index_at, t);
    u64 blocks = width / 32;
    for (u64 b = 0; b < blocks; b++) {
        u32 block[16];
        for (int i = 0; i < 16; i++) block[i] = bswap32(low[b * 16 + i]);
        sha256_compress(h, block);
    }
    leaf_finish(h, blocks, leaves + t * 32);
}

/* Thread t of a Merkle level over `n` digests: a node over children 2t and 2t+1, or the
 * last child carried up unchanged when it has no sibling. */
MCJS_FN void merkle_thread(u64 t, const u8 *below, u64 n, u8 *above) {
    const u8 *left = below + 2 * t * 32;
    if (2 * t + 1 >= n) {
        for (int i = 0; i < 32; i++) above[t * 32 + i] = left[i];
        return;
    }
    const u8 *right = left + 32;
    u8 bytes[128];
    for (int i = 0; i < 128; i++) bytes[i] = 0;
    bytes[0] = 0x01;
    for (int i = 0; i < 32; i++) {
        bytes[1 + i] = left[i];
        bytes[33 + i] = right[i];
    }
    bytes[65] = 0x80;
    bytes[126] = (u8)(520 >> 8);
    bytes[127] = (u8)520;
    u32 h[8];
    sha256_init(h);
    for (int b = 0; b < 2; b++) {
        u32 block[16];
        for (int i = 0; i < 16; i++) {
            const u8 *p = bytes + b * 64 + 4 * i;
            block[i] = ((u32)p[0] << 24) | ((u32)p[1] << 16) | ((u32)p[2] << 8) | p[3];
        }
        sha256_compress(h, block);
    }
    sha256_store(h, above + t * 32);
}

/* ---- The entry points: CUDA kernels on the device, loops over the threads on the host ---- */

#ifdef MCJS_HOST
#define MCJS_FOR_EACH_THREAD(n) for (u64 t = 0; t < (n); t++)
#define MCJS_ENTRY(name) void mcjs_host_##name
#else
#define MCJS_FOR_EACH_THREAD(n)                                                         \
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;                       \
    if (t < (n))
#define MCJS_ENTRY(name) extern "C" __global__ void name
#endif

MCJS_ENTRY(gen_a)(const u32 *key, u64 first_block, u64 blocks, u32 *out) {
    MCJS_FOR_EACH_THREAD(blocks) gen_a_thread(t, key, first_block, out);
}

MCJS_ENTRY(gen_bt)(const u32 *key, u32 width, i8 *out) {
    MCJS_FOR_EACH_THREAD((u64)width * width / 64) gen_bt_thread(t, key, width, out);
}

MCJS_ENTRY(row_leaves)(const u32 *header, u32 index_at, u64 row0,
                       u64 rows, u32 width, const u32 *c, u32 *held,
                       u8 *leaves) {
    MCJS_FOR_EACH_THREAD(rows) row_leaf_thread(t, header, index_at, row0, width, c, held, leaves);
}

MCJS_ENTRY(held_leaves)(const u32 *header, u32 index_at, u64 rows,
                        u32 width, const u32 *held, u8 *leaves) {
    MCJS_FOR_EACH_THREAD(rows) held_leaf_thread(t, header, index_at, width, held, leaves);
}

MCJS_ENTRY(merkle_level)(const u8 *below, u64 n, u8 *above) {
    MCJS_FOR_EACH_THREAD((n + 1) / 2) merkle_thread(t, below, n, above);
}
