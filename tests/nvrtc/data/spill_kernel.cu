// A kernel that needs more registers than -maxrregcount=24 allows, so ptxas spills.
__global__ void spill_kernel(const float* in, float* out, int n) {
  float acc[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = in[threadIdx.x * 48 + i];
  for (int r = 0; r < n; ++r)
#pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + r) % 48] + 1.0f;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i];
  __shared__ float red[128];
  red[threadIdx.x] = s;
  __syncthreads();
  out[threadIdx.x] = red[(threadIdx.x + 1) % 128];
}
