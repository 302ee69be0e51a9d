"""The C library through ctypes: finding libclrun.so, its structures and its prototypes.

Only the public API of libclrun (include/clrun/*.h) is used. Every structure here mirrors its C
declaration field for field; the two must change together.
"""

import ctypes
import ctypes.util
import os

# ---- finding the library ----------------------------------------------------------------------


def _candidates():
    """Where libclrun may be, most specific first."""
    explicit = os.environ.get("CLRUN_LIBRARY")
    if explicit:
        yield explicit
        return
    try:
        from . import _paths  # written by `make install`: where the library was installed
    except ImportError:
        _paths = None
    if _paths is not None:
        yield _paths.LIBRARY
    found = ctypes.util.find_library("clrun")
    if found:
        yield found
    yield "libclrun.so.0"
    yield "/usr/local/lib/libclrun.so.0"  # make install's default prefix, before ldconfig ran


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as error:
            tried.append("%s (%s)" % (path, error))
    raise ImportError(
        "clrun: cannot load libclrun; tried " + "; ".join(tried) +
        ". Install clrun (make install), or set CLRUN_LIBRARY to the path of libclrun.so.0")


lib = _load()

# ---- structures (include/clrun/*.h) -----------------------------------------------------------

MAX_DIMS = 8  # CLRUN_MAX_DIMS
NO_OFFSET = 2**64 - 1  # CLRUN_NO_OFFSET

c_bool = ctypes.c_bool
c_char_p = ctypes.c_char_p
c_double = ctypes.c_double
c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_size_t = ctypes.c_size_t
c_uint = ctypes.c_uint
c_uint32 = ctypes.c_uint32
c_uint64 = ctypes.c_uint64
c_void_p = ctypes.c_void_p
POINTER = ctypes.POINTER
byref = ctypes.byref


# Structures the library fills (an *_init function, a *_get) carry room beyond their last known
# field: a library newer than this binding that appends a field then writes into that room
# instead of past the end, and an options structure set up by its *_init keeps the new field's
# default. Fields other code reads are those listed.
ROOM = ("_room", ctypes.c_uint8 * 256)


def fields(structure):
    """The names of a structure's fields, without the room."""
    return [name for name, _ in structure._fields_ if not name.startswith("_")]


class DeviceInfo(ctypes.Structure):
    """clrun_device_info (context.h)."""
    _fields_ = [
        ("platform_index", c_uint),
        ("device_index", c_uint),
        ("platform_name", ctypes.c_char * 256),
        ("platform_version", ctypes.c_char * 256),
        ("name", ctypes.c_char * 256),
        ("vendor", ctypes.c_char * 256),
        ("version", ctypes.c_char * 256),
        ("driver_version", ctypes.c_char * 256),
        ("c_version", ctypes.c_char * 256),
        ("cl_major", c_uint),
        ("cl_minor", c_uint),
        ("type", c_char_p),
        ("base_addr_align", c_uint64),
        ("max_alloc", c_uint64),
        ("global_mem", c_uint64),
        ("local_mem", c_uint64),
        ("compute_units", c_uint32),
        ("max_work_group", c_size_t),
        ("profiling", c_bool),
        ("out_of_order", c_bool),
        ("fp16", c_bool),
        ("fp64", c_bool),
    ]


class ContextOptions(ctypes.Structure):
    """clrun_context_options (context.h)."""
    _fields_ = [
        ("platform", c_char_p),
        ("device", c_char_p),
        ("allocator", c_char_p),
        ("out_of_order", c_int),
        ("guard", c_int),
        ("cache", c_int),
        ("cache_dir", c_char_p),
        ("pool_limit", c_uint64),
        ROOM,
    ]


class TensorType(ctypes.Structure):
    """clrun_tensor_type (graph.h)."""
    _fields_ = [("dtype", c_int), ("rank", c_int), ("shape", c_int64 * MAX_DIMS)]


