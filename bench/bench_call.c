/* The C side of bench/bench_python.py (not a test): calls a model the way a C program does and
 * times each call. Built by `make bench` as a small shared module (bench/libbench_call.la) that
 * the Python benchmark loads next to the binding, so the C calls and the Python calls run in
 * one process, on one executor, interleaved block by block: the comparison is not disturbed by
 * two processes meeting different load. Public API only.
 *
 * One call is what `model(x=...)` does from Python: with host inputs, allocate and upload each
 * input, run, read every output into host memory, free the inputs the model keeps (a donated
 * one belongs to the executor after the run); with device inputs (buffers given), run and read
 * the outputs. */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <clrun/clrun.h>

/* Times `calls` calls into times_us[] and, into outside_us[], the part of each spent outside the
 * executor's run (the call minus clrun_exec_stats.wall_ms). host_in[i] holds input i's
 * in_bytes[i] bytes; device_in, when not NULL, holds a live buffer per input instead (nothing is
 * uploaded); host_out[i] receives output i's out_bytes[i] bytes. Returns 0, or the first
 * failing status (the reason in clrun_last_error(ctx)). */
int bench_call_run(clrun_context *ctx, clrun_exec *exec, int32_t inputs_n, void *const *host_in,
                   const uint64_t *in_bytes, const bool *donated, const clrun_buffer *device_in,
                   int32_t outputs_n, void *const *host_out, const uint64_t *out_bytes, int32_t calls,
                   double *times_us, double *outside_us);

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One call. `in` has room for every input. */
static clrun_status call(clrun_context *ctx, clrun_exec *exec, int32_t inputs_n, void *const *host_in,
                         const uint64_t *in_bytes, const bool *donated, const clrun_buffer *device_in,
                         clrun_buffer *in, int32_t outputs_n, void *const *host_out, const uint64_t *out_bytes)
{
    clrun_status status = CLRUN_OK;
    int32_t uploaded = 0;
    for (int32_t i = 0; i < inputs_n && status == CLRUN_OK; i++) {
        if (device_in) {
            in[i] = device_in[i];
            continue;
        }
        status = clrun_alloc_ex(ctx, in_bytes[i], 0, NULL, &in[i]);
        if (status == CLRUN_OK) {
            uploaded++;
            status = clrun_buffer_write(ctx, &in[i], host_in[i]);
        }
    }
    bool ran = false;
    if (status == CLRUN_OK) {
        status = clrun_exec_run(exec, in, inputs_n);
        ran = true;
    }
    for (int32_t i = 0; i < outputs_n && status == CLRUN_OK; i++)
        status = clrun_exec_read_output(exec, i, host_out[i], out_bytes[i]);
    for (int32_t i = 0; i < uploaded; i++)
        if (!(ran && donated[i]))
            clrun_free(ctx, &in[i]);
    return status;
}

int bench_call_run(clrun_context *ctx, clrun_exec *exec, int32_t inputs_n, void *const *host_in,
                   const uint64_t *in_bytes, const bool *donated, const clrun_buffer *device_in,
                   int32_t outputs_n, void *const *host_out, const uint64_t *out_bytes, int32_t calls,
                   double *times_us, double *outside_us)
{
    clrun_buffer in[64];
    if (inputs_n < 0 || inputs_n > 64)
        return CLRUN_ERROR_INVALID_ARGUMENT;
    for (int32_t c = 0; c < calls; c++) {
        double start = now_us();
        clrun_status status = call(ctx, exec, inputs_n, host_in, in_bytes, donated, device_in, in, outputs_n,
                                   host_out, out_bytes);
        times_us[c] = now_us() - start;
        if (status != CLRUN_OK)
            return status;
        clrun_exec_stats stats;
        clrun_exec_stats_get(exec, &stats);
        outside_us[c] = times_us[c] - stats.wall_ms * 1e3;
    }
    return CLRUN_OK;
}
