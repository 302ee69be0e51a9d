# memory: the allocator core (policy, limits, statistics; no OpenCL), the device pool (chunks
# are cl_mem buffers, blocks are sub-buffers) and buffer I/O. Depends on core and device; the
# strategies (strategies/) are its pure offset managers.
libclrun_internal_la_SOURCES += \
	lib/memory/allocator.c lib/memory/allocator.h \
	lib/memory/pool.c lib/memory/pool.h \
	lib/memory/buffer_io.c

if HAVE_CMOCKA
check_PROGRAMS += tests/test_allocator tests/test_pool tests/test_pool_threads
TESTS += tests/test_allocator tests/test_pool tests/test_pool_threads

tests_test_allocator_SOURCES = tests/test_allocator.c
tests_test_allocator_CFLAGS = $(TEST_CFLAGS)
tests_test_allocator_LDADD = $(TEST_LDADD)

tests_test_pool_SOURCES = tests/test_pool.c tests/device_test.h
tests_test_pool_CFLAGS = $(TEST_CFLAGS)
tests_test_pool_LDADD = $(TEST_LDADD)

tests_test_pool_threads_SOURCES = tests/test_pool_threads.c tests/device_test.h
tests_test_pool_threads_CFLAGS = $(TEST_CFLAGS)
tests_test_pool_threads_LDADD = $(TEST_LDADD)
endif
