/* The smoke kernel: y = a * x + y over n floats. Proves a device builds and runs clrun's code. */
__kernel void clrun_smoke_axpy(const float a, __global const float *x, __global float *y,
                               const uint n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        y[i] = a * x[i] + y[i];
}

/* Fills n uints with a pattern; the pool tests write blocks with it and check their neighbours. */
__kernel void clrun_smoke_fill_u32(__global uint *out, const uint value, const uint n)
{
    const size_t i = get_global_id(0);
    if (i < n)
        out[i] = value + (uint)i;
}
