__global__ void spmv_csr(int rows, const int* row_ptr, const int* cols, const float* vals, const float* x,
                         const float* scale, float* y) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    float sum = 0.0f;
    for (int j = row_ptr[row]; j < row_ptr[row + 1]; ++j) sum += vals[j] * x[cols[j]] * scale[0];
    y[row] = sum;
}
