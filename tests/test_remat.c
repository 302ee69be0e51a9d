/* Rematerialisation as a graph rewrite (include/clrun/remat.h), without a device: which tensors
 * each policy drops, where the repeated nodes go, what stays as it was, and refusals. The same
 * bits on the device, and the lower peak, are tests/test_train.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <clrun/clrun.h>

#include "grad/remat_drop.h"
#include "graph/graph.h"

/* First part (nodes 0-4): a = relu(x), b = tanh(a), c = mul(b, b), m = matmul(c, w),
 * d = dropout(m, seed); the second part reads a, b, d and m, and c through nothing. */
static const char text[] =
    "graph r\n"
    "input x: f32[4, 4]\n"
    "input seed: i64[]\n"
    "const w: f32[4, 4] uniform(-1, 1) seed=1\n"
    "node a: f32[4, 4] = relu(x)\n"
    "node b: f32[4, 4] = tanh(a)\n"
    "node c: f32[4, 4] = mul(b, b)\n"
    "node m: f32[4, 4] = matmul(c, w)\n"
    "node d: f32[4, 4] = dropout(m, seed) ratio=0.25\n"
    "node e: f32[4, 4] = add(d, a)\n"
    "node f: f32[4, 4] = mul(e, b)\n"
    "node g: f32[4, 4] = sub(f, m)\n"
    "output g\n";

static clrun_graph *parse(void)
{
    clrun_graph *g = NULL;
    char err[256];
    if (clrun_graph_parse(text, strlen(text), "r.graph", &g, err, sizeof err) != CLRUN_OK)
        fail_msg("%s", err);
    return g;
}

static int32_t node_writing(const clrun_graph *g, const char *name)
{
    clrun_tensor_id t = clrun_graph_find(g, name);
    assert_true(t >= 0);
    return g->tensors[t].producer;
}

/* The tensor node n reads as input i, by name. */
static const char *read_by(const clrun_graph *g, const char *writes, int i)
{
    return g->tensors[g->nodes[node_writing(g, writes)].inputs[i]].name;
}

/* The node order by the names the nodes write, "a b c ..." */
static void expect_order(const clrun_graph *g, const char *want)
{
    char got[512] = "";
    for (int32_t n = 0; n < g->node_count; n++) {
        if (n)
            strcat(got, " ");
        strcat(got, g->tensors[g->nodes[n].outputs[0]].name);
    }
    if (strcmp(got, want) != 0)
        fail_msg("order: %s, expected %s", got, want);
}

/* Tensor ids, names, types, inputs and outputs of the original graph are as they were, and the
 * result is a valid graph. */
static void expect_kept(clrun_graph *g)
{
    clrun_graph *o = parse();
    for (int32_t t = 0; t < clrun_graph_tensor_count(o); t++) {
        assert_string_equal(g->tensors[t].name, o->tensors[t].name);
        assert_int_equal(g->tensors[t].kind, o->tensors[t].kind);
    }
    const clrun_tensor_id *a, *b;
    assert_int_equal(clrun_graph_inputs(g, &a), clrun_graph_inputs(o, &b));
    assert_memory_equal(a, b, sizeof *a * (size_t)clrun_graph_inputs(o, &b));
    assert_int_equal(clrun_graph_outputs(g, &a), clrun_graph_outputs(o, &b));
    assert_memory_equal(a, b, sizeof *a * (size_t)clrun_graph_outputs(o, &b));
    clrun_graph_destroy(o);
    if (clrun_graph_validate(g) != CLRUN_OK)
        fail_msg("%s", clrun_graph_last_error(g));
}

static void nothing_saveable_repeats_the_first_part_before_its_reader(void **state)
{
    (void)state;
    clrun_graph *g = parse();
    clrun_remat_report r;
    assert_int_equal(clrun_graph_remat(g, 5, "nothing_saveable", &r), CLRUN_OK);
    /* e reads d (from m, from c, from b, from a) and a; f reads b, g reads m: each copied once,
     * before e, the first reader, in the order they are needed */
    assert_int_equal(r.dropped, 5);
    assert_int_equal(r.repeated_nodes, 5);
    assert_int_equal(r.dropped_bytes, 5 * 64);
    expect_order(g, "a b c m d a.remat b.remat c.remat m.remat d.remat e f g");
    assert_string_equal(read_by(g, "e", 0), "d.remat");
    assert_string_equal(read_by(g, "e", 1), "a.remat");
    assert_string_equal(read_by(g, "f", 1), "b.remat");
    assert_string_equal(read_by(g, "g", 1), "m.remat");
    /* the first part still reads the originals; the copy of the dropout the same seed, ratio */
    assert_string_equal(read_by(g, "b", 0), "a");
    assert_string_equal(read_by(g, "d.remat", 1), "seed");
    const clrun__node *copy = &g->nodes[node_writing(g, "d.remat")];
    assert_int_equal(copy->attr_count, 1);
    assert_string_equal(copy->attrs[0].name, "ratio");
    expect_kept(g);
    clrun_graph_destroy(g);
}

