/* The operators the importer knows: for each, the opset versions that changed it (its
 * since_versions in the ONNX operator changelog), so a mapping sees the version in force for the
 * model's opset of the op's domain and applies that version's attribute semantics; its host
 * evaluator (fold, when every input is a host constant) and its mapping onto graph ops. The
 * default domain's operators, then those of the other domains clrun maps some of. */
#include <string.h>

#include "onnx/map.h"

#define V(...) {__VA_ARGS__, 0}

static const clrun__onnx_op ops[] = {
    /* elementwise */
    {"Abs", V(1, 6, 13), clrun__fold, clrun__map_unary},
    {"Neg", V(1, 6, 13), clrun__fold, clrun__map_unary},
    {"Relu", V(1, 6, 13, 14), clrun__fold, clrun__map_unary},
    {"Sigmoid", V(1, 6, 13), NULL, clrun__map_unary},
    {"Tanh", V(1, 6, 13), NULL, clrun__map_unary},
    {"Exp", V(1, 6, 13), NULL, clrun__map_unary},
    {"Log", V(1, 6, 13), NULL, clrun__map_unary},
    {"Sqrt", V(1, 6, 13), clrun__fold, clrun__map_unary},
    {"Reciprocal", V(1, 6, 13), clrun__fold, clrun__map_unary},
    {"Floor", V(1, 6, 13), clrun__fold, clrun__map_unary},
    {"Ceil", V(1, 6, 13), clrun__fold, clrun__map_unary},
    {"Round", V(11), clrun__fold, clrun__map_unary},
    {"Sign", V(9, 13), clrun__fold, clrun__map_unary},
    {"Sin", V(7), NULL, clrun__map_unary},
    {"Cos", V(7), NULL, clrun__map_unary},
    {"Tan", V(7), NULL, clrun__map_unary},
    {"Asin", V(7), NULL, clrun__map_unary},
    {"Acos", V(7), NULL, clrun__map_unary},
    {"Atan", V(7), NULL, clrun__map_unary},
    {"Sinh", V(9), NULL, clrun__map_unary},
    {"Cosh", V(9), NULL, clrun__map_unary},
    {"Asinh", V(9), NULL, clrun__map_unary},
    {"Acosh", V(9), NULL, clrun__map_unary},
    {"Atanh", V(9), NULL, clrun__map_unary},
    {"Erf", V(9, 13), NULL, clrun__map_unary},
    {"Softplus", V(1), NULL, clrun__map_unary},
    {"Softsign", V(1), NULL, clrun__map_unary},
    {"HardSwish", V(14), NULL, clrun__map_unary},
    {"Not", V(1), clrun__fold, clrun__map_unary},
    {"LeakyRelu", V(1, 6, 16), NULL, clrun__map_activation},
    {"Elu", V(1, 6), NULL, clrun__map_activation},
    {"Selu", V(1, 6), NULL, clrun__map_activation},
    {"Celu", V(12), NULL, clrun__map_activation},
    {"HardSigmoid", V(1, 6), NULL, clrun__map_activation},
    {"PRelu", V(1, 6, 7, 9, 16), NULL, clrun__map_prelu},
    {"Add", V(1, 6, 7, 13, 14), clrun__fold, clrun__map_binary},
    {"Sub", V(1, 6, 7, 13, 14), clrun__fold, clrun__map_binary},
    {"Mul", V(1, 6, 7, 13, 14), clrun__fold, clrun__map_binary},
    {"Div", V(1, 6, 7, 13, 14), clrun__fold, clrun__map_binary},
    {"Mod", V(10, 13), clrun__fold, clrun__map_binary},
    {"BitShift", V(11), NULL, clrun__map_binary},
    {"BitwiseAnd", V(18), NULL, clrun__map_binary},
    {"BitwiseOr", V(18), NULL, clrun__map_binary},
    {"BitwiseXor", V(18), NULL, clrun__map_binary},
    {"BitwiseNot", V(18), NULL, clrun__map_unary},
    /* linear quantization (map_quant.c) */
    {"QuantizeLinear", V(10, 13, 19, 21), NULL, clrun__map_quantize},
    {"DequantizeLinear", V(10, 13, 19, 21), NULL, clrun__map_dequantize},
    {"DynamicQuantizeLinear", V(11), NULL, clrun__map_dynamic_quantize},
    {"Pow", V(1, 7, 12, 13, 15), clrun__fold, clrun__map_pow},
    {"Equal", V(1, 7, 11, 13, 19), clrun__fold, clrun__map_binary},
    {"Less", V(1, 7, 9, 13), clrun__fold, clrun__map_binary},
    {"Greater", V(1, 7, 9, 13), clrun__fold, clrun__map_binary},
    {"LessOrEqual", V(12, 16), clrun__fold, clrun__map_binary},
    {"GreaterOrEqual", V(12, 16), clrun__fold, clrun__map_binary},
    {"And", V(1, 7), clrun__fold, clrun__map_binary},
    {"Or", V(1, 7), clrun__fold, clrun__map_binary},
    {"Xor", V(1, 7), clrun__fold, clrun__map_binary},
    {"Min", V(1, 6, 8, 12, 13), clrun__fold, clrun__map_variadic},
    {"Max", V(1, 6, 8, 12, 13), clrun__fold, clrun__map_variadic},
    {"Sum", V(1, 6, 8, 13), clrun__fold, clrun__map_variadic},
    {"Mean", V(1, 6, 8, 13), NULL, clrun__map_variadic},
    {"Where", V(9, 16), clrun__fold, clrun__map_where},
    {"Clip", V(1, 6, 11, 12, 13), NULL, clrun__map_clip},
    {"Cast", V(1, 6, 9, 13, 19, 21), NULL, clrun__map_cast},
    {"CastLike", V(15, 19, 21), NULL, clrun__map_cast},
    {"Identity", V(1, 13, 14, 16, 19, 21), NULL, clrun__map_identity},
    {"Dropout", V(1, 6, 7, 10, 12, 13), NULL, clrun__map_identity},
    /* networks */
    {"MatMul", V(1, 9, 13), NULL, clrun__map_matmul},
    {"Gemm", V(1, 6, 7, 9, 11, 13), NULL, clrun__map_gemm},
    {"Conv", V(1, 11), NULL, clrun__map_conv},
    {"ConvTranspose", V(1, 11), NULL, clrun__map_conv_transpose},
    {"Col2Im", V(18), NULL, clrun__map_col2im},
    {"MaxPool", V(1, 8, 10, 11, 12), NULL, clrun__map_pool},
    {"AveragePool", V(1, 7, 10, 11, 19), NULL, clrun__map_pool},
    {"GlobalAveragePool", V(1), NULL, clrun__map_global_pool},
    {"GlobalMaxPool", V(1), NULL, clrun__map_global_pool},
    {"LpPool", V(1, 2, 11, 18), NULL, clrun__map_lp_pool},
    {"GlobalLpPool", V(1, 2), NULL, clrun__map_global_lp_pool},
    {"BatchNormalization", V(1, 6, 7, 9, 14, 15), NULL, clrun__map_batchnorm},
    {"InstanceNormalization", V(1, 6), NULL, clrun__map_instancenorm},
    {"LayerNormalization", V(17), NULL, clrun__map_layernorm},
    {"Softmax", V(1, 11, 13), NULL, clrun__map_softmax},
    {"LogSoftmax", V(1, 11, 13), NULL, clrun__map_softmax},
    /* quantized products */
    {"MatMulInteger", V(10), NULL, clrun__map_matmul_integer},
    {"ConvInteger", V(10), NULL, clrun__map_conv_integer},
    {"QLinearMatMul", V(10, 21), NULL, clrun__map_qlinear_matmul},
    {"QLinearConv", V(10), NULL, clrun__map_qlinear_conv},
    /* reductions */
    {"ReduceSum", V(1, 11, 13), NULL, clrun__map_reduce},
    {"ReduceMean", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ReduceMax", V(1, 11, 12, 13, 18, 20), NULL, clrun__map_reduce},
    {"ReduceMin", V(1, 11, 12, 13, 18, 20), NULL, clrun__map_reduce},
    {"ReduceProd", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ReduceL1", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ReduceL2", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ReduceSumSquare", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ReduceLogSum", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ReduceLogSumExp", V(1, 11, 13, 18), NULL, clrun__map_reduce},
    {"ArgMax", V(1, 11, 12, 13), NULL, clrun__map_arg},
    {"ArgMin", V(1, 11, 12, 13), NULL, clrun__map_arg},
    /* layout */
    {"Reshape", V(1, 5, 13, 14, 19, 21), NULL, clrun__map_reshape},
    {"Flatten", V(1, 9, 11, 13, 21), NULL, clrun__map_reshape},
    {"Squeeze", V(1, 11, 13, 21), NULL, clrun__map_reshape},
    {"Unsqueeze", V(1, 11, 13, 21), NULL, clrun__map_reshape},
    {"Transpose", V(1, 13, 21), NULL, clrun__map_transpose},
    {"Concat", V(1, 4, 11, 13), NULL, clrun__map_concat},
    {"Split", V(1, 2, 11, 13, 18), NULL, clrun__map_split},
    {"Slice", V(1, 10, 11, 13), NULL, clrun__map_slice},
    {"Gather", V(1, 11, 13), NULL, clrun__map_gather},
    {"GatherElements", V(11, 13), NULL, clrun__map_gather_elements},
    {"GatherND", V(11, 12, 13), NULL, clrun__map_gather_nd},
    {"ScatterElements", V(11, 13, 16, 18), NULL, clrun__map_scatter_elements},
    {"Scatter", V(9, 11), NULL, clrun__map_scatter_elements},
    {"ScatterND", V(11, 13, 16, 18), NULL, clrun__map_scatter_nd},
    {"TopK", V(1, 10, 11), NULL, clrun__map_top_k},
    {"Compress", V(9, 11), NULL, clrun__map_compress},
    {"NonZero", V(9, 13), NULL, clrun__map_nonzero},
    {"Unique", V(11), NULL, clrun__map_unique},
    {"Expand", V(8, 13), NULL, clrun__map_expand},
    {"Tile", V(1, 6, 13), NULL, clrun__map_tile},
    {"Pad", V(1, 2, 11, 13, 18, 19, 21), NULL, clrun__map_pad},
    {"DepthToSpace", V(1, 11, 13), NULL, clrun__map_depth_space},
    {"SpaceToDepth", V(1, 13), NULL, clrun__map_depth_space},
    {"Trilu", V(14), NULL, clrun__map_trilu},
    {"CumSum", V(11, 14), NULL, clrun__map_cumsum},
    {"Resize", V(10, 11, 13, 18, 19), NULL, clrun__map_resize},
    {"Upsample", V(7, 9), NULL, clrun__map_resize},
    /* beyond the core list: compositions (map_extra.c) */
    {"Shrink", V(9), NULL, clrun__map_shrink},
    {"ThresholdedRelu", V(10), NULL, clrun__map_shrink},
    {"IsNaN", V(9, 13, 20), NULL, clrun__map_isnan},
    {"IsInf", V(10, 20), NULL, clrun__map_isnan},
    {"EyeLike", V(9), NULL, clrun__map_eyelike},
    {"Hardmax", V(1, 11, 13), NULL, clrun__map_hardmax},
    {"MeanVarianceNormalization", V(9, 13), NULL, clrun__map_mvn},
    {"NegativeLogLikelihoodLoss", V(12, 13), NULL, clrun__map_nll},
    {"SoftmaxCrossEntropyLoss", V(12, 13), NULL, clrun__map_nll},
    {"HannWindow", V(17), NULL, clrun__map_window},
    {"HammingWindow", V(17), NULL, clrun__map_window},
    {"BlackmanWindow", V(17), NULL, clrun__map_window},
    {"DFT", V(17, 20), NULL, clrun__map_dft},
    {"STFT", V(17), NULL, clrun__map_stft},
    {"OneHot", V(9, 11), NULL, clrun__map_onehot},
    {"Einsum", V(12), NULL, clrun__map_einsum},
    {"Det", V(11), NULL, clrun__map_det},
    /* vision (map_vision.c) */
    {"LRN", V(1, 13), NULL, clrun__map_lrn},
    {"GridSample", V(16, 20), NULL, clrun__map_grid_sample},
    {"RoiAlign", V(10, 16), NULL, clrun__map_roi_align},
    {"ReverseSequence", V(10), NULL, clrun__map_reverse_sequence},
    /* detection (map_detect.c) */
    {"NonMaxSuppression", V(10, 11), clrun__fold_nms, clrun__map_nms},
    {"MaxUnpool", V(9, 11), NULL, clrun__map_max_unpool},
    /* recurrent: unrolled over the steps (map_recurrent.c) */
    {"RNN", V(1, 7, 14), NULL, clrun__map_rnn},
    {"GRU", V(1, 3, 7, 14), NULL, clrun__map_gru},
    {"LSTM", V(1, 7, 14), NULL, clrun__map_lstm},
    /* shapes and constants: on the host */
    {"Shape", V(1, 13, 15, 19, 21), NULL, clrun__map_shape},
    {"Size", V(1, 13, 19, 21), NULL, clrun__map_shape},
    {"Constant", V(1, 9, 11, 12, 13, 19, 21), NULL, clrun__map_constant},
    {"ConstantOfShape", V(9, 20, 21), NULL, clrun__map_constant_of_shape},
    {"Range", V(11), NULL, clrun__map_range},
    {"If", V(1, 11, 13, 16, 19, 21), NULL, clrun__map_if},
    {"Scan", V(8, 9, 11, 16, 19, 21), NULL, clrun__map_scan},
    {"Loop", V(1, 11, 13, 16, 19, 21), NULL, clrun__map_loop},
    /* opsets 18 to 21 (map_opset18.c, map_norm.c) */
    {"Gelu", V(20), NULL, clrun__map_gelu},
    {"Mish", V(18), NULL, clrun__map_mish},
    {"GroupNormalization", V(18, 21), NULL, clrun__map_groupnorm},
    {"CenterCropPad", V(18), NULL, clrun__map_center_crop_pad},
};

/* ai.onnx.preview.training: the optimizers (map_training.c); Gradient is not mapped. */
static const clrun__onnx_op training_ops[] = {
    {"Adagrad", V(1), NULL, clrun__map_adagrad},
    {"Adam", V(1), NULL, clrun__map_adam},
    {"Momentum", V(1), NULL, clrun__map_momentum},
};

static const struct domain {
    const char *name;
    const clrun__onnx_op *ops;
    size_t count;
    int newest;  /* the newest opset of the domain clrun knows */
} domains[] = {
    {"ai.onnx.preview.training", training_ops, sizeof training_ops / sizeof training_ops[0], 1},
};

static const struct domain *domain_find(const char *domain)
{
    for (size_t i = 0; i < sizeof domains / sizeof domains[0]; i++)
        if (strcmp(domains[i].name, domain) == 0)
            return &domains[i];
    return NULL;
}

int clrun__onnx_domain_newest(const char *domain)
{
    const struct domain *d = domain_find(domain);
    return d ? d->newest : 0;
}

const clrun__onnx_op *clrun__onnx_op_find(const char *domain, const char *name)
{
    const clrun__onnx_op *list = ops;
    size_t count = sizeof ops / sizeof ops[0];
    if (domain[0]) {
        const struct domain *d = domain_find(domain);
        if (d == NULL)
            return NULL;
        list = d->ops;
        count = d->count;
    }
    for (size_t i = 0; i < count; i++)
        if (strcmp(list[i].name, name) == 0)
            return &list[i];
    return NULL;
}

int clrun__onnx_op_version(const clrun__onnx_op *op, int64_t opset)
{
    int version = 0;
    for (int i = 0; i < 8 && op->versions[i]; i++)
        if (op->versions[i] <= opset)
            version = op->versions[i];
    return version;
}