class Buffer(ctypes.Structure):
    """clrun_buffer (memory.h): a block of device memory, a value."""
    _fields_ = [
        ("mem", c_void_p),
        ("size", c_uint64),
        ("chunk", c_uint32),
        ("offset", c_uint64),
        ("slot", c_uint32),
        ("generation", c_uint32),
    ]


class MemoryStats(ctypes.Structure):
    """clrun_memory_stats (memory.h)."""
    _fields_ = [
        ("strategy", c_char_p),
        ("in_use", c_uint64),
        ("in_use_peak", c_uint64),
        ("held", c_uint64),
        ("reserved", c_uint64),
        ("reserved_peak", c_uint64),
        ("alloc_count", c_uint64),
        ("free_count", c_uint64),
        ("driver_allocs", c_uint64),
        ("driver_frees", c_uint64),
        ("chunks", c_uint32),
        ("free_bytes", c_uint64),
        ("largest_free", c_uint64),
        ("fragmentation", c_double),
        ("limit", c_uint64),
        ("resident", c_uint64),
        ("raw", c_uint64),
        ("host", c_uint64),
        ROOM,
    ]


class ExecOptions(ctypes.Structure):
    """clrun_exec_options (exec.h)."""
    _fields_ = [("mode", c_int), ("profile", c_bool), ("plan_time_limit_s", c_double),
                ("fusion", c_int), ("fold", c_int), ("memory_budget", c_uint64), ROOM]


class ExecStats(ctypes.Structure):
    """clrun_exec_stats (exec.h)."""
    _fields_ = [
        ("mode", c_char_p),
        ("allocator", c_char_p),
        ("steps", c_int32),
        ("peak_bytes", c_uint64),
        ("reserved_bytes", c_uint64),
        ("lower_bound_bytes", c_uint64),
        ("naive_bytes", c_uint64),
        ("constant_bytes", c_uint64),
        ("driver_allocs", c_uint64),
        ("donations", c_int32),
        ("donated_in_place", c_int32),
        ("unused_donations", c_int32),
        ("wall_ms", c_double),
        ("views", c_int32),
        ("graph_nodes", c_int32),
        ("kernels", c_int32),
        ("fused_groups", c_int32),
        ("fused_nodes", c_int32),
        ("folded_nodes", c_int32),
        ("folded_batchnorms", c_int32),
        ("arena_bytes", c_uint64),
        ("budget_bytes", c_uint64),
        ("held_bytes", c_uint64),
        ("recomputed_tensors", c_int32),
        ("recomputed_nodes", c_int32),
        ("recomputed_bytes", c_uint64),
        ("recomputed_flops", c_uint64),
        ("offloaded_tensors", c_int32),
        ("offloaded_bytes", c_uint64),
        ("host_bytes", c_uint64),
        ("assembled_concats", c_int32),
        ("assembled_in_part", c_int32),
        ROOM,
    ]


class ExecSpan(ctypes.Structure):
    """clrun_exec_span (exec.h)."""
    _fields_ = [
        ("op", c_char_p),
        ("name", c_char_p),
        ("start_ns", c_uint64),
        ("end_ns", c_uint64),
        ("bytes_in_use", c_uint64),
        ("bytes_after", c_uint64),
    ]


class ExecBufferInfo(ctypes.Structure):
    """clrun_exec_buffer_info (exec.h)."""
    _fields_ = [
        ("tensor", c_char_p),
        ("bytes", c_uint64),
        ("first_step", c_int32),
        ("last_step", c_int32),
        ("is_input", c_bool),
        ("is_output", c_bool),
        ("is_scratch", c_bool),
        ("offset", c_uint64),
    ]


class OnnxDim(ctypes.Structure):
    """clrun_onnx_dim (onnx.h)."""
    _fields_ = [("name", c_char_p), ("value", c_int64)]


