# device: the OpenCL entry-point table, device selection, contexts and queues, programs built
# once per context and the on-disk binary cache. Depends on core.
libclrun_internal_la_SOURCES += \
	lib/device/cl.c lib/device/cl.h \
	lib/device/device.c lib/device/device.h \
	lib/device/context.c lib/device/context.h \
	lib/device/fail.c \
	lib/device/cache.c lib/device/cache.h \
	lib/device/program.c lib/device/program.h \
	lib/device/subset.c lib/device/subset.h

if HAVE_CMOCKA
check_PROGRAMS += tests/test_context
TESTS += tests/test_context
tests_test_context_SOURCES = tests/test_context.c tests/device_test.h
tests_test_context_CFLAGS = $(TEST_CFLAGS)
tests_test_context_LDADD = $(TEST_LDADD)
endif

if HAVE_CMOCKA
check_PROGRAMS += tests/test_subset
TESTS += tests/test_subset
tests_test_subset_SOURCES = tests/test_subset.c
tests_test_subset_CFLAGS = $(TEST_CFLAGS)
tests_test_subset_LDADD = $(TEST_LDADD)
endif