static void each_policy_keeps_what_it_names(void **state)
{
    (void)state;
    static const struct {
        const char *policy;
        int dropped;
        const char *order;
    } cases[] = {
        /* the matmul's output kept: c is needed no more */
        {"dots_saveable", 3, "a b c m d d.remat a.remat e b.remat f g"},
        {"names:b,m", 2, "a b c m d d.remat a.remat e f g"},
        {"except:a,d", 2, "a b c m d d.remat a.remat e f g"},
        {"except:b", 1, "a b c m d e b.remat f g"},
        /* the segments' ends kept, and the last segment (the one holding d, the last tensor
         * the second part reads) whole: the second part would repeat it at once */
        {"every:3", 2, "a b c m d a.remat e b.remat f g"}, /* sqrt_n's: c, m and d kept */
        {"every:2", 1, "a b c m d a.remat e f g"}, /* the 2nd and 4th, b and m, kept, and d */
        {"every:1", 0, "a b c m d e f g"},
        /* five first-part nodes: segments of ceil(sqrt 5) = 3, c (the third) kept, then m, d */
        {"sqrt_n", 2, "a b c m d a.remat e b.remat f g"},
        {"none", 0, "a b c m d e f g"},
        {"", 0, "a b c m d e f g"},
        {NULL, 0, "a b c m d e f g"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        clrun_graph *g = parse();
        clrun_remat_report r;
        assert_int_equal(clrun_graph_remat(g, 5, cases[k].policy, &r), CLRUN_OK);
        assert_int_equal(r.dropped, cases[k].dropped);
        expect_order(g, cases[k].order);
        expect_kept(g);
        clrun_graph_destroy(g);
    }
}

/* The last segment is the one holding the last first-part node whose tensor the second part
 * reads: a first-part node after it that only an output reads (a train step's accuracy count)
 * does not move it. First part a b c d k (k an output), second part reading a, c and d. */
static void the_last_segment_is_the_last_one_read(void **state)
{
    (void)state;
    static const char tail[] =
        "graph t\n"
        "input x: f32[4, 4]\n"
        "node a: f32[4, 4] = relu(x)\n"
        "node b: f32[4, 4] = tanh(a)\n"
        "node c: f32[4, 4] = mul(b, b)\n"
        "node d: f32[4, 4] = tanh(c)\n"
        "node k: f32[4, 4] = relu(d)\n"
        "node e: f32[4, 4] = add(a, c)\n"
        "node f: f32[4, 4] = mul(e, d)\n"
        "output f\n"
        "output k\n";
    static const struct {
        const char *policy;
        int dropped;
        const char *order;
    } cases[] = {
        /* segments a b | c d | k: b and d end theirs; d is the last read, so c d (and k) stay;
         * with the boundary's last node instead, c would be repeated */
        {"every:2", 1, "a b c d k a.remat e f"},
        /* segments a b c | d k: c ends the first, d is in the last one read, kept whole */
        {"every:3", 1, "a b c d k a.remat e f"},
        /* segments of 4: a b c d is the last one read, kept whole; nothing repeated */
        {"every:4", 0, "a b c d k e f"},
    };
    for (size_t n = 0; n < sizeof cases / sizeof cases[0]; n++) {
        clrun_graph *g = NULL;
        char err[256];
        if (clrun_graph_parse(tail, strlen(tail), "t.graph", &g, err, sizeof err) != CLRUN_OK)
            fail_msg("%s", err);
        clrun_remat_report r;
        assert_int_equal(clrun_graph_remat(g, 5, cases[n].policy, &r), CLRUN_OK);
        assert_int_equal(r.dropped, cases[n].dropped);
        expect_order(g, cases[n].order);
        clrun_graph_destroy(g);
    }
}

/* cuts:K ends segments only where nothing made before crosses: on a residual chain (first part
 * a b r1 c r2 d r3, r = add(previous r, tanh(previous r)), a read again by r1) the cuts are a,
 * r1, r2 and r3, never b, c or d. The second part reads b, c, d and r3. */
static void cut_segments_end_where_nothing_crosses(void **state)
{
    (void)state;
    static const char chain[] =
        "graph c\n"
        "input x: f32[4, 4]\n"
        "node a: f32[4, 4] = relu(x)\n"
        "node b: f32[4, 4] = tanh(a)\n"
        "node r1: f32[4, 4] = add(a, b)\n"
        "node c: f32[4, 4] = tanh(r1)\n"
        "node r2: f32[4, 4] = add(r1, c)\n"
        "node d: f32[4, 4] = tanh(r2)\n"
        "node r3: f32[4, 4] = add(r2, d)\n"
        "node s: f32[4, 4] = mul(r3, d)\n"
        "node u: f32[4, 4] = add(s, c)\n"
        "node v: f32[4, 4] = mul(u, b)\n"
        "output v\n";
    static const struct {
        const char *policy;
        int dropped;
        const char *order;
    } cases[] = {
        /* every cut kept (the last within two nodes), and the last segment read (d r3)
         * whole: b and c each repeated from one */
        {"cuts:2", 2, "a b r1 c r2 d r3 s c.remat u b.remat v"},
        /* r1 three nodes on, then r2 the last cut within three of it; the last segment read
         * (d r3) whole; a is no cut kept: b is repeated from a repeated a */
        {"cuts:3", 3, "a b r1 c r2 d r3 s c.remat u a.remat b.remat v"},
        {"cuts", 3, "a b r1 c r2 d r3 s c.remat u a.remat b.remat v"}, /* ceil(sqrt 7) = 3 */
        /* within 7 nodes the last cut is r3: all seven one segment, the last read, kept */
        {"cuts:7", 0, "a b r1 c r2 d r3 s u v"},
    };
    for (size_t n = 0; n < sizeof cases / sizeof cases[0]; n++) {
        clrun_graph *g = NULL;
        char err[256];
        if (clrun_graph_parse(chain, strlen(chain), "c.graph", &g, err, sizeof err) != CLRUN_OK)
            fail_msg("%s", err);
        clrun_remat_report r;
        assert_int_equal(clrun_graph_remat(g, 7, cases[n].policy, &r), CLRUN_OK);
        if (r.dropped != cases[n].dropped)
            fail_msg("%s: %d dropped", cases[n].policy, (int)r.dropped);
        expect_order(g, cases[n].order);
        if (clrun_graph_validate(g) != CLRUN_OK)
            fail_msg("%s", clrun_graph_last_error(g));
        clrun_graph_destroy(g);
    }
}

/* A graph output, a tensor of the second part, and everything with a boundary at the end stay. */
static void outputs_and_the_second_part_are_never_copied(void **state)
{
    (void)state;
    clrun_graph *g = parse();
    assert_int_equal(clrun_graph_mark_output(g, clrun_graph_find(g, "b")), CLRUN_OK);
    clrun_remat_report r;
    assert_int_equal(clrun_graph_remat(g, 5, "nothing_saveable", &r), CLRUN_OK);
    assert_string_equal(read_by(g, "f", 1), "b");
    assert_int_equal(r.dropped, 4); /* a, c, m, d */
    clrun_graph_destroy(g);
    for (int32_t boundary = 0; boundary <= 8; boundary += 8) {
        g = parse();
        assert_int_equal(clrun_graph_remat(g, boundary, "nothing_saveable", &r), CLRUN_OK);
        assert_int_equal(r.repeated_nodes, 0);
        expect_order(g, "a b c m d e f g");
        clrun_graph_destroy(g);
    }
}

static void bad_policies_and_boundaries_are_refused_and_change_nothing(void **state)
{
    (void)state;
    static const struct {
        const char *policy;
        int32_t boundary;
        const char *says;
    } cases[] = {
        {"everything", 5, "unknown policy 'everything'"},
        {"names:b,zz", 5, "'zz'"},
        {"names:b,,m", 5, "empty"},
        {"names:", 5, "lists no tensor"},
        {"names:b,", 5, "empty"},
        {"except:", 5, "lists no tensor"},
        {"except:zz", 5, "'zz'"},
        {"every:0", 5, "every:K takes a count"},
        {"every:2x", 5, "every:K takes a count"},
        {"every:", 5, "every:K takes a count"},
        {"cuts:0", 5, "cuts:K takes a count"},
        {"cuts:", 5, "cuts:K takes a count"},
        {"cutsy", 5, "unknown policy 'cutsy'"},
        {"sqrt_n", -1, "boundary -1"},
        {"sqrt_n", 9, "boundary 9"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        clrun_graph *g = parse();
        clrun_remat_report r = {.dropped = 7};
        assert_int_equal(clrun_graph_remat(g, cases[k].boundary, cases[k].policy, &r),
                         CLRUN_ERROR_INVALID_ARGUMENT);
        assert_int_equal(r.dropped, 0);
        if (strstr(clrun_graph_last_error(g), cases[k].says) == NULL)
            fail_msg("%s: '%s'", cases[k].policy, clrun_graph_last_error(g));
        expect_order(g, "a b c m d e f g");
        expect_kept(g);
        clrun_graph_destroy(g);
    }
    assert_int_equal(clrun_graph_remat(NULL, 0, "sqrt_n", NULL), CLRUN_ERROR_INVALID_ARGUMENT);
}

/* The rewrite by tensor ids (the trainer's per-tensor choice) drops exactly those given, as
 * except: by name does; an id no policy could drop (an input, a second-part or an output
 * tensor, one out of range) is refused by number with the graph unchanged. */
static void tensors_dropped_by_id_are_those_given(void **state)
{
    (void)state;
    clrun_graph *g = parse();
    clrun_remat_report r;
    int32_t drop[2] = {clrun_graph_find(g, "a"), clrun_graph_find(g, "d")};
    assert_int_equal(clrun__graph_remat_drop(g, 5, drop, 2, &r), CLRUN_OK);
    assert_int_equal(r.dropped, 2);
    expect_order(g, "a b c m d d.remat a.remat e f g"); /* except:a,d's */
    expect_kept(g);
    clrun_graph_destroy(g);
    g = parse();
    assert_int_equal(clrun__graph_remat_drop(g, 5, NULL, 0, &r), CLRUN_OK);
    assert_int_equal(r.dropped, 0);
    expect_order(g, "a b c m d e f g");
    static const char *const bad[] = {"x", "e", "g"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad + 1; k++) {
        int32_t id = k < 3 ? clrun_graph_find(g, bad[k]) : 999;
        char says[32];
        snprintf(says, sizeof says, "tensor %d is not", (int)id);
        assert_int_equal(clrun__graph_remat_drop(g, 5, &id, 1, &r), CLRUN_ERROR_INVALID_ARGUMENT);
        if (strstr(clrun_graph_last_error(g), says) == NULL)
            fail_msg("%s: '%s'", k < 3 ? bad[k] : "999", clrun_graph_last_error(g));
        expect_order(g, "a b c m d e f g");
        expect_kept(g);
    }
    assert_int_equal(clrun__graph_remat_drop(g, 5, NULL, 1, &r), CLRUN_ERROR_INVALID_ARGUMENT);
    clrun_graph_destroy(g);
}

/* Repeated nodes' names avoid the graph's own. */
static void copies_take_free_names(void **state)
{
    (void)state;
    clrun_graph *g = parse();
    clrun_tensor_type t = {CLRUN_F32, 2, {4, 4}};
    clrun_tensor_id taken;
    assert_int_equal(clrun_graph_add_input(g, "a.remat", &t, false, &taken), CLRUN_OK);
    assert_int_equal(clrun_graph_remat(g, 5, "names:b,m", NULL), CLRUN_OK);
    assert_string_equal(read_by(g, "e", 1), "a.remat2");
    clrun_graph_destroy(g);
}

/* The names copies get, and only those, are told apart (traces and reports rely on it). */
static void copies_are_told_by_their_names(void **state)
{
    (void)state;
    assert_int_equal(clrun_remat_copy_of("h1.remat"), 2);
    assert_int_equal(clrun_remat_copy_of("a.b.remat12"), 3);
    assert_int_equal(clrun_remat_copy_of("h1"), 0);
    assert_int_equal(clrun_remat_copy_of("h1.rematx"), 0);
    assert_int_equal(clrun_remat_copy_of("h1.remake"), 0);
    assert_int_equal(clrun_remat_copy_of(".remat"), 0);
    assert_int_equal(clrun_remat_copy_of(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(copies_are_told_by_their_names),
        cmocka_unit_test(nothing_saveable_repeats_the_first_part_before_its_reader),
        cmocka_unit_test(each_policy_keeps_what_it_names),
        cmocka_unit_test(the_last_segment_is_the_last_one_read),
        cmocka_unit_test(cut_segments_end_where_nothing_crosses),
        cmocka_unit_test(outputs_and_the_second_part_are_never_copied),
        cmocka_unit_test(bad_policies_and_boundaries_are_refused_and_change_nothing),
        cmocka_unit_test(copies_take_free_names),
        cmocka_unit_test(tensors_dropped_by_id_are_those_given),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