class OnnxShape(ctypes.Structure):
    """clrun_onnx_shape (onnx.h)."""
    _fields_ = [("input", c_char_p), ("rank", c_int), ("dims", c_int64 * MAX_DIMS)]


class OnnxConstant(ctypes.Structure):
    """clrun_onnx_constant (onnx.h): an input fixed at load."""
    _fields_ = [("input", c_char_p), ("type", TensorType), ("data", c_void_p)]


class OnnxOptions(ctypes.Structure):
    """clrun_onnx_options (onnx.h)."""
    _fields_ = [
        ("dims", POINTER(OnnxDim)),
        ("dim_count", c_int),
        ("shapes", POINTER(OnnxShape)),
        ("shape_count", c_int),
        ("default_dim", c_int64),
        ("constants", POINTER(OnnxConstant)),
        ("constant_count", c_int),
        ("external_data_dir", c_char_p),
        ("err", c_char_p),
        ("errlen", c_size_t),
        ROOM,
    ]


class Optimizer(ctypes.Structure):
    """clrun_optimizer (train_graph.h)."""
    _fields_ = [
        ("kind", c_int),
        ("lr", c_double),
        ("momentum", c_double),
        ("nesterov", c_bool),
        ("weight_decay", c_double),
        ("beta1", c_double),
        ("beta2", c_double),
        ("eps", c_double),
    ]


class TrainGraphOptions(ctypes.Structure):
    """clrun_train_graph_options (train_graph.h). No room: it is the first member of
    clrun_train_options, whose exec options follow it."""
    _fields_ = [
        ("loss", c_int),
        ("loss_tensor", c_char_p),
        ("label_dtype", c_int),
        ("params", POINTER(c_char_p)),
        ("param_count", c_int32),
        ("optimizer", Optimizer),
        ("dropout_seed", ctypes.c_uint64),
        ("no_donation", c_bool),
        ("keep_gradients", c_bool),
        ("remat", c_char_p),
        ("memory_budget", c_uint64),
    ]


class TrainOptions(ctypes.Structure):
    """clrun_train_options (train.h): the exec options last, with their room."""
    _fields_ = [("graph", TrainGraphOptions), ("exec", ExecOptions)]


class TrainStepResult(ctypes.Structure):
    """clrun_train_step_result (train.h)."""
    _fields_ = [("step", c_uint64), ("loss", c_double), ("correct", c_int64), ("rows", c_int64)]


class TrainEvalResult(ctypes.Structure):
    """clrun_train_eval_result (train.h)."""
    _fields_ = [("loss", c_double), ("correct", c_int64), ("rows", c_int64)]


class RematReport(ctypes.Structure):
    """clrun_remat_report (remat.h)."""
    _fields_ = [("dropped", c_int32), ("repeated_nodes", c_int32), ("dropped_bytes", c_uint64),
                ("repeated_flops", c_uint64)]


class TrainStats(ctypes.Structure):
    """clrun_train_stats (train.h): the executor's figures last, with their room."""
    _fields_ = [
        ("steps", c_uint64),
        ("params", c_int32),
        ("state_tensors", c_int32),
        ("param_bytes", c_uint64),
        ("state_bytes", c_uint64),
        ("peak_bytes", c_uint64),
        ("activation_peak_bytes", c_uint64),
        ("lower_bound_bytes", c_uint64),
        ("donated_bytes", c_uint64),
        ("donations", c_int32),
        ("donated_in_place", c_int32),
        ("unused_donations", c_int32),
        ("remat", RematReport),
        ("remat_policy", c_char_p),
        ("planned_peak_bytes", c_uint64),
        ("host_bytes", c_uint64),
        ("exec", ExecStats),
    ]


# Opaque handles are plain void pointers.
context_p = c_void_p
graph_p = c_void_p
exec_p = c_void_p
train_p = c_void_p

# ---- prototypes -------------------------------------------------------------------------------


def _proto(name, restype, *argtypes):
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


