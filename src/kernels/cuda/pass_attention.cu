// Attention for one forward pass over the new tokens of several sequences, each attending to its own KV cache.
// Compiled at run time (NVRTC) by src/kernels/gpu_attention.rs, which documents the layouts.
//
// The descriptor table has one row of FIELDS values per part (sequence) of the pass, in row order:
//   [0] the part's keys buffer, float [n_kv, capacity, head_dim]
//   [1] its values buffer, same shape
//   [2] capacity, in positions
//   [3] positions cached before this pass (the position of the part's first new token)
//   [4] the part's first row among the pass's stacked rows (its rows run to the next part's first row)

#define FIELDS 5
#define TILE 1024
#define MAX_HEAD_DIM 256
#define THREADS 256
// NVRTC has no math.h: minus infinity by its bits.
#define NEG_INF __int_as_float(0xff800000)

__device__ int part_of_row(const unsigned long long* table, int parts, int row) {
    int p = 0;
    while (p + 1 < parts && (unsigned long long)row >= table[(p + 1) * FIELDS + 4]) p++;
    return p;
}

// Writes each row's new keys and values into its part's cache at the row's position.
// k, v: [rows, n_kv, head_dim]. Grid (rows, n_kv); any block size.
extern "C" __global__ void tandem_kv_append(const float* k, const float* v, const unsigned long long* table,
                                            int parts, int n_kv, int head_dim) {
    int row = blockIdx.x, h = blockIdx.y;
    const unsigned long long* part = table + part_of_row(table, parts, row) * FIELDS;
    long long capacity = (long long)part[2];
    long long position = (long long)part[3] + row - (long long)part[4];
    float* keys = (float*)part[0] + ((long long)h * capacity + position) * head_dim;
    float* values = (float*)part[1] + ((long long)h * capacity + position) * head_dim;
    long long from = ((long long)row * n_kv + h) * head_dim;
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
        keys[i] = k[from + i];
        values[i] = v[from + i];
    }
}

// Sum or max over the block (THREADS threads); every thread gets the result.
__device__ float block_reduce(float x, float* scratch, bool take_max) {
    scratch[threadIdx.x] = x;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float a = scratch[threadIdx.x], b = scratch[threadIdx.x + s];
            scratch[threadIdx.x] = take_max ? fmaxf(a, b) : a + b;
        }
        __syncthreads();
    }
    float result = scratch[0];
    __syncthreads();
    return result;
}

// Causal attention of each row's query heads over its part's cache: row r of a part at position p sees
// positions 0..=p. Softmax runs over tiles of TILE positions with a running maximum (any length fits).
// q, out: [rows, n_head, head_dim], head_dim a multiple of 4 (rows are read as float4).
// Grid (rows, n_head); block THREADS threads.
// Each thread scores whole positions (its loads are independent, so many are in flight: a warp per position
// waited on one load at a time), then threads take 4 dimensions each and split the positions between them.
extern "C" __global__ void tandem_pass_attention(const float* q, float* out, const unsigned long long* table,
                                                 int parts, int n_head, int n_kv, int head_dim, float scale) {
    __shared__ float query[MAX_HEAD_DIM];
    __shared__ float scores[TILE];
    __shared__ float scratch[THREADS];
    __shared__ float partial[THREADS * 4];
    int row = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
    const unsigned long long* part = table + part_of_row(table, parts, row) * FIELDS;
    long long capacity = (long long)part[2];
    int visible = (int)((long long)part[3] + row - (long long)part[4] + 1);
    int kv_head = h / (n_head / n_kv);
    const float* keys = (const float*)part[0] + (long long)kv_head * capacity * head_dim;
    const float* values = (const float*)part[1] + (long long)kv_head * capacity * head_dim;
    const float* own = q + ((long long)row * n_head + h) * head_dim;
    for (int i = tid; i < head_dim; i += blockDim.x) query[i] = own[i] * scale;
    __syncthreads();
    int quads = head_dim / 4, groups = blockDim.x / quads, quad = tid % quads, group = tid / quads;
    float running_max = NEG_INF, total = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int start = 0; start < visible; start += TILE) {
        int n = min(TILE, visible - start);
        for (int j = tid; j < n; j += blockDim.x) {
            const float4* key = (const float4*)(keys + (long long)(start + j) * head_dim);
            float s = 0.f;
            for (int i = 0; i < quads; i++) {
                float4 k = key[i];
                s += query[4 * i] * k.x + query[4 * i + 1] * k.y + query[4 * i + 2] * k.z + query[4 * i + 3] * k.w;
            }
            scores[j] = s;
        }
        __syncthreads();
        float tile_max = NEG_INF;
        for (int j = tid; j < n; j += blockDim.x) tile_max = fmaxf(tile_max, scores[j]);
        float new_max = fmaxf(running_max, block_reduce(tile_max, scratch, true));
        float tile_sum = 0.f;
        for (int j = tid; j < n; j += blockDim.x) {
            float e = expf(scores[j] - new_max);
            scores[j] = e;
            tile_sum += e;
        }
        tile_sum = block_reduce(tile_sum, scratch, false);  // its barriers also publish the exponentials
        float rescale = expf(running_max - new_max);       // 0 on the first tile
        total = total * rescale + tile_sum;
        acc.x *= rescale;
        acc.y *= rescale;
        acc.z *= rescale;
        acc.w *= rescale;
        if (group < groups) {
#pragma unroll 4
            for (int j = group; j < n; j += groups) {
                float p = scores[j];
                float4 v = ((const float4*)(values + (long long)(start + j) * head_dim))[quad];
                acc.x += p * v.x;
                acc.y += p * v.y;
                acc.z += p * v.z;
                acc.w += p * v.w;
            }
        }
        running_max = new_max;
        __syncthreads();
    }
    if (group < groups) {
        float* mine = partial + group * head_dim + quad * 4;
        mine[0] = acc.x;
        mine[1] = acc.y;
        mine[2] = acc.z;
        mine[3] = acc.w;
    }
    __syncthreads();
    for (int i = tid; i < head_dim; i += blockDim.x) {
        float sum = 0.f;
        for (int g = 0; g < groups; g++) sum += partial[g * head_dim + i];
        out[((long long)row * n_head + h) * head_dim + i] = sum / total;
    }
}
