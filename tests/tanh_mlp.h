/* The deep MLP the train tests (tests/test_train.c, tests/test_train_parallel.c) train: x [rows,
 * width] -> `layers` x tanh(x W + b) -> [rows, outputs], its weights seeded. Include after
 * <cmocka.h>: a failing build step fails the test. */
#ifndef CLRUN_TESTS_TANH_MLP_H
#define CLRUN_TESTS_TANH_MLP_H

#include <stdint.h>
#include <stdio.h>

#include <clrun/clrun.h>

static inline clrun_graph *tanh_mlp(const char *name, int layers, int64_t rows, int64_t width,
                                    int64_t outputs, const char *output_name)
{
    clrun_graph *g = NULL;
    assert_int_equal(clrun_graph_create(name, &g), CLRUN_OK);
    clrun_tensor_type tx = {CLRUN_F32, 2, {rows, width}}, tw = {CLRUN_F32, 2, {width, width}};
    clrun_tensor_type tb = {CLRUN_F32, 1, {width}}, to = {CLRUN_F32, 2, {width, outputs}};
    clrun_tensor_id h;
    assert_int_equal(clrun_graph_add_input(g, "x", &tx, false, &h), CLRUN_OK);
    for (int l = 0; l < layers; l++) {
        char wn[16], bn[16], mn[16], an[16];
        snprintf(wn, sizeof wn, "w%d", l);
        snprintf(bn, sizeof bn, "b%d", l);
        snprintf(mn, sizeof mn, "m%d", l);
        snprintf(an, sizeof an, "a%d", l);
        clrun_tensor_id w, b, m;
        assert_int_equal(clrun_graph_add_constant(g, wn, &tw, NULL, CLRUN_FILL_NORMAL, 0, 0.15,
                                                  10 + (uint64_t)l, &w), CLRUN_OK);
        assert_int_equal(clrun_graph_add_constant(g, bn, &tb, NULL, CLRUN_FILL_UNIFORM, -0.1, 0.1,
                                                  100 + (uint64_t)l, &b), CLRUN_OK);
        const char *mnames[] = {mn}, *anames[] = {an};
        assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){h, w, b}, 3, mnames,
                                              1, NULL, 0, &m), CLRUN_OK);
        assert_int_equal(clrun_graph_add_node(g, "tanh", &m, 1, anames, 1, NULL, 0, &h), CLRUN_OK);
    }
    clrun_tensor_id w, y;
    assert_int_equal(clrun_graph_add_constant(g, "wo", &to, NULL, CLRUN_FILL_NORMAL, 0, 0.15, 9, &w),
                     CLRUN_OK);
    const char *yn[] = {output_name};
    assert_int_equal(clrun_graph_add_node(g, "matmul", (clrun_tensor_id[]){h, w}, 2, yn, 1, NULL, 0, &y),
                     CLRUN_OK);
    assert_int_equal(clrun_graph_mark_output(g, y), CLRUN_OK);
    return g;
}

#endif