def optional(name, restype, *argtypes):
    """A function that newer libraries have, or None (e.g. clrun_graph_load_onnx)."""
    try:
        return _proto(name, restype, *argtypes)
    except AttributeError:
        return None


version = _proto("clrun_version", c_char_p)
strerror = _proto("clrun_strerror", c_char_p, c_int)
status_name = _proto("clrun_status_name", c_char_p, c_int)
last_error = _proto("clrun_last_error", c_char_p, context_p)
parse_size = _proto("clrun_parse_size", c_bool, c_char_p, POINTER(c_uint64))

device_list = _proto("clrun_device_list", c_int, POINTER(POINTER(DeviceInfo)), POINTER(c_size_t))
device_list_free = _proto("clrun_device_list_free", None, POINTER(DeviceInfo))
device_select = _proto("clrun_device_select", c_int, POINTER(DeviceInfo), c_size_t, c_char_p,
                       c_char_p, POINTER(c_size_t))

context_options_init = _proto("clrun_context_options_init", None, POINTER(ContextOptions))
context_create = _proto("clrun_context_create", c_int, POINTER(ContextOptions), POINTER(context_p))
context_destroy = _proto("clrun_context_destroy", None, context_p)
context_device = _proto("clrun_context_device", POINTER(DeviceInfo), context_p)
context_cl = _proto("clrun_context_cl", c_void_p, context_p)

alloc_ex = _proto("clrun_alloc_ex", c_int, context_p, c_uint64, c_uint64, c_char_p, POINTER(Buffer))
free = _proto("clrun_free", c_int, context_p, POINTER(Buffer))
buffer_write = _proto("clrun_buffer_write", c_int, context_p, POINTER(Buffer), c_void_p)
buffer_read = _proto("clrun_buffer_read", c_int, context_p, POINTER(Buffer), c_void_p)
pool_trim = _proto("clrun_pool_trim", c_int, context_p, POINTER(c_uint64))
pool_check = _proto("clrun_pool_check", c_int, context_p)
memory_stats_get = _proto("clrun_memory_stats_get", c_int, context_p, POINTER(MemoryStats))
memory_reset_peaks = _proto("clrun_memory_reset_peaks", None, context_p)

dtype_name = _proto("clrun_dtype_name", c_char_p, c_int)
dtype_size = _proto("clrun_dtype_size", c_size_t, c_int)
graph_load = _proto("clrun_graph_load", c_int, c_char_p, POINTER(graph_p), c_char_p, c_size_t)
graph_destroy = _proto("clrun_graph_destroy", None, graph_p)
graph_name = _proto("clrun_graph_name", c_char_p, graph_p)
graph_inputs = _proto("clrun_graph_inputs", c_int32, graph_p, POINTER(POINTER(c_int32)))
graph_outputs = _proto("clrun_graph_outputs", c_int32, graph_p, POINTER(POINTER(c_int32)))
graph_tensor_name = _proto("clrun_graph_tensor_name", c_char_p, graph_p, c_int32)
graph_tensor_type = _proto("clrun_graph_tensor_type", POINTER(TensorType), graph_p, c_int32)
graph_tensor_donated = _proto("clrun_graph_tensor_donated", c_bool, graph_p, c_int32)
graph_set_donated = _proto("clrun_graph_set_donated", c_int, graph_p, c_int32, c_bool)
graph_example_input = _proto("clrun_graph_example_input", c_int, graph_p, c_int32, c_uint64,
                             c_void_p, c_uint64)
