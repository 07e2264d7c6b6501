// Elementwise steps of a Qwen2 layer fused into one launch each (see src/kernels/gpu_fused.rs).

#define THREADS 256

// sum = x + delta and normed = sum / sqrt(mean(sum^2) + eps) * weight, row by row ([rows, hidden] each); out
// holds sum, then normed (elements apart). Grid (rows); block THREADS threads.
extern "C" __global__ void tandem_add_rms_norm(const float* x, const float* delta, const float* weight, float* out,
                                               long long elements, int hidden, float eps) {
    __shared__ float scratch[THREADS];
    float* sum = out;
    float* normed = out + elements;
    long long base = (long long)blockIdx.x * hidden;
    float squares = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float s = x[base + i] + delta[base + i];
        sum[base + i] = s;
        squares += s * s;
    }
    scratch[threadIdx.x] = squares;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    float scale = rsqrtf(scratch[0] / hidden + eps);
    // Each thread reads back only the elements it wrote.
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) normed[base + i] = sum[base + i] * scale * weight[i];
}

// out = silu(gate) * up, [rows, width]; gate and up rows start every gate_stride and up_stride elements (they may
// be the two halves of one stacked projection's rows). Any grid; block THREADS threads.
extern "C" __global__ void tandem_silu_mul(const float* gate, const float* up, float* out, int rows, int width,
                                           long long gate_stride, long long up_stride) {
    long long n = (long long)rows * width;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long row = i / width, column = i % width;
        float g = gate[row * gate_stride + column];
        out[i] = g / (1.f + expf(-g)) * up[row * up_stride + column];
    }
}
