# train: the trainer (a train step's executor and the train state between steps) and its state
# files. Above exec; the step graph itself is built by lib/grad (pure).
libclrun_internal_la_SOURCES += \
	lib/train/train.c lib/train/train_internal.h \
	lib/train/train_state.c \
	lib/train/train_budget.c \
	lib/train/train_parallel.c lib/train/train_parallel_internal.h
clruninclude_HEADERS += \
	include/clrun/train.h \
	include/clrun/train_parallel.h

# clrun train on scikit-learn's digits from the command line (the harness exports srcdir).
TESTS += tests/cli_train.sh
EXTRA_DIST += tests/cli_train.sh tests/data/train/digits_mlp.graph tests/data/train/digits_cnn.graph

if HAVE_CMOCKA
check_PROGRAMS += tests/test_train
TESTS += tests/test_train
tests_test_train_SOURCES = tests/test_train.c tests/device_test.h tests/tanh_mlp.h
tests_test_train_CFLAGS = $(TEST_CFLAGS)
tests_test_train_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_train_fused
TESTS += tests/test_train_fused
tests_test_train_fused_SOURCES = tests/test_train_fused.c tests/device_test.h
tests_test_train_fused_CFLAGS = $(TEST_CFLAGS)
tests_test_train_fused_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/test_train_parallel
TESTS += tests/test_train_parallel
tests_test_train_parallel_SOURCES = tests/test_train_parallel.c tests/device_test.h tests/tanh_mlp.h
tests_test_train_parallel_CFLAGS = $(TEST_CFLAGS)
tests_test_train_parallel_LDADD = $(TEST_LDADD)
endif