graph_last_error = _proto("clrun_graph_last_error", c_char_p, graph_p)
graph_find = _proto("clrun_graph_find", c_int32, graph_p, c_char_p)
graph_tensor_count = _proto("clrun_graph_tensor_count", c_int32, graph_p)
graph_tensor_ident = _proto("clrun_graph_tensor_ident", c_char_p, graph_p, c_int32)
graph_set_model_name = _proto("clrun_graph_set_model_name", c_int, graph_p, c_int32, c_char_p)
# clrun_graph_write takes a stdio stream: libc's fopen and fclose make one (Model.save_graph).
graph_write = _proto("clrun_graph_write", c_int, graph_p, c_void_p)
# ONNX import (onnx.h): a library built without it lacks these; ctx.load says so clearly.
graph_load_onnx = optional("clrun_graph_load_onnx", c_int, c_char_p, POINTER(OnnxOptions),
                           POINTER(graph_p))
graph_load_onnx_memory = optional("clrun_graph_load_onnx_memory", c_int, c_void_p, c_size_t,
                                  c_char_p, POINTER(OnnxOptions), POINTER(graph_p))
onnx_options_init = optional("clrun_onnx_options_init", None, POINTER(OnnxOptions))

exec_options_init = _proto("clrun_exec_options_init", None, POINTER(ExecOptions))
exec_create = _proto("clrun_exec_create", c_int, context_p, graph_p, POINTER(ExecOptions),
                     POINTER(exec_p))
exec_destroy = _proto("clrun_exec_destroy", None, exec_p)
exec_run = _proto("clrun_exec_run", c_int, exec_p, POINTER(Buffer), c_int32)
exec_read_output = _proto("clrun_exec_read_output", c_int, exec_p, c_int32, c_void_p, c_uint64)
exec_stats_get = _proto("clrun_exec_stats_get", c_int, exec_p, POINTER(ExecStats))
exec_unused_donations = _proto("clrun_exec_unused_donations", c_int32, exec_p,
                               POINTER(POINTER(c_char_p)))
exec_offloaded = _proto("clrun_exec_offloaded", c_int32, exec_p,
                        POINTER(POINTER(c_char_p)))
exec_profile = _proto("clrun_exec_profile", c_int32, exec_p, POINTER(POINTER(ExecSpan)))
exec_layout = _proto("clrun_exec_layout", c_int, exec_p, POINTER(ExecBufferInfo), c_int32,
                     POINTER(c_int32))

# Training (train.h, train_graph.h, grad.h): a library without it lacks these; ctx.train says so.
train_options_init = optional("clrun_train_options_init", None, POINTER(TrainOptions))
optimizer_init = optional("clrun_optimizer_init", None, POINTER(Optimizer), c_int)
train_create = optional("clrun_train_create", c_int, context_p, graph_p, POINTER(TrainOptions),
                        POINTER(train_p))
train_destroy = optional("clrun_train_destroy", None, train_p)
train_feed_count = optional("clrun_train_feed_count", c_int32, train_p)
train_feed_info = optional("clrun_train_feed_info", c_int, train_p, c_int32, POINTER(c_char_p),
                           POINTER(TensorType))
train_step = optional("clrun_train_step", c_int, train_p, POINTER(c_void_p), c_int32,
                      POINTER(TrainStepResult))
train_evaluate = optional("clrun_train_evaluate", c_int, train_p, POINTER(c_void_p), c_int32,
                          c_int64, POINTER(TrainEvalResult))
train_param_count = optional("clrun_train_param_count", c_int32, train_p)
train_param_info = optional("clrun_train_param_info", c_int, train_p, c_int32, POINTER(c_char_p),
                            POINTER(TensorType))
train_read_param = optional("clrun_train_read_param", c_int, train_p, c_int32, c_void_p, c_uint64)
train_read_gradient = optional("clrun_train_read_gradient", c_int, train_p, c_int32, c_void_p,
                               c_uint64)
train_save = optional("clrun_train_save", c_int, train_p, c_char_p)
train_load = optional("clrun_train_load", c_int, train_p, c_char_p)
train_stats_get = optional("clrun_train_stats_get", c_int, train_p, POINTER(TrainStats))
train_unused_donations = optional("clrun_train_unused_donations", c_int32, train_p,
                                  POINTER(POINTER(c_char_p)))
train_frozen = optional("clrun_train_frozen", c_int32, train_p, POINTER(POINTER(c_char_p)))
op_differentiable = optional("clrun_op_differentiable", c_bool, c_char_p)
graph_trainable = optional("clrun_graph_trainable", c_int, graph_p, c_int32, POINTER(c_int32),
                           c_int32, POINTER(c_int32))
class WeightsReport(ctypes.Structure):
    _fields_ = [("narrowed", c_int32), ("kept", c_int32), ("bytes_before", c_uint64),
                ("bytes_after", c_uint64)]


graph_narrow_weights = optional("clrun_graph_narrow_weights", c_int, graph_p, c_int, c_int64,
                                POINTER(WeightsReport))
graph_gradient = optional("clrun_graph_gradient", c_int, graph_p, c_int32, POINTER(c_int32),
                          c_int32, POINTER(graph_p), POINTER(POINTER(c_int32)), POINTER(c_int32),
                          c_char_p, c_size_t)

# Pipelines (pipeline.h)
class PipelineOptions(ctypes.Structure):
    """clrun_pipeline_options (pipeline.h)."""
    _fields_ = [("platform", c_char_p), ("allocator", c_char_p), ("exec", POINTER(ExecOptions))]


class PipelineStageInfo(ctypes.Structure):
    """clrun_pipeline_stage_info (pipeline.h)."""
    _fields_ = [("device", ctypes.c_uint), ("device_name", c_char_p), ("first_node", c_int32),
                ("end_node", c_int32), ("limit_bytes", c_uint64), ("estimate_bytes", c_uint64),
                ("weights_bytes", c_uint64), ("peak_bytes", c_uint64), ("bytes_in", c_uint64),
                ("bytes_out", c_uint64), ("wall_ms", c_double)]


class PipelineRunInfo(ctypes.Structure):
    """clrun_pipeline_run_info (pipeline.h)."""
    _fields_ = [("micro_batches", c_int32), ("slots", c_int32), ("threads", c_int32),
                ("wall_ms", c_double), ("busy_ms", c_double), ("bubble_fraction", c_double),
                ("bytes_moved", c_uint64), ("handoff_bytes", c_uint64)]


pipeline_options_init = _proto("clrun_pipeline_options_init", None, POINTER(PipelineOptions))
pipeline_create = _proto("clrun_pipeline_create", c_int, graph_p, POINTER(ctypes.c_uint),
                         POINTER(c_uint64), c_int32, POINTER(PipelineOptions), POINTER(c_void_p))
pipeline_destroy = _proto("clrun_pipeline_destroy", None, c_void_p)
pipeline_run = _proto("clrun_pipeline_run", c_int, c_void_p, POINTER(c_void_p), POINTER(c_uint64),
                      c_int32)
pipeline_read_output = _proto("clrun_pipeline_read_output", c_int, c_void_p, c_int32, c_void_p,
                              c_uint64)
pipeline_run_many = _proto("clrun_pipeline_run_many", c_int, c_void_p, c_int32, POINTER(c_void_p),
                           POINTER(c_uint64), c_int32, POINTER(c_void_p), POINTER(c_uint64),
                           c_int32)
pipeline_run_info_get = _proto("clrun_pipeline_run_info_get", c_int, c_void_p,
                               POINTER(PipelineRunInfo))
pipeline_stage_count = _proto("clrun_pipeline_stage_count", c_int32, c_void_p)
pipeline_stage_info_get = _proto("clrun_pipeline_stage_info_get", c_int, c_void_p, c_int32,
                                 POINTER(PipelineStageInfo))

# Data-parallel inference (run_parallel.h)
class RunParallelOptions(ctypes.Structure):
    """clrun_run_parallel_options (run_parallel.h)."""
    _fields_ = [("platform", c_char_p), ("allocator", c_char_p), ("pool_limit", c_uint64),
                ("exec", POINTER(ExecOptions)), ROOM]


class RunParallelDeviceInfo(ctypes.Structure):
    """clrun_run_parallel_device_info (run_parallel.h)."""
    _fields_ = [("device", ctypes.c_uint), ("device_name", c_char_p), ("first_row", c_int64),
                ("rows", c_int64), ("weights_bytes", c_uint64), ("peak_bytes", c_uint64),
                ("run_peak_bytes", c_uint64), ("wall_ms", c_double), ("run_ms", c_double)]


run_parallel_options_init = _proto("clrun_run_parallel_options_init", None,
                                   POINTER(RunParallelOptions))
run_parallel_create = _proto("clrun_run_parallel_create", c_int, POINTER(graph_p),
                             POINTER(ctypes.c_uint), c_int32, POINTER(RunParallelOptions),
                             POINTER(c_void_p))
run_parallel_destroy = _proto("clrun_run_parallel_destroy", None, c_void_p)
run_parallel_count = _proto("clrun_run_parallel_count", c_int32, c_void_p)
run_parallel_batch = _proto("clrun_run_parallel_batch", c_int64, c_void_p)
run_parallel_input_bytes = _proto("clrun_run_parallel_input_bytes", c_uint64, c_void_p, c_int32)
run_parallel_output_bytes = _proto("clrun_run_parallel_output_bytes", c_uint64, c_void_p, c_int32)
run_parallel_run = _proto("clrun_run_parallel_run", c_int, c_void_p, POINTER(c_void_p),
                          POINTER(c_uint64), c_int32, POINTER(c_void_p), POINTER(c_uint64),
                          c_int32)
run_parallel_device_info_get = _proto("clrun_run_parallel_device_info_get", c_int, c_void_p,
                                      c_int32, POINTER(RunParallelDeviceInfo))
run_parallel_wall_ms = _proto("clrun_run_parallel_wall_ms", c_double, c_void_p)
train_parallel_share = _proto("clrun_train_parallel_share", c_int, c_int64, c_int32, c_int32,
                              POINTER(c_int64), POINTER(c_int64))

# The C library's own stdio and allocator: a stream for clrun_graph_write, and free() for the
# arrays the library hands over (clrun_graph_gradient's `unused`, which the caller frees).
libc = ctypes.CDLL(None, use_errno=True)
fopen = libc.fopen
fopen.restype, fopen.argtypes = c_void_p, [c_char_p, c_char_p]
fclose = libc.fclose
fclose.restype, fclose.argtypes = c_int, [c_void_p]
libc_free = libc.free
libc_free.restype, libc_free.argtypes = None, [c_void_p]

LOSS_KINDS = {"xent": 0, "mse": 1, "scalar": 2}  # clrun_loss_kind
OPTIMIZER_KINDS = {"sgd": 0, "adam": 1, "adamw": 2}  # clrun_optimizer_kind

EXEC_MODES = {"pooled": 0, "naive": 1, "planned": 2, "context": 3}  # clrun_exec_mode


def statuses():
    """Every status the library has, {code: name}, read from the library (clrun_status_name):
    the codes run down from -1 without a gap (CLRUN_STATUS_TABLE in status.h)."""
    out = {}
    code = -1
    while code > -1000:
        name = text(status_name(code))
        if not name.startswith("CLRUN_ERROR_"):
            return out
        out[code] = name
        code -= 1
    return out


def dtypes():
    """Every dtype the library has, {code: (name, bytes)}, read from the library
    (clrun_dtype_name, clrun_dtype_size): the codes run up from 0 without a gap."""
    out = {}
    code = 0
    while code < 1000:
        size = dtype_size(code)
        if not size:
            return out
        out[code] = (text(dtype_name(code)), size)
        code += 1
    return out


def text(value):
    """A C string from the library as str ('' for NULL)."""
    return value.decode("utf-8", "replace") if value else ""
